#include "runtime/measuring_estimator.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <new>
#include <random>

#include "ir/subgraph.h"
#include "ir/tensor_compare.h"
#include "ops/op_registry.h"
#include "runtime/buffer_pool.h"
#include "runtime/executor.h"

namespace tessera {

using Clock = std::chrono::steady_clock;

Tensor random_input_tensor(DType dtype, const std::vector<int64_t>& dims, uint64_t seed) {
  Tensor t(dtype, dims);
  std::mt19937_64 rng(seed);
  if (dtype == DType::kString) {
    for (auto& s : t.strings()) s = "x";
    return t;
  }
  for (int64_t i = 0; i < t.numel(); ++i) {
    switch (dtype) {
      case DType::kFloat32: t.data<float>()[i] = std::uniform_real_distribution<float>(-1.f, 1.f)(rng); break;
      case DType::kFloat64: t.data<double>()[i] = std::uniform_real_distribution<double>(-1.0, 1.0)(rng); break;
      case DType::kInt64: t.data<int64_t>()[i] = static_cast<int64_t>(rng() % 4); break;
      case DType::kInt32: t.data<int32_t>()[i] = static_cast<int32_t>(rng() % 4); break;
      case DType::kBool: t.data<bool>()[i] = (rng() & 1) != 0; break;
      default: {  // other dtypes: small random bytes are valid values of every integer type
        uint8_t* p = static_cast<uint8_t*>(t.raw_data()) + i * dtype_size(dtype);
        std::memset(p, 0, dtype_size(dtype));
        p[0] = static_cast<uint8_t>(rng() % 4);
      }
    }
  }
  return t;
}

Result<std::vector<Tensor>> capture_reference_values(const Graph& g, const std::map<std::string, Tensor>& inputs,
                                                     int threads, uint64_t seed, std::vector<double>* node_seconds) {
  std::vector<Tensor> in;
  for (int v : g.inputs()) {
    const Value& val = g.value(v);
    if (auto it = inputs.find(val.name); it != inputs.end()) {
      in.push_back(it->second);
      continue;
    }
    if (!val.type.is_static()) {
      return invalid_argument("input '" + val.name + "' has dynamic dims " + val.type.to_string() +
                              ": give its shape (--shape " + val.name + "=...) or its data");
    }
    in.push_back(random_input_tensor(val.type.dtype, val.type.static_dims(), seed + in.size()));
  }
  TESSERA_ASSIGN_OR_RETURN(GraphExecutor exec, GraphExecutor::create(g));
  BufferPool buffers;
  ThreadPool pool(threads);
  RunStats stats;
  stats.profile = node_seconds != nullptr;
  std::vector<Tensor> values;
  TESSERA_RETURN_IF_ERROR(exec.run(in, {}, buffers, &pool, stats, &values).status().with_context("the reference run"));
  if (node_seconds) {
    node_seconds->assign(g.num_nodes(), 0.0);
    for (int s = 0; s < exec.num_steps(); ++s) (*node_seconds)[exec.step_nodes(s).front()] = stats.step_seconds[s];
  }
  return values;
}

Cost time_repeatedly(const std::function<Status()>& run, const MeasureOptions& options) {
  for (int i = 0; i < options.warmup_runs; ++i)
    if (Status st = run(); !st.ok()) return Cost::invalid(st.message());
  std::vector<double> times;
  double total = 0;
  while (static_cast<int>(times.size()) < options.max_runs &&
         (static_cast<int>(times.size()) < options.min_runs || total < options.min_total_seconds)) {
    auto t0 = Clock::now();
    if (Status st = run(); !st.ok()) return Cost::invalid(st.message());
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    times.push_back(s);
    total += s;
  }
  return median_cost(std::move(times));
}

Cost median_cost(std::vector<double> times) {
  if (times.empty()) return Cost::invalid("no runs");
  std::sort(times.begin(), times.end());
  auto at = [&](double q) { return times[static_cast<size_t>(q * static_cast<double>(times.size() - 1) + 0.5)]; };
  return Cost::of(at(0.5), at(0.75) - at(0.25));
}

namespace {

// A compiled kernel of one subgraph with the tensors to feed it.
struct Probe {
  std::unique_ptr<SubGraph> sg;
  std::unique_ptr<Kernel> kernel;
  std::vector<const Tensor*> inputs;
  std::vector<Tensor> converted;  // inputs in the plan's layout, where it differs from the reference's
};

// Runs the kernel once; outputs go back to `buffers` unless `keep` wants them.
Status run_once(Probe& p, BufferPool& buffers, ThreadPool* pool, std::vector<Tensor>* keep = nullptr) {
  std::vector<Tensor> out(p.sg->outputs().size());
  KernelRunContext ctx{buffers, pool};
  Status st;
  try {
    st = p.kernel->run(p.inputs, out, ctx);
  } catch (const std::bad_alloc&) {
    st = invalid_argument("out of memory");
  } catch (const std::exception& e) {
    st = internal_error(std::string("exception: ") + e.what());
  }
  if (st.ok() && out.size() != p.sg->outputs().size()) st = internal_error("wrong number of kernel outputs");
  if (keep) *keep = out;
  for (Tensor& t : out) buffers.release(t);
  return st;
}

// A small graph for probing a backend's hand-over cost: the first of a Relu over 64x56x56 floats
// or a 128x128 MatMul that `b` supports; nullopt if it supports neither.
std::optional<Graph> probe_graph(const Backend& b) {
  for (int variant = 0; variant < 2; ++variant) {
    Graph g;
    g.opsets[""] = 17;
    std::vector<int64_t> dims = variant == 0 ? std::vector<int64_t>{1, 64, 56, 56} : std::vector<int64_t>{128, 128};
    int x = g.add_input("x", TensorType::of(DType::kFloat32, dims));
    std::vector<int> in = {x};
    if (variant == 1) in.push_back(g.add_constant("w", random_input_tensor(DType::kFloat32, dims, 7)));
    int y = g.add_value("y");
    g.add_node(variant == 0 ? "Relu" : "MatMul", in, {y}, {}, "probe");
    g.node(0).opset = 17;
    g.mark_output(y);
    if (!OpRegistry::global().infer_node(g, 0).ok() || !g.finalize().ok()) continue;
    g.node(0).opset = 17;
    if (b.supports(g, 0).ok()) return g;
  }
  return std::nullopt;
}

}  // namespace

MeasuringEstimator::MeasuringEstimator(const Graph& g, const std::vector<Tensor>& values, MeasureOptions options)
    : graph_(g),
      values_(values),
      options_(options),
      pool_(std::make_unique<ThreadPool>(options.threads)),
      buffers_(std::make_unique<BufferPool>()),
      max_abs_(values.size(), -1.0) {}

MeasuringEstimator::~MeasuringEstimator() = default;

Cost MeasuringEstimator::cost(const Candidate& c) {
  if (!c.backend) return Cost::invalid("no backend");
  if (Status st = c.backend->available(); !st.ok()) return Cost::invalid("backend not available: " + st.message());
  Probe p;
  p.sg = std::make_unique<SubGraph>(graph_, c.nodes);
  CompileOptions copts;
  copts.threads = options_.threads;
  copts.layout = options_.layout;
  auto kernel = compile_in_layout(*c.backend, *p.sg, copts);
  if (!kernel.ok()) return Cost::invalid("does not build: " + kernel.status().message());
  p.kernel = std::move(*kernel);
  const bool channels_last = options_.layout == TensorLayout::kChannelsLast;
  p.converted.reserve(p.sg->inputs().size());
  for (int v : p.sg->inputs()) {
    if (static_cast<size_t>(v) >= values_.size() || !values_[v].defined())
      return Cost::invalid("no reference value for input '" + graph_.value(v).name + "'");
    p.inputs.push_back(&values_[v]);
    if (channels_last && values_[v].rank() == 4) {
      HeapAllocator heap;
      p.converted.push_back(to_channels_last(values_[v], heap));
      p.inputs.back() = &p.converted.back();
    }
  }
  ++measured_;
  // The buffers of earlier candidates are reused (fresh pages cost faults on every first touch),
  // up to a bound: a large model's candidates would otherwise keep every size they ever used.
  if (buffers_->reserved_bytes() > kKeptBufferBytes) buffers_->release_free();
  BufferPool& buffers = *buffers_;
  std::vector<Tensor> got;
  if (Status st = run_once(p, buffers, pool_.get(), &got); !st.ok()) return Cost::invalid("fails: " + st.message());
  Status mismatch;
  for (size_t o = 0; o < got.size() && mismatch.ok(); ++o) {
    const int v = p.sg->outputs()[o];
    if (max_abs_[v] < 0) max_abs_[v] = max_abs(values_[v]);
    const double atol = options_.atol * std::max(1.0, max_abs_[v]);
    HeapAllocator heap;
    mismatch = compare_tensors(channels_last ? to_row_major(got[o], heap) : got[o], values_[v], options_.rtol, atol)
                   .with_context("output '" + graph_.value(v).name + "' differs from the reference");
  }
  for (Tensor& t : got) buffers.release(t);
  if (!mismatch.ok()) return Cost::invalid(mismatch.message());
  // The checked run above was a warm-up run.
  MeasureOptions timed = options_;
  timed.warmup_runs = std::max(0, options_.warmup_runs - 1);
  Cost cost = time_repeatedly([&] { return run_once(p, buffers, pool_.get()); }, timed);
  if (!cost.valid) cost.reason = "fails: " + cost.reason;
  return cost;
}

double MeasuringEstimator::transition_seconds(const Backend* from, const Backend* to) {
  if (!from || !to || from == to) return 0;
  if (auto it = transitions_.find({from, to}); it != transitions_.end()) return it->second;
  double seconds = 0;
  std::optional<Graph> ga = probe_graph(*from), gb = probe_graph(*to);
  if (ga && gb) {
    CompileOptions copts;
    copts.threads = options_.threads;
    Probe a, b;
    a.sg = std::make_unique<SubGraph>(*ga, NodeSet::all(ga->num_nodes()));
    b.sg = std::make_unique<SubGraph>(*gb, NodeSet::all(gb->num_nodes()));
    auto ka = from->compile(*a.sg, copts);
    auto kb = to->compile(*b.sg, copts);
    if (ka.ok() && kb.ok()) {
      a.kernel = std::move(*ka);
      b.kernel = std::move(*kb);
      Tensor xa = random_input_tensor(DType::kFloat32, ga->value(ga->inputs()[0]).type.static_dims(), 1);
      Tensor xb = random_input_tensor(DType::kFloat32, gb->value(gb->inputs()[0]).type.static_dims(), 2);
      a.inputs = {&xa};
      b.inputs = {&xb};
      BufferPool buffers;
      ThreadPool* pool = pool_.get();
      // As in a plan with both: the pool's loops on the own thread runtime of either (if any).
      const RegionRunner saved = pool->region_runner();
      pool->set_region_runner(from->region_runner() ? from->region_runner() : to->region_runner());
      // Alone, each kernel follows itself; alternating, each follows the other backend, so the
      // pair pays both hand-overs (from->to and to->from): half of the excess is one of them.
      Cost ta = time_repeatedly([&] { return run_once(a, buffers, pool); }, options_);
      Cost tb = time_repeatedly([&] { return run_once(b, buffers, pool); }, options_);
      Cost tab = time_repeatedly(
          [&] {
            TESSERA_RETURN_IF_ERROR(run_once(a, buffers, pool));
            return run_once(b, buffers, pool);
          },
          options_);
      pool->set_region_runner(saved);
      if (ta.valid && tb.valid && tab.valid) seconds = std::max(0.0, (tab.seconds - ta.seconds - tb.seconds) / 2);
    }
  }
  transitions_[{from, to}] = seconds;
  transitions_[{to, from}] = seconds;
  return seconds;
}

}  // namespace tessera
