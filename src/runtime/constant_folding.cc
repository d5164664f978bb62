#include "runtime/constant_folding.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "ops/op_registry.h"

namespace tessera {

namespace {

// Ops whose result is not a function of their inputs, or which carry subgraphs or sequences.
bool never_folds(const Node& node) {
  static const std::set<std::string> kOps = {
      "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial",
      "Bernoulli",    "If",            "Loop",             "Scan",              "SequenceAt",
      "SequenceConstruct", "SequenceEmpty", "SequenceErase", "SequenceInsert", "SequenceLength",
      "SplitToSequence", "ConcatFromSequence", "Dropout"};
  return !node.domain.empty() || kOps.count(node.op_type) != 0 || !node.implicit_inputs.empty();
}

// Shape (with opset 15's start / end) and Size of a value whose dims are all known.
std::optional<Tensor> shape_of_static(const Graph& g, const Node& node) {
  if ((node.op_type != "Shape" && node.op_type != "Size") || node.inputs.size() != 1) return std::nullopt;
  const TensorType& t = g.value(node.inputs[0]).type;
  if (!t.is_static()) return std::nullopt;
  const std::vector<int64_t> dims = t.static_dims();
  if (node.op_type == "Size") return Tensor::scalar<int64_t>(shape_numel(dims));
  const int64_t rank = static_cast<int64_t>(dims.size());
  auto clamp_axis = [rank](int64_t a) {
    if (a < 0) a += rank;
    return std::clamp<int64_t>(a, 0, rank);
  };
  const int64_t start = clamp_axis(node.attr_int("start", 0));
  const int64_t end = clamp_axis(node.attr_int("end", rank));
  const int64_t count = std::max<int64_t>(0, end - start);
  Tensor out(DType::kInt64, {count});
  for (int64_t i = 0; i < count; ++i) out.data<int64_t>()[i] = dims[start + i];
  return out;
}

bool all_inputs_constant(const Graph& g, const Node& node) {
  bool any = false;
  for (int v : node.inputs) {
    if (v == kNoValue) continue;
    if (!g.value(v).constant) return false;
    any = true;
  }
  return any;
}

// Runs one node whose inputs are all constants on the reference kernels.
Result<std::vector<Tensor>> run_on_ref(const Graph& g, int n) {
  SubGraph sg(g, NodeSet::of(g.num_nodes(), {n}));
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> kernel, ref_backend().compile(sg, CompileOptions{}));
  HeapAllocator alloc;
  KernelRunContext ctx{alloc, nullptr};
  std::vector<Tensor> outputs(sg.outputs().size());
  TESSERA_RETURN_IF_ERROR(kernel->run({}, outputs, ctx));
  // The kernel returns the subgraph's outputs; map them back to the node's output slots.
  std::vector<Tensor> by_slot(g.node(n).outputs.size());
  for (size_t i = 0; i < sg.outputs().size(); ++i) {
    const Value& v = g.value(sg.outputs()[i]);
    by_slot[v.producer_output] = std::move(outputs[i]);
  }
  return by_slot;
}

std::string unused_name(const Graph& g, const std::string& base) {
  std::string name = base + "/folded";
  for (int i = 2; g.find_value(name); ++i) name = base + "/folded" + std::to_string(i);
  return name;
}

// One pass in node order; the dims that folding reveals reach later nodes only after the next
// type inference, so fold_constants repeats passes until one folds nothing.
Result<int> fold_pass(Graph& g, const ConstantFoldingOptions& opts) {
  int folded = 0;
  for (int n = 0; n < g.num_nodes(); ++n) {  // producers come first (post-DFS order)
    const Node& node = g.node(n);
    if (never_folds(node)) continue;
    bool feeds_output = false;
    for (int v : node.outputs) feeds_output |= v != kNoValue && g.value(v).is_graph_output;
    if (feeds_output) continue;

    std::vector<Tensor> results;
    if (std::optional<Tensor> shape = shape_of_static(g, node)) {
      results.push_back(std::move(*shape));
    } else if (all_inputs_constant(g, node)) {
      // Cheap to try; a node the reference kernels refuse simply stays a node.
      Result<std::vector<Tensor>> r = run_on_ref(g, n);
      if (!r.ok()) continue;
      results = std::move(*r);
    } else {
      continue;
    }
    bool small = results.size() == node.outputs.size();
    for (size_t o = 0; small && o < results.size(); ++o) {
      if (node.outputs[o] == kNoValue) continue;
      small = results[o].defined() && !results[o].is_container() && results[o].numel() <= opts.max_output_elements;
    }
    if (!small) continue;

    // The node's outputs become initializers; the node writes to fresh unused values instead
    // and finalize() drops it.
    for (size_t o = 0; o < results.size(); ++o) {
      const int v = g.node(n).outputs[o];
      if (v == kNoValue) continue;
      const int detached = g.add_value(unused_name(g, g.value(v).name));
      g.node(n).outputs[o] = detached;
      Value& value = g.value(v);
      value.type = TensorType::of(results[o].dtype(), results[o].dims());
      value.constant = std::move(results[o]);
    }
    ++folded;
  }
  if (folded == 0) return 0;
  TESSERA_RETURN_IF_ERROR(g.finalize());
  TESSERA_RETURN_IF_ERROR(infer_graph_types(g));
  return folded;
}

}  // namespace

Result<int> fold_constants(Graph& g, const ConstantFoldingOptions& opts) {
  int total = 0;
  for (;;) {
    TESSERA_ASSIGN_OR_RETURN(int folded, fold_pass(g, opts));
    if (folded == 0) return total;
    total += folded;
  }
}

}  // namespace tessera
