#include "backends/native/layer_norm_fusion.h"

#include <algorithm>
#include <cmath>

#include "backends/native/kernel_io.h"
#include "backends/native/row_kernels.h"

namespace tessera::native {
namespace {

// The node inside sg of op type `op` with two inputs that produces v, or nullptr.
const Node* binary_in(const SubGraph& sg, int v, const char* op) {
  const Node* n = producer_in(sg, v, op);
  return n && n->inputs.size() == 2 ? n : nullptr;
}

// The only element of a float constant, or nullopt.
std::optional<double> scalar_constant(const Graph& g, int v) {
  if (v == kNoValue || !g.value(v).constant) return std::nullopt;
  const Tensor& t = *g.value(v).constant;
  if (t.numel() != 1 || !dtype_is_float(t.dtype())) return std::nullopt;
  return t.to_double_vector()[0];
}

// For a binary node with one constant operand: {the other operand, the constant}.
std::optional<std::pair<int, int>> operand_and_constant(const Graph& g, const Node& n) {
  const bool c0 = g.value(n.inputs[0]).constant.has_value();
  const bool c1 = g.value(n.inputs[1]).constant.has_value();
  if (c1 && !c0) return std::make_pair(n.inputs[0], n.inputs[1]);
  if (c0 && !c1) return std::make_pair(n.inputs[1], n.inputs[0]);
  return std::nullopt;
}

// The ReduceMean node inside sg that produces v, with keepdims, over trailing axes of a rank-r
// input: the first of them; or -1.
int mean_over_trailing_axes(const SubGraph& sg, int v, int rank) {
  if (v == kNoValue) return -1;
  const Graph& g = sg.graph();
  const int n = g.value(v).producer;
  if (n < 0 || !sg.nodes().contains(n)) return -1;
  const Node& node = g.node(n);
  if (!node.domain.empty() || node.op_type != "ReduceMean" || node.attr_int("keepdims", 1) != 1) return -1;
  std::vector<int64_t> axes;
  if (node.inputs.size() > 1 && node.inputs[1] != kNoValue) {  // opset 18: axes as an input
    const std::optional<Tensor>& c = g.value(node.inputs[1]).constant;
    if (!c || !dtype_is_integer(c->dtype())) return -1;
    axes = c->to_int64_vector();
  } else {
    axes = node.attr_ints("axes");
  }
  if (axes.empty()) return -1;
  for (int64_t& a : axes) a = a < 0 ? a + rank : a;
  std::sort(axes.begin(), axes.end());
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] != rank - static_cast<int64_t>(axes.size() - i)) return -1;
  return static_cast<int>(axes.front());
}

}  // namespace

Result<DecomposedLayerNorm> match_decomposed_layer_norm(const SubGraph& sg) {
  const Graph& g = sg.graph();
  auto no = [](const std::string& why) { return unimplemented("not a LayerNormalization: " + why); };
  if (sg.outputs().size() != 1) return no("more than one output");
  DecomposedLayerNorm ln;
  ln.output = sg.outputs()[0];
  int v = ln.output, walked = 0;
  // The optional affine tail, walked from the output: Add(., bias), then Mul(., scale).
  if (const Node* add = binary_in(sg, v, "Add")) {
    auto oc = operand_and_constant(g, *add);
    if (!oc) return no("the last Add has no constant operand");
    std::tie(v, ln.bias) = *oc;
    ++walked;
  }
  if (const Node* mul = binary_in(sg, v, "Mul")) {
    auto oc = operand_and_constant(g, *mul);
    if (!oc) return no("the scaling Mul has no constant operand");
    std::tie(v, ln.scale) = *oc;
    ++walked;
  }
  const Node* div = binary_in(sg, v, "Div");
  if (!div) return no("no Div of the centred value by the deviation");
  const int centred = div->inputs[0];
  const Node* sqrt_node = producer_in(sg, div->inputs[1], "Sqrt");
  if (!sqrt_node || sqrt_node->inputs.size() != 1) return no("the divisor is not a Sqrt");
  const Node* add_eps = binary_in(sg, sqrt_node->inputs[0], "Add");
  if (!add_eps) return no("no epsilon Add under the Sqrt");
  auto var_eps = operand_and_constant(g, *add_eps);
  std::optional<double> eps = var_eps ? scalar_constant(g, var_eps->second) : std::nullopt;
  if (!eps) return no("epsilon is not a scalar constant");
  ln.epsilon = static_cast<float>(*eps);
  const int variance = var_eps->first;
  const Node* sub = binary_in(sg, centred, "Sub");
  if (!sub) return no("the centred value is not a Sub");
  ln.x = sub->inputs[0];
  if (!check_float_value(g, ln.x).ok()) return no("the input is not float32 with a static shape");
  const int rank = g.value(ln.x).type.rank();
  if (rank < 1) return no("a scalar input");
  // mean = ReduceMean(x); var = ReduceMean(Pow(centred, 2)), both over the same trailing axes.
  const int axis = mean_over_trailing_axes(sg, sub->inputs[1], rank);
  if (axis < 0 || g.node(g.value(sub->inputs[1]).producer).inputs[0] != ln.x)
    return no("the subtracted value is not a mean of the input over trailing axes");
  const int var_producer = g.value(variance).producer;
  if (mean_over_trailing_axes(sg, variance, rank) != axis) return no("the variance is not a mean over the same axes");
  const Node* pow = binary_in(sg, g.node(var_producer).inputs[0], "Pow");
  if (!pow || pow->inputs[0] != centred || scalar_constant(g, pow->inputs[1]) != 2.0)
    return no("the variance does not average the centred value squared");
  ln.axis = axis;
  walked += 7;  // ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div
  if (walked != sg.size()) return no("the group holds other nodes");
  const std::vector<int64_t> dims = g.value(ln.x).type.static_dims();
  TESSERA_RETURN_IF_ERROR(check_float_value(g, ln.output));
  if (g.value(ln.output).type.static_dims() != dims) return no("the affine tail broadcasts the output");
  TESSERA_RETURN_IF_ERROR(check_layer_norm(g, ln.x, ln.axis, ln.scale, ln.bias));
  return ln;
}

Pattern decomposed_layer_norm_pattern() {
  Pattern x = wildcard();
  auto mean_of = [](const Pattern& p) { return op("ReduceMean", {p}) | op("ReduceMean", {p, constant()}); };
  Pattern centred = op("Sub", {x, mean_of(x)});
  Pattern variance = mean_of(op("Pow", {centred, constant()}));
  Pattern normalized = op("Div", {centred, op("Sqrt", {op("Add", {variance, constant()})})});
  auto with_constant = [](const char* op_type, const Pattern& p) {
    return op(op_type, {p, constant()}) | op(op_type, {constant(), p});
  };
  Pattern scaled = with_constant("Mul", normalized);
  return with_constant("Add", scaled) | scaled | with_constant("Add", normalized) | normalized;
}

}  // namespace tessera::native
