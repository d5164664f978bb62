// Rules for elementwise ops. Unary ops map to XNNPACK's nodes one to one; HardSigmoid and PRelu
// are short exact compositions. Binary ops broadcast numpy-style; in an NHWC subgraph a constant
// operand of a 4-D result is permuted to NHWC at compile time.
#include <algorithm>

#include "backends/xnnpack/xnnpack_emitter.h"

namespace tessera::xnnpack {
namespace {

Status require_computed_input(const NodeView& n) {
  if (!n.has_input(0)) return n.reject("missing input");
  if (n.constant(0)) return n.reject("input is a constant (fold it first)");
  return Status();
}

Range intersect(Range a, Range b) { return {std::max(a.min, b.min), std::min(a.max, b.max)}; }

// dims of all ones matching value v's layout rank (for scalar constants).
std::vector<size_t> ones_like(const Emitter& e, int v) {
  return std::vector<size_t>(e.layout_dims(v).size(), 1);
}

// ---- unary ops
// -------------------------------------------------------------------------------------

using UnaryFn = xnn_status (*)(xnn_subgraph_t, uint32_t, uint32_t, uint32_t);

Status emit_unary(Emitter& e, const Node& node, UnaryFn fn, const char* call) {
  TESSERA_ASSIGN_OR_RETURN(uint32_t x, e.value(node.inputs[0]));
  TESSERA_ASSIGN_OR_RETURN(uint32_t y, e.output(node));
  return e.check(fn(e.subgraph(), x, y, 0), node, call);
}

Status check_unary(const NodeView& n) { return require_computed_input(n); }

Status check_clamp(const NodeView& n) {
  TESSERA_RETURN_IF_ERROR(require_computed_input(n));
  return clamp_range(n).status();
}

Status emit_clamp(Emitter& e, const Node& node) {
  TESSERA_ASSIGN_OR_RETURN(Range own, clamp_range(NodeView{e.graph(), node}));
  const Range r = intersect(own, e.range(node));
  TESSERA_ASSIGN_OR_RETURN(uint32_t x, e.value(node.inputs[0]));
  TESSERA_ASSIGN_OR_RETURN(uint32_t y, e.output(node));
  return e.check(xnn_define_clamp(e.subgraph(), r.min, r.max, x, y, 0), node, "xnn_define_clamp");
}

Status emit_leaky_relu(Emitter& e, const Node& node) {
  TESSERA_ASSIGN_OR_RETURN(uint32_t x, e.value(node.inputs[0]));
  TESSERA_ASSIGN_OR_RETURN(uint32_t y, e.output(node));
  return e.check(xnn_define_leaky_relu(e.subgraph(), node.attr_float("alpha", 0.01f), x, y, 0),
                 node, "xnn_define_leaky_relu");
}

Status check_elu(const NodeView& n) {
  TESSERA_RETURN_IF_ERROR(require_computed_input(n));
  if (!(n.node.attr_float("alpha", 1.0f) > 0.0f)) return n.reject("XNNPACK's ELU needs alpha > 0");
  return Status();
}

Status emit_elu(Emitter& e, const Node& node) {
  TESSERA_ASSIGN_OR_RETURN(uint32_t x, e.value(node.inputs[0]));
  TESSERA_ASSIGN_OR_RETURN(uint32_t y, e.output(node));
  return e.check(xnn_define_elu(e.subgraph(), node.attr_float("alpha", 1.0f), x, y, 0), node,
                 "xnn_define_elu");
}

// HardSigmoid: clamp(alpha * x + beta, 0, 1) as a multiply and an add that clamps.
Status emit_hard_sigmoid(Emitter& e, const Node& node) {
  const int xv = node.inputs[0];
  TESSERA_ASSIGN_OR_RETURN(uint32_t x, e.value(xv));
  TESSERA_ASSIGN_OR_RETURN(uint32_t alpha,
                           e.constant(ones_like(e, xv), {node.attr_float("alpha", 0.2f)}));
  TESSERA_ASSIGN_OR_RETURN(uint32_t beta,
                           e.constant(ones_like(e, xv), {node.attr_float("beta", 0.5f)}));
  TESSERA_ASSIGN_OR_RETURN(uint32_t scaled, e.internal(e.layout_dims(xv)));
  TESSERA_ASSIGN_OR_RETURN(uint32_t y, e.output(node));
  const Range all, r = intersect(Range{0.0f, 1.0f}, e.range(node));
  TESSERA_RETURN_IF_ERROR(
      e.check(xnn_define_multiply2(e.subgraph(), all.min, all.max, x, alpha, scaled, 0), node,
              "xnn_define_multiply2"));
  return e.check(xnn_define_add2(e.subgraph(), r.min, r.max, scaled, beta, y, 0), node,
                 "xnn_define_add2");
}

// ---- binary ops
// ------------------------------------------------------------------------------------

Status check_binary(const NodeView& n) {
  if (n.num_inputs() != 2 || !n.has_input(0) || !n.has_input(1))
    return n.reject("needs exactly 2 inputs");
  if (n.constant(0) && n.constant(1))
    return n.reject("both inputs are constants (fold them first)");
  for (int i = 0; i < 2; ++i) {
    if (n.constant(i) && n.constant(i)->dtype() != DType::kFloat32)
      return n.reject("constant input is not float32");
  }
  auto b = broadcast_dims(n.input_dims(0), n.input_dims(1));
  if (!b.ok()) return n.reject(b.status().message());
  if (n.node.op_type == "PRelu" && *b != n.input_dims(0))
    return n.reject("slope does not broadcast to X");
  if (n.output_rank() > XNN_MAX_TENSOR_DIMS) return n.reject("more than 6 dims");
  return Status();
}

// In an NHWC subgraph a computed operand of a 4-D result must be 4-D too, or a lower-rank one whose
// data reads the same in NHWC order (a reshape then views it); no operand may be 4-D when the
// result has another rank.
Status binary_layout(const NodeView& n, bool nhwc) {
  if (!nhwc) return Status();
  const int out_rank = n.output_rank();
  for (int i = 0; i < 2; ++i) {
    if (n.constant(i)) continue;
    const int rank = n.input_rank(i);
    if (out_rank != 4 && rank == 4)
      return n.reject("4-D operand of a " + std::to_string(out_rank) + "-D result");
    if (out_rank == 4 && rank < 4) {
      std::vector<int64_t> d = n.input_dims(i);
      d.insert(d.begin(), static_cast<size_t>(4 - rank), 1);
      if (!nhwc_is_plain(d))
        return n.reject("lower-rank operand " + dims_to_string(n.input_dims(i)) +
                        " of an NHWC result");
    }
  }
  return Status();
}

using RangedBinaryFn = xnn_status (*)(xnn_subgraph_t, float, float, uint32_t, uint32_t, uint32_t,
                                      uint32_t);
using BinaryFn = xnn_status (*)(xnn_subgraph_t, uint32_t, uint32_t, uint32_t, uint32_t);

Status emit_ranged_binary(Emitter& e, const Node& node, RangedBinaryFn fn, const char* call) {
  const int rank = NodeView{e.graph(), node}.output_rank();
  TESSERA_ASSIGN_OR_RETURN(uint32_t a, e.operand(node.inputs[0], rank));
  TESSERA_ASSIGN_OR_RETURN(uint32_t b, e.operand(node.inputs[1], rank));
  TESSERA_ASSIGN_OR_RETURN(uint32_t y, e.output(node));
  const Range r = e.range(node);
  return e.check(fn(e.subgraph(), r.min, r.max, a, b, y, 0), node, call);
}

Status emit_binary(Emitter& e, const Node& node, BinaryFn fn, const char* call) {
  const int rank = NodeView{e.graph(), node}.output_rank();
  TESSERA_ASSIGN_OR_RETURN(uint32_t a, e.operand(node.inputs[0], rank));
  TESSERA_ASSIGN_OR_RETURN(uint32_t b, e.operand(node.inputs[1], rank));
  TESSERA_ASSIGN_OR_RETURN(uint32_t y, e.output(node));
  return e.check(fn(e.subgraph(), a, b, y, 0), node, call);
}

// PRelu: max(x, 0) + slope * min(x, 0), exact for every x.
Status emit_prelu(Emitter& e, const Node& node) {
  const int xv = node.inputs[0];
  const int rank = NodeView{e.graph(), node}.output_rank();
  const std::vector<size_t> d = e.layout_dims(xv);
  TESSERA_ASSIGN_OR_RETURN(uint32_t x, e.value(xv));
  TESSERA_ASSIGN_OR_RETURN(uint32_t slope, e.operand(node.inputs[1], rank));
  TESSERA_ASSIGN_OR_RETURN(uint32_t zero, e.constant(ones_like(e, xv), {0.0f}));
  TESSERA_ASSIGN_OR_RETURN(uint32_t pos, e.internal(d));
  TESSERA_ASSIGN_OR_RETURN(uint32_t neg, e.internal(d));
  TESSERA_ASSIGN_OR_RETURN(uint32_t scaled, e.internal(d));
  TESSERA_ASSIGN_OR_RETURN(uint32_t y, e.output(node));
  const Range all, r = e.range(node);
  TESSERA_RETURN_IF_ERROR(
      e.check(xnn_define_maximum2(e.subgraph(), x, zero, pos, 0), node, "xnn_define_maximum2"));
  TESSERA_RETURN_IF_ERROR(
      e.check(xnn_define_minimum2(e.subgraph(), x, zero, neg, 0), node, "xnn_define_minimum2"));
  TESSERA_RETURN_IF_ERROR(
      e.check(xnn_define_multiply2(e.subgraph(), all.min, all.max, neg, slope, scaled, 0), node,
              "xnn_define_multiply2"));
  return e.check(xnn_define_add2(e.subgraph(), r.min, r.max, pos, scaled, y, 0), node,
                 "xnn_define_add2");
}

// Pow with the constant exponent 2 is XNNPACK's square (exact: x * x rounds like pow(x, 2)).
Status check_pow(const NodeView& n) {
  TESSERA_RETURN_IF_ERROR(require_computed_input(n));
  const Tensor* p = n.constant(1);
  if (!p || p->numel() != 1 || !dtype_is_float(p->dtype()))
    return n.reject("exponent must be a constant scalar");
  if (p->as_double(0) != 2.0) return n.reject("only the exponent 2 (square)");
  auto b = broadcast_dims(n.input_dims(0), n.input_dims(1));
  if (!b.ok() || *b != n.input_dims(0)) return n.reject("exponent broadcasts beyond X");
  return Status();
}

}  // namespace

Result<Range> clamp_range(const NodeView& n) {
  if (n.node.op_type == "Relu") return Range{0.0f, Range{}.max};
  if (n.node.op_type != "Clip") return n.reject("not a clamp");
  Range r;
  if (n.node.opset > 0 && n.node.opset < 11) {
    r.min = n.node.attr_float("min", r.min);
    r.max = n.node.attr_float("max", r.max);
  } else {
    for (int i = 1; i <= 2; ++i) {
      if (!n.has_input(i)) continue;
      const Tensor* t = n.constant(i);
      if (!t || t->numel() != 1 || t->dtype() != DType::kFloat32)
        return n.reject("bounds must be constant float32 scalars");
      (i == 1 ? r.min : r.max) = t->data<float>()[0];
    }
  }
  if (!(r.min < r.max)) return n.reject("XNNPACK needs min < max");
  return r;
}

void add_elementwise_rules(std::vector<OpRule>& rules) {
  auto unary = [&rules](const char* op, Status (*emit)(Emitter&, const Node&)) {
    rules.push_back({op, never_nhwc, check_unary, nullptr, emit, false});
  };
#define TESSERA_XNN_UNARY(op, fn) \
  unary(op, [](Emitter& e, const Node& n) { return emit_unary(e, n, fn, #fn); })
  TESSERA_XNN_UNARY("Sigmoid", xnn_define_sigmoid);
  TESSERA_XNN_UNARY("HardSwish", xnn_define_hardswish);
  TESSERA_XNN_UNARY("Abs", xnn_define_abs);
  TESSERA_XNN_UNARY("Neg", xnn_define_negate);
  TESSERA_XNN_UNARY("Sqrt", xnn_define_square_root);
  TESSERA_XNN_UNARY("Floor", xnn_define_floor);
  TESSERA_XNN_UNARY("Ceil", xnn_define_ceiling);
#undef TESSERA_XNN_UNARY
  unary("LeakyRelu", emit_leaky_relu);
  rules.push_back({"Elu", never_nhwc, check_elu, nullptr, emit_elu, false});
  rules.push_back({"Relu", never_nhwc, check_clamp, nullptr, emit_clamp, true});
  rules.push_back({"Clip", never_nhwc, check_clamp, nullptr, emit_clamp, true});
  rules.push_back({"HardSigmoid", never_nhwc, check_unary, nullptr, emit_hard_sigmoid, true});

  auto binary = [&rules](const char* op, Status (*emit)(Emitter&, const Node&), bool ranged) {
    rules.push_back({op, never_nhwc, check_binary, binary_layout, emit, ranged});
  };
#define TESSERA_XNN_RANGED_BINARY(op, fn) \
  binary(                                 \
      op, [](Emitter& e, const Node& n) { return emit_ranged_binary(e, n, fn, #fn); }, true)
#define TESSERA_XNN_BINARY(op, fn) \
  binary(                          \
      op, [](Emitter& e, const Node& n) { return emit_binary(e, n, fn, #fn); }, false)
  TESSERA_XNN_RANGED_BINARY("Add", xnn_define_add2);
  TESSERA_XNN_RANGED_BINARY("Sub", xnn_define_subtract);
  TESSERA_XNN_RANGED_BINARY("Mul", xnn_define_multiply2);
  TESSERA_XNN_RANGED_BINARY("Div", xnn_define_divide);
  TESSERA_XNN_BINARY("Max", xnn_define_maximum2);
  TESSERA_XNN_BINARY("Min", xnn_define_minimum2);
#undef TESSERA_XNN_RANGED_BINARY
#undef TESSERA_XNN_BINARY
  rules.push_back({"PRelu", never_nhwc, check_binary, binary_layout, emit_prelu, true});
  rules.push_back({"Pow", never_nhwc, check_pow, nullptr,
                   [](Emitter& e, const Node& n) {
                     return emit_unary(e, n, xnn_define_square, "xnn_define_square");
                   },
                   false});
}

}  // namespace tessera::xnnpack
