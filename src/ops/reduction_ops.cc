// Schemas of the reduction family: Reduce*, ArgMax/ArgMin, Softmax/LogSoftmax/Hardmax, CumSum,
// TopK, Einsum, Det and the two losses (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss).
#include <algorithm>
#include <string>
#include <vector>

#include "ops/op_registry.h"

namespace tessera {

namespace {

// Maps a possibly negative axis into [0, rank); error when out of range.
Result<int> infer_axis(int64_t axis, int rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) {
    return invalid_argument("axis " + std::to_string(axis) + " out of range for rank " +
                            std::to_string(rank));
  }
  return static_cast<int>(a);
}

// Whether the node's Reduce* op takes its axes as input 1 (ReduceSum from opset 13, all from 18).
bool reduce_axes_from_input(const Node& node) {
  return node.opset >= 18 || (node.op_type == "ReduceSum" && node.opset >= 13);
}

Status infer_reduce(InferContext& ctx) {
  const Node& node = ctx.node;
  TensorType& out = ctx.outputs[0];
  out.dtype = ctx.inputs[0].dtype;
  const bool keepdims = node.attr_int("keepdims", 1) != 0;
  if (!ctx.inputs[0].shape) return Status();
  const std::vector<Dim>& in = *ctx.inputs[0].shape;
  const int rank = static_cast<int>(in.size());

  std::vector<int64_t> axes;
  bool noop = false;
  if (reduce_axes_from_input(node)) {
    if (ctx.has_input(1)) {
      if (!ctx.constants[1]) {
        // Unknown axes: with keepdims the rank is still known.
        if (keepdims) out.shape = std::vector<Dim>(rank, Dim());
        return Status();
      }
      axes = ctx.constants[1]->to_int64_vector();
    }
    noop = axes.empty() && node.attr_int("noop_with_empty_axes", 0) != 0;
  } else {
    axes = node.attr_ints("axes");
  }
  if (noop) {
    out.shape = in;
    return Status();
  }
  std::vector<bool> reduced(rank, axes.empty());
  for (int64_t a : axes) {
    TESSERA_ASSIGN_OR_RETURN(int axis, infer_axis(a, rank));
    if (reduced[axis]) return invalid_argument("axis " + std::to_string(a) + " repeated");
    reduced[axis] = true;
  }
  std::vector<Dim> dims;
  for (int d = 0; d < rank; ++d) {
    if (!reduced[d]) {
      dims.push_back(in[d]);
    } else if (keepdims) {
      dims.push_back(Dim(1));
    }
  }
  out.shape = std::move(dims);
  return Status();
}

Status infer_arg_reduce(InferContext& ctx) {
  TensorType& out = ctx.outputs[0];
  out.dtype = DType::kInt64;
  if (!ctx.inputs[0].shape) return Status();
  const std::vector<Dim>& in = *ctx.inputs[0].shape;
  const int rank = static_cast<int>(in.size());
  TESSERA_ASSIGN_OR_RETURN(int axis, infer_axis(ctx.node.attr_int("axis", 0), rank));
  std::vector<Dim> dims = in;
  if (ctx.node.attr_int("keepdims", 1) != 0) {
    dims[axis] = Dim(1);
  } else {
    dims.erase(dims.begin() + axis);
  }
  out.shape = std::move(dims);
  return Status();
}

// Softmax / LogSoftmax / Hardmax: same type as the input; checks the axis when the rank is known.
Status infer_softmax_like(InferContext& ctx) {
  const int rank = ctx.inputs[0].rank();
  if (rank >= 0) {
    const int64_t fallback = ctx.node.opset >= 13 ? -1 : 1;
    const int64_t axis = ctx.node.attr_int("axis", fallback);
    // Before opset 13 the axis may equal the rank (the 2-D coercion's second dim is then 1).
    const int limit = ctx.node.opset >= 13 ? rank : rank + 1;
    TESSERA_RETURN_IF_ERROR(infer_axis(axis, limit).status());
  }
  return infer_same_as_input0(ctx);
}

Status infer_top_k(InferContext& ctx) {
  const Node& node = ctx.node;
  ctx.outputs[0].dtype = ctx.inputs[0].dtype;
  ctx.outputs[1].dtype = DType::kInt64;
  if (!ctx.inputs[0].shape) return Status();
  std::vector<Dim> dims = *ctx.inputs[0].shape;
  const int rank = static_cast<int>(dims.size());
  TESSERA_ASSIGN_OR_RETURN(int axis, infer_axis(node.attr_int("axis", -1), rank));
  Dim k;
  if (node.opset < 10) {
    k = Dim(node.attr_int("k", -1));
    if (!k.known()) return invalid_argument("attribute k missing or negative");
  } else if (ctx.num_inputs() > 1 && ctx.constants[1]) {
    if (ctx.constants[1]->numel() != 1) return invalid_argument("k must hold one value");
    int64_t kv = ctx.constants[1]->as_int64(0);
    if (kv < 0) return invalid_argument("k must be >= 0");
    k = Dim(kv);
  }
  if (k.known() && dims[axis].known() && k.value > dims[axis].value) {
    return invalid_argument("k " + std::to_string(k.value) + " exceeds axis size " +
                            std::to_string(dims[axis].value));
  }
  dims[axis] = k;
  ctx.outputs[0].shape = dims;
  ctx.outputs[1].shape = dims;
  return Status();
}

Status infer_det(InferContext& ctx) {
  TensorType& out = ctx.outputs[0];
  out.dtype = ctx.inputs[0].dtype;
  if (!ctx.inputs[0].shape) return Status();
  const std::vector<Dim>& in = *ctx.inputs[0].shape;
  if (in.size() < 2) return invalid_argument("Det needs a rank >= 2 input");
  out.shape = std::vector<Dim>(in.begin(), in.end() - 2);
  return Status();
}

// NegativeLogLikelihoodLoss / SoftmaxCrossEntropyLoss: loss of the input's dtype; shape known
// for reduction "none" (the target's shape) and "sum"/"mean" (a scalar). The optional second
// output of SoftmaxCrossEntropyLoss has the scores' type.
Status infer_loss(InferContext& ctx) {
  const std::string reduction = ctx.node.attr_string("reduction", "mean");
  TensorType& loss = ctx.outputs[0];
  loss.dtype = ctx.inputs[0].dtype;
  if (reduction == "none") {
    loss.shape = ctx.inputs[1].shape;
  } else if (reduction == "sum" || reduction == "mean") {
    loss.shape = std::vector<Dim>();
  } else {
    return invalid_argument("unknown reduction '" + reduction + "'");
  }
  if (ctx.outputs.size() > 1) ctx.outputs[1] = ctx.inputs[0];
  return Status();
}

}  // namespace

void register_reduction_ops(OpRegistry& r) {
  for (const char* name : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
                           "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
                           "ReduceSumSquare"}) {
    // Axes are input 1 for ReduceSum from opset 13 and for every Reduce* from opset 18.
    r.add(name, OpKind::kReduction).set_inputs(1, 2).set_infer(infer_reduce);
  }
  r.add("ArgMax", OpKind::kReduction).set_inputs(1, 1).set_infer(infer_arg_reduce);
  r.add("ArgMin", OpKind::kReduction).set_inputs(1, 1).set_infer(infer_arg_reduce);
  r.add("Softmax", OpKind::kOpaque).set_inputs(1, 1).set_infer(infer_softmax_like);
  r.add("LogSoftmax", OpKind::kOpaque).set_inputs(1, 1).set_infer(infer_softmax_like);
  r.add("Hardmax", OpKind::kOpaque).set_inputs(1, 1).set_infer(infer_softmax_like);
  r.add("CumSum", OpKind::kOpaque).set_inputs(2, 2).set_infer(infer_same_as_input0);
  r.add("TopK", OpKind::kOpaque).set_inputs(1, 2).set_outputs(2, 2).set_infer(infer_top_k);
  r.add("Einsum", OpKind::kOpaque).set_inputs(1, 1 << 20);
  r.add("Det", OpKind::kOpaque).set_inputs(1, 1).set_infer(infer_det);
  r.add("NegativeLogLikelihoodLoss", OpKind::kOpaque).set_inputs(2, 3).set_infer(infer_loss);
  r.add("SoftmaxCrossEntropyLoss", OpKind::kOpaque)
      .set_inputs(2, 3)
      .set_outputs(1, 2)
      .set_infer(infer_loss);
}

}  // namespace tessera
