#include "runtime/executor.h"

#include <new>

namespace tessera {

Result<GraphExecutor> GraphExecutor::create(const Graph& g) {
  GraphExecutor e(g);
  const RefKernelTable& table = RefKernelTable::global();
  for (const Node& n : g.nodes()) {
    const RefKernelFn* k = table.find(n.domain, n.op_type);
    if (!k) return unimplemented(n.describe() + ": no kernel for op '" + n.op_type + "'");
    e.kernels_.push_back(k);
    bool has_subgraph = false;
    for (const auto& [key, a] : n.attrs) has_subgraph |= a.type == Attribute::Type::kGraph;
    e.has_subgraph_.push_back(has_subgraph);
  }
  e.use_counts_.assign(g.num_values(), 0);
  for (const Node& n : g.nodes()) {
    for (int v : n.inputs)
      if (v != kNoValue) ++e.use_counts_[v];
    for (int v : n.implicit_inputs) ++e.use_counts_[v];
  }
  return e;
}

Result<std::vector<Tensor>> GraphExecutor::run(const std::vector<Tensor>& inputs,
                                               const std::map<std::string, Tensor>& outer, BufferPool& buffers,
                                               ThreadPool* threads, RunStats& stats) const {
  const Graph& g = *graph_;
  if (inputs.size() != g.inputs().size()) {
    return invalid_argument("graph '" + g.name + "' takes " + std::to_string(g.inputs().size()) + " inputs, got " +
                            std::to_string(inputs.size()));
  }
  std::vector<Tensor> values(g.num_values());
  for (size_t i = 0; i < inputs.size(); ++i) values[g.inputs()[i]] = inputs[i];
  for (int v : g.outer_values()) {
    auto it = outer.find(g.value(v).name);
    if (it == outer.end()) return internal_error("outer-scope value '" + g.value(v).name + "' is not bound");
    values[v] = it->second;
  }
  auto tensor_of = [&](int v) -> const Tensor& { return g.value(v).constant ? *g.value(v).constant : values[v]; };
  // Inputs and outer values belong to the caller; never recycle them.
  auto owned_here = [&](int v) {
    const Value& val = g.value(v);
    return !val.constant && !val.is_graph_output && !val.is_graph_input && !val.is_outer_scope;
  };
  std::vector<int> remaining = use_counts_;

  for (int n = 0; n < g.num_nodes(); ++n) {
    const Node& node = g.node(n);
    std::vector<const Tensor*> in;
    for (int v : node.inputs) in.push_back(v == kNoValue ? nullptr : &tensor_of(v));
    RefKernelContext ctx(node, std::move(in), buffers, threads);
    if (has_subgraph_[n]) {
      std::map<std::string, Tensor> body_outer;
      for (int v : node.implicit_inputs) body_outer[g.value(v).name] = tensor_of(v);
      ctx.set_subgraph_runner([&, body_outer](const Graph& body, const std::vector<Tensor>& body_inputs)
                                  -> Result<std::vector<Tensor>> {
        TESSERA_ASSIGN_OR_RETURN(GraphExecutor sub, GraphExecutor::create(body));
        return sub.run(body_inputs, body_outer, buffers, threads, stats);
      });
    }
    Status st;
    try {
      st = (*kernels_[n])(ctx);
    } catch (const std::bad_alloc&) {
      // Out of memory is bad input here (an absurd shape), not a crash: report it as an error.
      st = invalid_argument(node.describe() + ": out of memory allocating its outputs");
    }
    TESSERA_RETURN_IF_ERROR(st);
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      int v = node.outputs[o];
      if (v == kNoValue) continue;
      if (!ctx.outputs()[o].defined()) {
        return internal_error(node.describe() + ": kernel did not produce output " + std::to_string(o));
      }
      values[v] = std::move(ctx.outputs()[o]);
      if (remaining[v] == 0 && owned_here(v)) buffers.release(values[v]);
    }
    // Liveness: a value's buffer returns to the pool after its last consumer.
    auto consumed = [&](int v) {
      if (v != kNoValue && !g.value(v).constant && --remaining[v] == 0 && owned_here(v)) buffers.release(values[v]);
    };
    for (int v : node.inputs) consumed(v);
    for (int v : node.implicit_inputs) consumed(v);
    ++stats.nodes_run;
  }
  std::vector<Tensor> out;
  for (int v : g.outputs()) out.push_back(tensor_of(v));
  return out;
}

}  // namespace tessera
