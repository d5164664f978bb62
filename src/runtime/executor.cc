#include "runtime/executor.h"

#include <chrono>
#include <new>
#include <queue>

namespace tessera {

namespace {
// Orders step ids so that every step runs after the producers of what it reads (Kahn's
// algorithm on the contracted graph, smallest node index first to stay close to graph order).
Result<std::vector<int>> order_steps(const Graph& g, const std::vector<int>& step_of_node,
                                     const std::vector<std::vector<int>>& step_nodes) {
  const int n_steps = static_cast<int>(step_nodes.size());
  std::vector<std::vector<int>> succ(n_steps);
  std::vector<int> indegree(n_steps, 0);
  for (int s = 0; s < n_steps; ++s) {
    std::vector<char> linked(n_steps, 0);
    for (int n : step_nodes[s]) {
      const Node& node = g.node(n);
      auto link = [&](int v) {
        if (v == kNoValue || g.value(v).producer < 0) return;
        int p = step_of_node[g.value(v).producer];
        if (p == s || linked[p]) return;
        linked[p] = 1;
        succ[p].push_back(s);
        ++indegree[s];
      };
      for (int v : node.inputs) link(v);
      for (int v : node.implicit_inputs) link(v);
    }
  }
  using Item = std::pair<int, int>;  // (first node, step)
  std::priority_queue<Item, std::vector<Item>, std::greater<>> ready;
  for (int s = 0; s < n_steps; ++s)
    if (indegree[s] == 0) ready.push({step_nodes[s].front(), s});
  std::vector<int> order;
  while (!ready.empty()) {
    int s = ready.top().second;
    ready.pop();
    order.push_back(s);
    for (int t : succ[s])
      if (--indegree[t] == 0) ready.push({step_nodes[t].front(), t});
  }
  if (static_cast<int>(order.size()) != n_steps) {
    return invalid_argument("the partitions of graph '" + g.name +
                            "' feed each other in a cycle: they cannot run one after another");
  }
  return order;
}
}  // namespace

Result<GraphExecutor> GraphExecutor::create(const Graph& g, const std::vector<Partition>& partitions,
                                            const CompileOptions& opts) {
  GraphExecutor e(g);
  e.layout_ = opts.layout;
  const int n_nodes = g.num_nodes();
  std::vector<int> step_of_node(n_nodes, -1);
  std::vector<std::vector<int>> step_nodes;
  std::vector<const Partition*> step_partition;
  for (const Partition& p : partitions) {
    if (p.nodes.capacity() != n_nodes) return internal_error("a partition of another graph");
    if (p.nodes.empty()) continue;
    bool is_ref = p.backend == nullptr || p.backend == &ref_backend();
    for (int n : p.nodes) {
      if (step_of_node[n] >= 0) return invalid_argument(g.node(n).describe() + " is in two partitions");
      if (is_ref) {  // reference partitions run node by node
        step_of_node[n] = static_cast<int>(step_nodes.size());
        step_nodes.push_back({n});
        step_partition.push_back(nullptr);
      }
    }
    if (is_ref) continue;
    for (int n : p.nodes) step_of_node[n] = static_cast<int>(step_nodes.size());
    step_nodes.push_back(p.nodes.to_vector());
    step_partition.push_back(&p);
  }
  for (int n = 0; n < n_nodes; ++n) {
    if (step_of_node[n] >= 0) continue;
    step_of_node[n] = static_cast<int>(step_nodes.size());
    step_nodes.push_back({n});
    step_partition.push_back(nullptr);
  }
  TESSERA_ASSIGN_OR_RETURN(std::vector<int> order, order_steps(g, step_of_node, step_nodes));

  const RefKernelTable& table = RefKernelTable::global();
  for (int s : order) {
    Step step;
    for (int n : step_nodes[s]) {
      for (int v : g.node(n).inputs)
        if (v != kNoValue) step.reads.push_back(v);
      for (int v : g.node(n).implicit_inputs) step.reads.push_back(v);
    }
    if (const Partition* p = step_partition[s]) {
      step.subgraph = std::make_unique<SubGraph>(g, p->nodes);
      auto kernel = compile_in_layout(*p->backend, *step.subgraph, opts);
      if (!kernel.ok()) {
        return Status(kernel.status().code(), p->backend->name() + " cannot compile " + step.subgraph->label() +
                                                  ": " + kernel.status().message());
      }
      step.kernel = std::move(*kernel);
      step.backend = p->backend;
      if (!e.region_runner_) e.region_runner_ = p->backend->region_runner();
    } else {
      const Node& n = g.node(step_nodes[s].front());
      step.node = step_nodes[s].front();
      step.ref = table.find(n.domain, n.op_type);
      if (!step.ref) return unimplemented(n.describe() + ": no kernel for op '" + n.op_type + "'");
      for (const auto& [key, a] : n.attrs) step.has_subgraph |= a.type == Attribute::Type::kGraph;
      if (step.has_subgraph && opts.layout != TensorLayout::kRowMajor)
        return unimplemented(n.describe() + ": control flow in a plan with channels-last tensors");
    }
    e.steps_.push_back(std::move(step));
  }
  e.use_counts_.assign(g.num_values(), 0);
  for (const Step& st : e.steps_)
    for (int v : st.reads) ++e.use_counts_[v];
  return e;
}

std::vector<int> GraphExecutor::step_nodes(int i) const {
  const Step& s = steps_[i];
  return s.subgraph ? s.subgraph->nodes().to_vector() : std::vector<int>{s.node};
}

std::string GraphExecutor::step_backend(int i) const {
  const Step& s = steps_[i];
  return s.backend ? s.backend->name() : "ref";
}

std::map<std::string, int> GraphExecutor::steps_per_backend() const {
  std::map<std::string, int> m;
  for (int i = 0; i < num_steps(); ++i) ++m[step_backend(i)];
  return m;
}

Result<std::vector<Tensor>> GraphExecutor::run(const std::vector<Tensor>& inputs,
                                               const std::map<std::string, Tensor>& outer, BufferPool& buffers,
                                               ThreadPool* threads, RunStats& stats,
                                               std::vector<Tensor>* keep_values) const {
  const Graph& g = *graph_;
  // The pool's loops run on the plan's other thread runtime for this run (restored after).
  struct UseRegionRunner {
    ThreadPool* pool;
    RegionRunner saved;
    UseRegionRunner(ThreadPool* p, RegionRunner r) : pool(r ? p : nullptr), saved(pool ? pool->region_runner() : nullptr) {
      if (pool) pool->set_region_runner(r);
    }
    ~UseRegionRunner() {
      if (pool) pool->set_region_runner(saved);
    }
  } use_region_runner(threads, region_runner_);
  if (inputs.size() != g.inputs().size()) {
    return invalid_argument("graph '" + g.name + "' takes " + std::to_string(g.inputs().size()) + " inputs, got " +
                            std::to_string(inputs.size()));
  }
  const bool channels_last = layout_ == TensorLayout::kChannelsLast;
  std::vector<Tensor> values(g.num_values());
  for (size_t i = 0; i < inputs.size(); ++i)
    values[g.inputs()[i]] = channels_last ? to_channels_last(inputs[i], buffers) : inputs[i];
  for (int v : g.outer_values()) {
    auto it = outer.find(g.value(v).name);
    if (it == outer.end()) return internal_error("outer-scope value '" + g.value(v).name + "' is not bound");
    values[v] = it->second;
  }
  auto tensor_of = [&](int v) -> const Tensor& { return g.value(v).constant ? *g.value(v).constant : values[v]; };
  // Inputs and outer values belong to the caller; never recycle them (their channels-last copies
  // are this run's).
  auto owned_here = [&](int v) {
    const Value& val = g.value(v);
    const bool callers = val.is_graph_input && !(channels_last && values[v].rank() == 4);
    return !keep_values && !val.constant && !val.is_graph_output && !callers && !val.is_outer_scope;
  };
  std::vector<int> remaining = use_counts_;
  const bool profile = stats.profile;
  stats.profile = false;  // nested subgraph runs do not profile; restored on every return
  struct Restore {
    RunStats& stats;
    bool profile;
    ~Restore() { stats.profile = profile; }
  } restore{stats, profile};
  if (profile) stats.step_seconds.assign(steps_.size(), 0.0);
  int step_index = -1;
  // Stores a produced value, releasing it at once when nothing reads it. `who()` names the step
  // (built only for the error: a decode step runs hundreds of steps).
  auto produced = [&](int v, Tensor t, const auto& who) -> Status {
    if (!t.defined()) return internal_error(who() + ": kernel did not produce value '" + g.value(v).name + "'");
    values[v] = std::move(t);
    if (remaining[v] == 0 && owned_here(v)) buffers.release(values[v]);
    return Status();
  };

  for (const Step& step : steps_) {
    ++step_index;
    auto started = profile ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
    Status st;
    if (step.kernel) {
      const SubGraph& sg = *step.subgraph;
      std::vector<const Tensor*> in;
      for (int v : sg.inputs()) in.push_back(&tensor_of(v));
      std::vector<Tensor> out(sg.outputs().size());
      KernelRunContext kctx{buffers, threads};
      try {
        st = step.kernel->run(in, out, kctx);
      } catch (const std::bad_alloc&) {
        st = invalid_argument(sg.label() + ": out of memory");
      }
      if (!st.ok()) return Status(st.code(), step.backend->name() + " kernel " + sg.label() + ": " + st.message());
      if (out.size() != sg.outputs().size()) return internal_error(sg.label() + ": wrong number of kernel outputs");
      for (size_t o = 0; o < out.size(); ++o)
        TESSERA_RETURN_IF_ERROR(produced(sg.outputs()[o], std::move(out[o]), [&] { return sg.label(); }));
      stats.nodes_run += sg.size();
    } else {
      const Node& node = g.node(step.node);
      std::vector<const Tensor*> in;
      std::vector<Tensor> row_major;  // channels-last inputs, converted for the reference kernel
      row_major.reserve(node.inputs.size());
      for (int v : node.inputs) {
        in.push_back(v == kNoValue ? nullptr : &tensor_of(v));
        if (channels_last && v != kNoValue && !g.value(v).constant && in.back()->rank() == 4) {
          row_major.push_back(to_row_major(*in.back(), buffers));
          in.back() = &row_major.back();
        }
      }
      RefKernelContext ctx(node, std::move(in), buffers, threads);
      if (step.has_subgraph) {
        std::map<std::string, Tensor> body_outer;
        for (int v : node.implicit_inputs) body_outer[g.value(v).name] = tensor_of(v);
        ctx.set_subgraph_runner([&, body_outer](const Graph& body, const std::vector<Tensor>& body_inputs)
                                    -> Result<std::vector<Tensor>> {
          TESSERA_ASSIGN_OR_RETURN(GraphExecutor sub, GraphExecutor::create(body));
          return sub.run(body_inputs, body_outer, buffers, threads, stats);
        });
      }
      try {
        st = (*step.ref)(ctx);
      } catch (const std::bad_alloc&) {
        // Out of memory is bad input here (an absurd shape), not a crash: report it as an error.
        st = invalid_argument(node.describe() + ": out of memory allocating its outputs");
      }
      for (Tensor& t : row_major) buffers.release(t);
      TESSERA_RETURN_IF_ERROR(st);
      for (size_t o = 0; o < node.outputs.size(); ++o) {
        int v = node.outputs[o];
        if (v == kNoValue) continue;
        Tensor t = std::move(ctx.outputs()[o]);
        if (channels_last && t.defined() && t.rank() == 4) {
          Tensor converted = to_channels_last(t, buffers);
          buffers.release(t);
          t = std::move(converted);
        }
        TESSERA_RETURN_IF_ERROR(produced(v, std::move(t), [&] { return node.describe(); }));
      }
      ++stats.nodes_run;
    }
    if (profile) {
      stats.step_seconds[step_index] =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    }
    // Liveness: a value's buffer returns to the pool after its last consumer.
    for (int v : step.reads)
      if (!g.value(v).constant && --remaining[v] == 0 && owned_here(v)) buffers.release(values[v]);
  }
  std::vector<Tensor> out;
  std::vector<int> converted;  // outputs whose channels-last buffers return to the pool
  for (int v : g.outputs()) {
    out.push_back(tensor_of(v));
    if (channels_last && !g.value(v).constant && out.back().rank() == 4) {
      out.back() = to_row_major(values[v], buffers);
      if (!keep_values) converted.push_back(v);  // the channels-last copy is this run's
    }
  }
  for (int v : converted)
    if (values[v].defined()) buffers.release(values[v]);
  if (keep_values) {
    for (int v = 0; v < g.num_values(); ++v) {
      if (g.value(v).constant) values[v] = *g.value(v).constant;
      else if (channels_last && values[v].defined()) values[v] = to_row_major(values[v], buffers);
    }
    *keep_values = std::move(values);
  }
  return out;
}

}  // namespace tessera
