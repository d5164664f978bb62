// tessera_backend_bench: every compiled-in backend side by side on the same small graphs (GEMM,
// the PP-OCR det model's distinct Conv layers, depthwise conv, elementwise chains), through the
// Backend interface exactly as the runtime uses it (supports, accepts, compile, Kernel::run), so
// the numbers are what the partitioner will see. Each result is also a fraction of this machine's
// peak (measured before and after the cases, the best kept) and is checked against the reference
// backend where that is cheap. Exits with 3 when a backend's output is wrong.
//
//   tessera_backend_bench [--threads N] [--filter SUBSTRING] [--backend NAME...] [--json FILE]
//                         [--quick] [--model DET.onnx] [--model-shape 1x3x640x640]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "backends/backend.h"
#include "bench_cases.h"
#include "machine_peak.h"
#include "runtime/buffer_pool.h"
#include "tools/model_inputs.h"

namespace tessera::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Outputs further from the reference than this (max|a-b| / max|b|) are flagged as wrong.
constexpr double kRelErrTolerance = 1e-3;

struct BenchOptions {
  int threads = 2;
  std::string filter;
  std::vector<std::string> backends;  // only these (and ref, the oracle); empty: all
  std::string json_path;
  bool quick = false;
  std::string model = "models/ch_PP-OCRv4_det_infer.onnx";
  std::string model_shape = "1x3x640x640";
  bool cold = false;  // evict the caches before every timed run (as a kernel meets them in a model)
  // How rank-4 inputs and outputs are stored (as in a plan): channels-last kernels get their
  // inputs converted once, before timing, and a backend that does not take channels-last has its
  // conversions timed with it (compile_in_layout), as the partitioner measures it.
  TensorLayout layout = TensorLayout::kRowMajor;

  double min_seconds() const { return quick ? 0.1 : 0.3; }  // repeat until this much time...
  int min_runs() const { return quick ? 3 : 5; }            // ...and at least this many runs
  double max_seconds() const { return quick ? 2.0 : 5.0; }  // but stop a slow kernel early
  int warmup_runs() const { return quick ? 1 : 2; }
};

// Bandwidth cases of at least this many bytes are beyond every cache: their runs alternate with
// triad passes over three buffers of kProbeMiB each.
constexpr double kPairedMinBytes = 64.0 * 1024 * 1024;
constexpr double kProbeMiB = 128;
// --cold: a buffer twice the largest L3 of this class of machine, written before each run.
constexpr size_t kEvictFloats = size_t{64} << 20 >> 2;

// What one backend did with one case.
struct Measurement {
  std::string status = "ok";  // ok, unavailable, unsupported, skipped, compile failed, run failed
  std::string reason;         // why, when not ok
  std::string grouping;       // how the graph was split into kernels, when not one kernel
  double seconds = 0;         // median of the timed runs
  double first_run_seconds = 0;  // the first run, lazy setup included
  int runs = 0;
  int kernels = 0;
  double rate = 0;                // GFLOP/s or GB/s
  double fraction = 0;            // of the machine's peak
  // Bandwidth cases larger than the caches: the triad GB/s measured right after each timed run,
  // and the median over runs of (this run's GB/s / that triad's GB/s), which is then `fraction`.
  double paired_triad_gbps = 0;
  double paired_fraction = 0;
  std::optional<double> rel_err;  // against the reference backend's output
  bool ok() const { return status == "ok"; }
};

// The case graph compiled on one backend: one kernel for the whole graph when the backend accepts
// it, else one kernel per node (what the partitioner makes of a group the backend refuses).
class CompiledCase {
 public:
  static Result<CompiledCase> compile(const Backend& b, const Graph& g, int threads,
                                      TensorLayout layout, std::string& grouping) {
    CompiledCase cc(g);
    CompileOptions opts;
    opts.threads = threads;
    opts.layout = layout;
    // Kernels may keep pointers into their SubGraph: each lives on the heap, never moved.
    auto whole = std::make_unique<SubGraph>(g, NodeSet::all(g.num_nodes()));
    Status accepted = b.accepts(*whole);
    if (accepted.ok()) {
      TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> k, compile_in_layout(b, *whole, opts));
      cc.steps_.push_back({std::move(whole), std::move(k)});
      return cc;
    }
    grouping = "one kernel per node (" + accepted.message() + ")";
    for (int n = 0; n < g.num_nodes(); ++n) {
      auto sg = std::make_unique<SubGraph>(g, NodeSet::of(g.num_nodes(), {n}));
      TESSERA_RETURN_IF_ERROR(b.accepts(*sg));
      TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> k, compile_in_layout(b, *sg, opts));
      cc.steps_.push_back({std::move(sg), std::move(k)});
    }
    return cc;
  }

  int kernels() const { return static_cast<int>(steps_.size()); }

  // Runs every kernel in order; `outputs` receives the graph outputs, intermediates go back to the
  // pool once the run is over.
  Status run(const std::vector<Tensor>& graph_inputs, BufferPool& pool, ThreadPool& threads,
             std::vector<Tensor>& outputs) {
    const Graph& g = *graph_;
    for (size_t i = 0; i < graph_inputs.size(); ++i) values_[g.inputs()[i]] = graph_inputs[i];
    KernelRunContext ctx{pool, &threads};
    Status st;
    for (Step& s : steps_) {
      std::vector<const Tensor*> ins;
      for (int v : s.sg->inputs()) ins.push_back(&values_[v]);
      std::vector<Tensor> outs(s.sg->outputs().size());
      st = s.kernel->run(ins, outs, ctx);
      if (!st.ok()) break;
      for (size_t o = 0; o < outs.size(); ++o) values_[s.sg->outputs()[o]] = std::move(outs[o]);
    }
    outputs.clear();
    if (st.ok())
      for (int v : g.outputs()) outputs.push_back(std::move(values_[v]));
    for (size_t v = 0; v < values_.size(); ++v) {
      if (!values_[v].defined()) continue;
      if (g.value(static_cast<int>(v)).is_graph_input)
        values_[v] = Tensor();  // the caller's
      else
        pool.release(values_[v]);
    }
    return st;
  }

 private:
  struct Step {
    std::unique_ptr<SubGraph> sg;
    std::unique_ptr<Kernel> kernel;
  };
  explicit CompiledCase(const Graph& g) : graph_(&g), values_(g.num_values()) {}
  const Graph* graph_;
  std::vector<Step> steps_;
  std::vector<Tensor> values_;  // per value id, during a run
};

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// max |a - b| / max |b| over all outputs; nullopt when shapes differ.
std::optional<double> relative_error(const std::vector<Tensor>& got,
                                     const std::vector<Tensor>& want) {
  if (got.size() != want.size()) return std::nullopt;
  double max_diff = 0, max_ref = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i].dims() != want[i].dims() || got[i].dtype() != DType::kFloat32 ||
        want[i].dtype() != DType::kFloat32)
      return std::nullopt;
    const float* a = got[i].data<float>();
    const float* b = want[i].data<float>();
    for (int64_t j = 0; j < got[i].numel(); ++j) {
      double d = std::fabs(static_cast<double>(a[j]) - b[j]);
      if (!(d <= max_diff)) max_diff = std::isnan(d) ? INFINITY : d;
      max_ref = std::max(max_ref, std::fabs(static_cast<double>(b[j])));
    }
  }
  return max_ref > 0 ? max_diff / max_ref : max_diff;
}

// Compiles and times the case graph on one backend. `first_outputs` receives a copy of the first
// run's outputs (for the correctness check).
// `probe` (bandwidth cases beyond the caches): a triad pass follows every timed run.
Measurement measure(const Backend& b, const Graph& g, const std::vector<Tensor>& row_major_inputs,
                    const BenchOptions& o, ThreadPool& threads,
                    std::vector<Tensor>& first_outputs, double work, TriadProbe* probe) {
  Measurement m;
  for (int n = 0; n < g.num_nodes(); ++n) {
    if (Status st = b.supports(g, n); !st.ok()) {
      m.status = "unsupported";
      m.reason = g.node(n).op_type + ": " + st.message();
      return m;
    }
  }
  Result<CompiledCase> cc = CompiledCase::compile(b, g, o.threads, o.layout, m.grouping);
  if (!cc.ok()) {
    m.status = "compile failed";
    m.reason = cc.status().message();
    return m;
  }
  m.kernels = cc->kernels();
  BufferPool pool;
  const bool channels_last = o.layout == TensorLayout::kChannelsLast;
  std::vector<Tensor> inputs;
  for (const Tensor& t : row_major_inputs)
    inputs.push_back(channels_last ? to_channels_last(t, pool) : t);
  std::vector<Tensor> outs;
  std::vector<double> times;
  double total = 0;
  auto timed_run = [&]() -> Status {
    if (o.cold) {  // one buffer for every case and backend, one write per cache line
      static std::vector<float> evict(kEvictFloats);
      for (size_t i = 0; i < evict.size(); i += 16) evict[i] += 1.0f;
    }
    Clock::time_point t0 = Clock::now();
    Status st = cc->run(inputs, pool, threads, outs);
    double s = seconds_since(t0);
    total += s;
    times.push_back(s);
    return st;
  };
  auto fail = [&](const Status& st) {
    m.status = "run failed";
    m.reason = st.message();
    return m;
  };
  // Warm-up runs: the first (lazy setup included) also gives the outputs to check. The timed
  // runs follow: at least one, however slow the kernel.
  for (int i = 0; i < o.warmup_runs(); ++i) {
    if (Status st = timed_run(); !st.ok()) return fail(st);
    if (i == 0) {
      m.first_run_seconds = times[0];
      for (const Tensor& t : outs)
        first_outputs.push_back(channels_last ? to_row_major(t, pool).clone() : t.clone());
    }
    for (Tensor& t : outs) pool.release(t);
    if (total > o.max_seconds()) break;
  }
  times.clear();
  total = 0;
  std::vector<double> triads, fractions;
  while (times.empty() ||
         ((static_cast<int>(times.size()) < o.min_runs() || total < o.min_seconds()) &&
          total < o.max_seconds())) {
    if (Status st = timed_run(); !st.ok()) return fail(st);
    for (Tensor& t : outs) pool.release(t);
    if (probe) {
      triads.push_back(probe->gbps());
      fractions.push_back(work / times.back() * 1e-9 / triads.back());
    }
  }
  m.runs = static_cast<int>(times.size());
  m.seconds = median(times);
  if (probe) {
    m.paired_triad_gbps = median(triads);
    m.paired_fraction = median(fractions);
  }
  return m;
}

struct CaseResult {
  BenchCase c;
  std::map<std::string, Measurement> by_backend;
};

MachinePeak best_of(MachinePeak a, const MachinePeak& b) {
  a.fma_gflops_1t = std::max(a.fma_gflops_1t, b.fma_gflops_1t);
  a.fma_gflops_nt = std::max(a.fma_gflops_nt, b.fma_gflops_nt);
  a.triad_gbps = std::max(a.triad_gbps, b.triad_gbps);
  a.copy_gbps = std::max(a.copy_gbps, b.copy_gbps);
  return a;
}

std::vector<Tensor> case_inputs(const Graph& g, uint64_t seed) {
  std::vector<Tensor> inputs;
  for (int v : g.inputs()) inputs.push_back(random_tensor(g.value(v).type.static_dims(), seed++));
  return inputs;
}

// Runs one case on every backend; `fraction` is filled in once the peak is final.
CaseResult run_case(const BenchCase& c, size_t index, const BenchOptions& o, ThreadPool& threads,
                    TriadProbe* probe) {
  CaseResult r{c, {}};
  Result<Graph> g = c.build();
  if (!g.ok()) {
    Measurement m;
    m.status = "compile failed";
    m.reason = "building the case graph: " + g.status().message();
    for (const Backend* b : all_backends()) r.by_backend[b->name()] = m;
    return r;
  }
  std::vector<Tensor> inputs = case_inputs(*g, 1000 + 10 * index);
  std::vector<Tensor> reference;
  for (const Backend* b : all_backends()) {  // "ref" comes first: its output is the oracle
    Measurement m;
    if (Status st = b->available(); !st.ok()) {
      m.status = "unavailable";
      m.reason = st.message();
    } else if (b != &ref_backend() && !o.backends.empty() &&
               std::find(o.backends.begin(), o.backends.end(), b->name()) == o.backends.end()) {
      m.status = "skipped";
      m.reason = "not selected by --backend";
    } else if (b == &ref_backend() && !c.ref_cheap) {
      m.status = "skipped";
      m.reason = "reference kernels too slow at this size (> ~2 s per run)";
    } else {
      std::vector<Tensor> outs;
      m = measure(*b, *g, inputs, o, threads, outs, c.work, probe);
      if (m.ok()) {
        m.rate = c.work / m.seconds * 1e-9;
        if (b == &ref_backend())
          reference = std::move(outs);
        else if (!reference.empty())
          m.rel_err = relative_error(outs, reference).value_or(INFINITY);
      }
    }
    r.by_backend[b->name()] = std::move(m);
  }
  return r;
}

// --- Reporting ---------------------------------------------------------------------------------

std::string format_time(double s) {
  char buf[32];
  if (s < 1e-3)
    std::snprintf(buf, sizeof buf, "%.1fus", s * 1e6);
  else if (s < 1)
    std::snprintf(buf, sizeof buf, "%.2fms", s * 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.2fs", s);
  return buf;
}

constexpr int kNameWidth = 40;
constexpr int kCellWidth = 23;

std::string format_cell(const Measurement& m, bool best) {
  char buf[64];
  if (m.status == "unsupported") return "unsupported";
  if (m.status == "skipped") return "skipped";
  if (!m.ok()) return "FAILED";
  bool wrong = m.rel_err && !(*m.rel_err <= kRelErrTolerance);
  std::snprintf(buf, sizeof buf, "%8s %7.1f %3.0f%%%s%s", format_time(m.seconds).c_str(), m.rate,
                100 * m.fraction, best ? "*" : "", wrong ? "!" : "");
  return buf;
}

// `model`: the --model file, named in the titles of its groups.
std::string group_title(const std::string& group, const std::string& model) {
  const std::string stem = std::filesystem::path(model).stem().string();
  if (group == "gemm") return "GEMM, MatMul with constant B (M x K x N)";
  if (group == "model conv") return stem + " Conv layers (xN: occurrences in the model)";
  if (group == "model depthwise") return stem + " depthwise Conv layers";
  if (group == "depthwise") return "depthwise Conv";
  return "elementwise chains (32M: % of the triad bandwidth measured after each run, median; 64K: "
         "cache-resident, % of the peak, above the DRAM peak)";
}

// One row: the case name then a cell per backend, the fastest marked.
void print_row(const std::string& name, const std::vector<const Backend*>& shown,
               const std::map<std::string, Measurement>& by_backend) {
  const Measurement* best = nullptr;
  for (const Backend* b : shown) {
    const Measurement& m = by_backend.at(b->name());
    if (m.ok() && (!best || m.seconds < best->seconds)) best = &m;
  }
  std::printf("%-*s", kNameWidth, name.c_str());
  std::string worst;
  double worst_err = -1;
  for (const Backend* b : shown) {
    const Measurement& m = by_backend.at(b->name());
    std::printf(" %*s", kCellWidth, format_cell(m, &m == best && shown.size() > 1).c_str());
    if (m.rel_err && !(*m.rel_err <= worst_err)) {
      worst_err = *m.rel_err;
      worst = b->name();
    }
  }
  if (worst_err >= 0) std::printf("  %.1e %s", worst_err, worst.c_str());
  std::printf("\n");
}

// The group's time as the model would spend it (each case times its occurrences), for the backends
// that ran every case of the group.
std::map<std::string, Measurement> group_total(const std::vector<const CaseResult*>& group,
                                               const std::vector<const Backend*>& shown,
                                               double peak_rate) {
  std::map<std::string, Measurement> total;
  for (const Backend* b : shown) {
    Measurement t;
    double work = 0;
    for (const CaseResult* r : group) {
      const Measurement& m = r->by_backend.at(b->name());
      if (!m.ok()) {
        t.status = "skipped";
        break;
      }
      t.seconds += m.seconds * r->c.occurrences;
      work += r->c.work * r->c.occurrences;
    }
    if (t.ok()) {
      t.rate = work / t.seconds * 1e-9;
      t.fraction = peak_rate > 0 ? t.rate / peak_rate : 0;
    }
    total[b->name()] = t;
  }
  return total;
}

void print_table(const std::vector<CaseResult>& results, const MachinePeak& peak,
                 const BenchOptions& o) {
  std::vector<const Backend*> shown;
  for (const Backend* b : all_backends()) {
    if (Status st = b->available(); st.ok())
      shown.push_back(b);
    else
      std::printf("%-8s unavailable: %s\n", b->name().c_str(), st.message().c_str());
  }
  std::printf(
      "cells: median time, GFLOP/s (GEMM, conv) or GB/s (elementwise), %% of peak; * fastest, ! "
      "wrong (rel err > %g)\n",
      kRelErrTolerance);
  for (size_t i = 0; i < results.size();) {
    std::vector<const CaseResult*> group;
    for (size_t j = i; j < results.size() && results[j].c.group == results[i].c.group; ++j)
      group.push_back(&results[j]);
    i += group.size();
    bool flops = group[0]->c.work_kind == WorkKind::kFlops;
    double peak_rate = flops ? peak.fma_gflops_nt : peak.triad_gbps;
    std::printf("\n%s; peak %.1f %s at %d threads, %s\n", group_title(group[0]->c.group, o.model).c_str(),
                peak_rate, flops ? "GFLOP/s" : "GB/s", o.threads, layout_name(o.layout));
    std::printf("%-*s", kNameWidth, "case");
    for (const Backend* b : shown) std::printf(" %*s", kCellWidth, b->name().c_str());
    std::printf("  max rel err\n");
    bool repeated = false;
    for (const CaseResult* r : group) {
      std::string name = r->c.name;
      if (r->c.occurrences > 1) name += " x" + std::to_string(r->c.occurrences);
      repeated = repeated || r->c.occurrences > 1;
      print_row(name, shown, r->by_backend);
    }
    if (group.size() > 1 && group[0]->c.group.starts_with("model"))
      print_row(repeated ? "total (xN counted)" : "total", shown,
                group_total(group, shown, peak_rate));
  }
  // Why a backend did not run a case, once per distinct reason.
  std::map<std::string, int> reasons;
  for (const CaseResult& r : results)
    for (const Backend* b : shown) {
      const Measurement& m = r.by_backend.at(b->name());
      if (!m.ok()) ++reasons[b->name() + ": " + m.status + ": " + m.reason];
    }
  if (!reasons.empty()) std::printf("\n");
  for (const auto& [reason, count] : reasons)
    std::printf("  %s (%d case%s)\n", reason.c_str(), count, count > 1 ? "s" : "");
}

nlohmann::json to_json(const std::vector<CaseResult>& results, const MachinePeak& peak,
                       const BenchOptions& o) {
  nlohmann::json j;
  j["benchmark"] = "backends";
  j["threads"] = o.threads;
  j["quick"] = o.quick;
  j["filter"] = o.filter;
  j["layout"] = tessera::layout_name(o.layout);
  std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  j["date"] = date;
  j["machine"] = {{"isa", peak.isa},
                  {"fma_gflops_1t", peak.fma_gflops_1t},
                  {"fma_gflops", peak.fma_gflops_nt},
                  {"triad_gbps", peak.triad_gbps},
                  {"copy_gbps", peak.copy_gbps},
                  {"stream_buffer_mib", peak.stream_mib},
                  {"hardware_threads", std::thread::hardware_concurrency()}};
  j["backends"] = nlohmann::json::array();
  for (const Backend* b : all_backends()) {
    Status st = b->available();
    nlohmann::json jb = {{"name", b->name()},
                         {"version", b->version()},
                         {"fusion_style", fusion_style_name(b->fusion_style())},
                         {"available", st.ok()}};
    if (!st.ok()) jb["reason"] = st.message();
    j["backends"].push_back(jb);
  }
  j["cases"] = nlohmann::json::array();
  for (const CaseResult& r : results) {
    bool flops = r.c.work_kind == WorkKind::kFlops;
    nlohmann::json jc = {{"name", r.c.name},
                         {"group", r.c.group},
                         {flops ? "flops" : "bytes", r.c.work},
                         {"occurrences", r.c.occurrences}};
    for (const auto& [name, m] : r.by_backend) {
      nlohmann::json jm = {{"status", m.status}};
      if (m.ok()) {
        jm["seconds"] = m.seconds;
        jm["runs"] = m.runs;
        jm["first_run_seconds"] = m.first_run_seconds;
        jm["kernels"] = m.kernels;
        jm[flops ? "gflops" : "gbps"] = m.rate;
        jm["fraction_of_peak"] = m.fraction;
        if (m.paired_fraction > 0) jm["paired_triad_gbps"] = m.paired_triad_gbps;
        if (m.rel_err)
          jm["rel_err"] =
              std::isfinite(*m.rel_err) ? nlohmann::json(*m.rel_err) : nlohmann::json("mismatch");
        if (!m.grouping.empty()) jm["grouping"] = m.grouping;
      } else {
        jm["reason"] = m.reason;
      }
      jc["results"][name] = jm;
    }
    j["cases"].push_back(jc);
  }
  return j;
}


// The 1-minute load average (Linux), or -1.
double load_average() {
  std::ifstream f("/proc/loadavg");
  double load = -1;
  f >> load;
  return f ? load : -1;
}

// Says why the numbers may be noisy: other processes on the CPUs, or peaks that moved.
std::string busy_warning(double load, const MachinePeak& before, const MachinePeak& after) {
  std::string w;
  unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  char buf[256];
  if (load > 0.5 * hw) {
    std::snprintf(buf, sizeof buf,
                  "the machine was busy (load average %.1f on %u hardware threads): timings of "
                  "multi-threaded kernels may include scheduler waits. ",
                  load, hw);
    w += buf;
  }
  double lo = std::min(before.fma_gflops_1t, after.fma_gflops_1t);
  double hi = std::max(before.fma_gflops_1t, after.fma_gflops_1t);
  if (lo < 0.8 * hi) {
    std::snprintf(buf, sizeof buf,
                  "the FMA peak moved during the run (%.1f then %.1f GFLOP/s on 1 thread).",
                  before.fma_gflops_1t, after.fma_gflops_1t);
    w += buf;
  }
  return w;
}

bool matches(const BenchCase& c, const std::string& filter) {
  return filter.empty() || c.name.find(filter) != std::string::npos ||
         c.group.find(filter) != std::string::npos;
}

int run_bench(const BenchOptions& o) {
  std::vector<BenchCase> cases = gemm_cases();
  auto shape = parse_dims(o.model_shape);
  if (!shape.ok()) {
    std::fprintf(stderr, "error: --model-shape: %s\n", shape.status().message().c_str());
    return 2;
  }
  if (std::filesystem::exists(o.model)) {
    auto convs = model_conv_cases(o.model, *shape);
    if (!convs.ok()) {
      std::fprintf(stderr, "error: %s: %s\n", o.model.c_str(), convs.status().to_string().c_str());
      return 1;
    }
    // Plain convs first, then the model's depthwise ones, each group in model order.
    std::stable_partition(convs->begin(), convs->end(),
                          [](const BenchCase& c) { return c.group == "model conv"; });
    for (BenchCase& c : *convs) cases.push_back(std::move(c));
  } else {
    std::fprintf(stderr, "bench: %s not found (make models): no model Conv cases\n",
                 o.model.c_str());
  }
  for (BenchCase& c : se_projection_cases()) cases.push_back(std::move(c));
  for (BenchCase& c : depthwise_cases()) cases.push_back(std::move(c));
  for (BenchCase& c : elementwise_cases()) cases.push_back(std::move(c));
  std::erase_if(cases, [&](const BenchCase& c) { return !matches(c, o.filter); });
  if (cases.empty()) {
    std::fprintf(stderr, "error: --filter '%s' matches no case\n", o.filter.c_str());
    return 2;
  }

  const double load_before = load_average();
  MachinePeak peak = measure_machine_peak(o.threads, o.quick);
  ThreadPool threads(o.threads);
  std::vector<CaseResult> results;
  std::unique_ptr<TriadProbe> probe;
  for (size_t i = 0; i < cases.size(); ++i) {
    std::fprintf(stderr, "bench: [%zu/%zu] %s\n", i + 1, cases.size(), cases[i].name.c_str());
    // A bandwidth case far beyond the caches is timed between triad passes (see TriadProbe).
    const bool paired = cases[i].work_kind == WorkKind::kBytes && cases[i].work >= kPairedMinBytes;
    if (paired && !probe) probe = std::make_unique<TriadProbe>(o.threads, kProbeMiB);
    results.push_back(run_case(cases[i], i, o, threads, paired ? probe.get() : nullptr));
  }
  // Measured again at the end: a busy moment at the start would understate the peak.
  MachinePeak peak_after = measure_machine_peak(o.threads, o.quick);
  std::string warning = busy_warning(load_before, peak, peak_after);
  peak = best_of(peak, peak_after);
  std::printf(
      "machine: %s, fp32 FMA peak %.1f GFLOP/s (1 thread), %.1f GFLOP/s (%d threads); "
      "stream triad %.1f GB/s, copy %.1f GB/s (%d threads)\n",
      peak.isa.c_str(), peak.fma_gflops_1t, peak.fma_gflops_nt, o.threads, peak.triad_gbps,
      peak.copy_gbps, o.threads);
  for (CaseResult& r : results) {
    double peak_rate = r.c.work_kind == WorkKind::kFlops ? peak.fma_gflops_nt : peak.triad_gbps;
    for (auto& [name, m] : r.by_backend) {
      if (m.paired_fraction > 0)
        m.fraction = m.paired_fraction;
      else if (m.ok() && peak_rate > 0)
        m.fraction = m.rate / peak_rate;
    }
  }
  print_table(results, peak, o);
  if (!warning.empty()) std::printf("\nwarning: %s\n", warning.c_str());

  if (!o.json_path.empty()) {
    std::filesystem::path p(o.json_path);
    std::error_code ec;
    if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
    std::ofstream f(o.json_path);
    nlohmann::json j = to_json(results, peak, o);
    j["machine"]["load_average_at_start"] = load_before;
    if (!warning.empty()) j["warning"] = warning;
    f << j.dump(2) << "\n";
    if (!f) {
      std::fprintf(stderr, "error: cannot write %s\n", o.json_path.c_str());
      return 1;
    }
    std::printf("\nwrote %s\n", o.json_path.c_str());
  }
  // Wrong results are a failure: a fast-but-wrong kernel must not pass silently.
  for (const CaseResult& r : results)
    for (const auto& [name, m] : r.by_backend)
      if (m.rel_err && !(*m.rel_err <= kRelErrTolerance)) return 3;
  return 0;
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) {
  tessera::bench::BenchOptions o;
  CLI::App app{
      "Every backend side by side on GEMM, conv and elementwise cases, as a fraction of this "
      "machine's peak"};
  app.add_option("--threads", o.threads, "threads per kernel (the session's thread count)")
      ->check(CLI::PositiveNumber);
  app.add_option("--filter", o.filter, "only cases whose name or group contains this");
  app.add_option("--backend", o.backends, "only this backend (repeatable; ref always runs)");
  app.add_option("--json", o.json_path, "write machine-readable results here");
  app.add_flag("--quick", o.quick, "fewer and shorter repeats");
  app.add_flag("--cold", o.cold,
               "write a 64 MiB buffer before every run, so operands come from memory, as they "
               "often do inside a model");
  std::string layout = "row-major";
  app.add_option("--layout", layout,
                 "how rank-4 tensors enter and leave the kernels, as in a plan: row-major or "
                 "channels-last (inputs converted before timing; a backend that cannot take "
                 "channels-last is timed with its conversions)")
      ->check(CLI::IsMember({"row-major", "channels-last"}));
  app.add_option("--model", o.model, "ONNX model whose Conv layers are cases");
  app.add_option("--model-shape", o.model_shape, "the model's input shape");
  CLI11_PARSE(app, argc, argv);
  o.layout = *tessera::parse_layout(layout);
  return tessera::bench::run_bench(o);
}
