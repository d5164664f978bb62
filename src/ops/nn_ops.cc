// Schemas and shape inference of the nn family: matrix products, convolutions, pools,
// normalizations and linear quantization.
#include <optional>

#include "ops/nn_geometry.h"
#include "ops/op_registry.h"

namespace tessera {
namespace {

// Known sizes of dims [from, rank) of `t`, or nullopt if any is unknown.
std::optional<std::vector<int64_t>> known_dims(const TensorType& t, size_t from) {
  if (!t.shape || t.shape->size() < from) return std::nullopt;
  std::vector<int64_t> dims;
  for (size_t i = from; i < t.shape->size(); ++i) {
    if (!(*t.shape)[i].known()) return std::nullopt;
    dims.push_back((*t.shape)[i].value);
  }
  return dims;
}

// Numpy broadcasting of two dim lists (right-aligned); unknown where it cannot tell.
Result<std::vector<Dim>> broadcast_two(const std::vector<Dim>& a, const std::vector<Dim>& b) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<Dim> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const Dim da = i + a.size() >= rank ? a[i + a.size() - rank] : Dim(1);
    const Dim db = i + b.size() >= rank ? b[i + b.size() - rank] : Dim(1);
    if (da.known() && da.value == 1) {
      out[i] = db;
    } else if (db.known() && db.value == 1) {
      out[i] = da;
    } else if (da.known() && db.known()) {
      if (da.value != db.value) return invalid_argument("batch dims do not broadcast");
      out[i] = da;
    } else if (da == db) {
      out[i] = da;
    } else {
      out[i] = da.known() ? da : (db.known() ? db : Dim());
    }
  }
  return out;
}

Status infer_matmul_dims(InferContext& ctx, int a_index, int b_index, DType out_dtype) {
  const TensorType& a = ctx.inputs[a_index];
  const TensorType& b = ctx.inputs[b_index];
  ctx.outputs[0].dtype = out_dtype;
  if (!a.shape || !b.shape) return Status();
  std::vector<Dim> as = *a.shape, bs = *b.shape;
  if (as.empty() || bs.empty()) return invalid_argument("MatMul operands must have rank >= 1");
  const bool a_vector = as.size() == 1, b_vector = bs.size() == 1;
  if (a_vector) as.insert(as.begin(), Dim(1));
  if (b_vector) bs.push_back(Dim(1));
  const Dim& ka = as.back();
  const Dim& kb = bs[bs.size() - 2];
  if (ka.known() && kb.known() && ka.value != kb.value) {
    return invalid_argument("inner dims differ: " + a.to_string() + " x " + b.to_string());
  }
  TESSERA_ASSIGN_OR_RETURN(std::vector<Dim> out,
                           broadcast_two(std::vector<Dim>(as.begin(), as.end() - 2),
                                         std::vector<Dim>(bs.begin(), bs.end() - 2)));
  if (!a_vector) out.push_back(as[as.size() - 2]);
  if (!b_vector) out.push_back(bs.back());
  ctx.outputs[0].shape = out;
  return Status();
}

Status infer_matmul(InferContext& ctx) { return infer_matmul_dims(ctx, 0, 1, ctx.inputs[0].dtype); }
Status infer_matmul_integer(InferContext& ctx) {
  return infer_matmul_dims(ctx, 0, 1, DType::kInt32);
}
Status infer_qlinear_matmul(InferContext& ctx) {
  return infer_matmul_dims(ctx, 0, 3, ctx.inputs[7].dtype);
}

Status infer_gemm(InferContext& ctx) {
  const TensorType& a = ctx.inputs[0];
  const TensorType& b = ctx.inputs[1];
  ctx.outputs[0].dtype = a.dtype;
  if (!a.shape || !b.shape) return Status();
  if (a.shape->size() != 2 || b.shape->size() != 2) return invalid_argument("A and B must be 2-D");
  const bool ta = ctx.node.attr_int("transA", 0) != 0, tb = ctx.node.attr_int("transB", 0) != 0;
  ctx.outputs[0].shape = std::vector<Dim>{(*a.shape)[ta ? 1 : 0], (*b.shape)[tb ? 0 : 1]};
  return Status();
}

// Conv-like: X (N x C x spatial), W (M x C/group x kernel). `w_index` is W's input index.
Status infer_conv_dims(InferContext& ctx, int w_index, DType out_dtype, bool transposed) {
  const TensorType& x = ctx.inputs[0];
  const TensorType& w = ctx.inputs[w_index];
  ctx.outputs[0].dtype = out_dtype;
  if (!x.shape) return Status();
  const size_t rank = x.shape->size();
  if (rank < 3) return invalid_argument("input must have rank >= 3");
  if (w.shape && w.shape->size() != rank) return invalid_argument("W rank differs from X rank");
  std::vector<Dim> out(rank);
  out[0] = (*x.shape)[0];
  if (w.shape) {
    const Dim& m = (*w.shape)[transposed ? 1 : 0];
    const int64_t group = ctx.node.attr_int("group", 1);
    out[1] = transposed && m.known() ? Dim(m.value * group) : (transposed ? Dim() : m);
  }
  std::optional<std::vector<int64_t>> in = known_dims(x, 2);
  std::vector<int64_t> kernel = ctx.node.attr_ints("kernel_shape");
  if (kernel.empty() && w.shape) {
    if (auto k = known_dims(w, 2)) kernel = *k;
  }
  if (in && kernel.size() == rank - 2) {
    auto g = transposed ? nn::transposed_window(ctx.node, *in, kernel)
                        : nn::forward_window(ctx.node, *in, kernel, false);
    if (!g.ok()) return g.status();
    for (size_t i = 0; i < rank - 2; ++i) out[i + 2] = Dim(g->out[i]);
  }
  ctx.outputs[0].shape = out;
  return Status();
}

Status infer_conv(InferContext& ctx) { return infer_conv_dims(ctx, 1, ctx.inputs[0].dtype, false); }
Status infer_conv_transpose(InferContext& ctx) {
  return infer_conv_dims(ctx, 1, ctx.inputs[0].dtype, true);
}
Status infer_conv_integer(InferContext& ctx) { return infer_conv_dims(ctx, 1, DType::kInt32, false); }
Status infer_qlinear_conv(InferContext& ctx) {
  return infer_conv_dims(ctx, 3, ctx.inputs[7].dtype, false);
}

// Pools: X (N x C x spatial), kernel_shape attribute. Output 1 (Indices) is int64.
Status infer_pool(InferContext& ctx) {
  const TensorType& x = ctx.inputs[0];
  for (auto& o : ctx.outputs) o.dtype = x.dtype;
  if (ctx.outputs.size() > 1) ctx.outputs[1].dtype = DType::kInt64;
  if (!x.shape) return Status();
  const size_t rank = x.shape->size();
  if (rank < 3) return invalid_argument("input must have rank >= 3");
  std::vector<Dim> out(rank);
  out[0] = (*x.shape)[0];
  out[1] = (*x.shape)[1];
  std::vector<int64_t> kernel = ctx.node.attr_ints("kernel_shape");
  if (kernel.size() != rank - 2) return invalid_argument("kernel_shape must match spatial rank");
  if (auto in = known_dims(x, 2)) {
    auto g = nn::forward_window(ctx.node, *in, kernel, ctx.node.attr_int("ceil_mode", 0) != 0);
    if (!g.ok()) return g.status();
    for (size_t i = 0; i < rank - 2; ++i) out[i + 2] = Dim(g->out[i]);
  }
  for (auto& o : ctx.outputs) o.shape = out;
  return Status();
}

Status infer_global_pool(InferContext& ctx) {
  const TensorType& x = ctx.inputs[0];
  ctx.outputs[0].dtype = x.dtype;
  if (!x.shape) return Status();
  if (x.shape->size() < 3) return invalid_argument("input must have rank >= 3");
  std::vector<Dim> out(x.shape->size(), Dim(1));
  out[0] = (*x.shape)[0];
  out[1] = (*x.shape)[1];
  ctx.outputs[0].shape = out;
  return Status();
}

Status infer_max_roi_pool(InferContext& ctx) {
  const TensorType& x = ctx.inputs[0];
  const TensorType& rois = ctx.inputs[1];
  ctx.outputs[0].dtype = x.dtype;
  std::vector<int64_t> pooled = ctx.node.attr_ints("pooled_shape");
  if (!x.shape || !rois.shape || x.shape->size() != 4 || rois.shape->size() != 2 ||
      pooled.size() != 2) {
    return Status();
  }
  ctx.outputs[0].shape = std::vector<Dim>{(*rois.shape)[0], (*x.shape)[1], pooled[0], pooled[1]};
  return Status();
}

// BatchNormalization: Y like X; training outputs (running mean / var) like the mean input.
Status infer_batch_norm(InferContext& ctx) {
  ctx.outputs[0] = ctx.inputs[0];
  for (size_t o = 1; o < ctx.outputs.size(); ++o) {
    if (ctx.num_inputs() > 3) ctx.outputs[o] = ctx.inputs[3];
  }
  return Status();
}

Status infer_layer_norm(InferContext& ctx) {
  const TensorType& x = ctx.inputs[0];
  ctx.outputs[0] = x;
  const DType stat_dtype =
      ctx.node.attr_int("stash_type", 1) == 1 ? DType::kFloat32 : x.dtype;
  for (size_t o = 1; o < ctx.outputs.size(); ++o) {
    ctx.outputs[o].dtype = stat_dtype;
    if (!x.shape) continue;
    const int rank = x.rank();
    int64_t axis = ctx.node.attr_int("axis", -1);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) return invalid_argument("axis out of range");
    std::vector<Dim> dims = *x.shape;
    for (int d = static_cast<int>(axis); d < rank; ++d) dims[static_cast<size_t>(d)] = Dim(1);
    ctx.outputs[o].shape = dims;
  }
  return Status();
}

Status infer_quantize(InferContext& ctx) {
  ctx.outputs[0].shape = ctx.inputs[0].shape;
  ctx.outputs[0].dtype = ctx.has_input(2) ? ctx.inputs[2].dtype : DType::kUint8;
  return Status();
}

Status infer_dequantize(InferContext& ctx) {
  ctx.outputs[0].shape = ctx.inputs[0].shape;
  ctx.outputs[0].dtype = ctx.inputs[1].dtype;
  return Status();
}

Status infer_dynamic_quantize(InferContext& ctx) {
  ctx.outputs[0].shape = ctx.inputs[0].shape;
  ctx.outputs[0].dtype = DType::kUint8;
  if (ctx.outputs.size() > 1) ctx.outputs[1] = TensorType::of(DType::kFloat32, {});
  if (ctx.outputs.size() > 2) ctx.outputs[2] = TensorType::of(DType::kUint8, {});
  return Status();
}

}  // namespace

void register_nn_ops(OpRegistry& r) {
  constexpr OpKind kFusable = OpKind::kOutElementwiseFusable;
  r.add("MatMul", kFusable).set_inputs(2, 2).set_infer(infer_matmul);
  r.add("Gemm", kFusable).set_inputs(2, 3).set_infer(infer_gemm);
  r.add("Conv", kFusable).set_inputs(2, 3).set_infer(infer_conv);
  r.add("ConvTranspose", kFusable).set_inputs(2, 3).set_infer(infer_conv_transpose);
  // Integer / quantized products requantize inside: nothing fuses into them as is.
  r.add("MatMulInteger", OpKind::kOpaque).set_inputs(2, 4).set_infer(infer_matmul_integer);
  r.add("QLinearMatMul", OpKind::kOpaque).set_inputs(8, 8).set_infer(infer_qlinear_matmul);
  r.add("ConvInteger", OpKind::kOpaque).set_inputs(2, 4).set_infer(infer_conv_integer);
  r.add("QLinearConv", OpKind::kOpaque).set_inputs(8, 9).set_infer(infer_qlinear_conv);
  // Per-axis scales are not numpy broadcasting, so these stay opaque.
  r.add("QuantizeLinear", OpKind::kOpaque).set_inputs(2, 3).set_infer(infer_quantize);
  r.add("DequantizeLinear", OpKind::kOpaque).set_inputs(2, 3).set_infer(infer_dequantize);
  r.add("DynamicQuantizeLinear", OpKind::kOpaque)
      .set_inputs(1, 1)
      .set_outputs(3, 3)
      .set_infer(infer_dynamic_quantize);

  r.add("MaxPool", OpKind::kOpaque).set_inputs(1, 1).set_outputs(1, 2).set_infer(infer_pool);
  r.add("AveragePool", OpKind::kOpaque).set_inputs(1, 1).set_infer(infer_pool);
  r.add("LpPool", OpKind::kOpaque).set_inputs(1, 1).set_infer(infer_pool);
  r.add("GlobalMaxPool", OpKind::kOpaque).set_inputs(1, 1).set_infer(infer_global_pool);
  r.add("GlobalAveragePool", OpKind::kOpaque).set_inputs(1, 1).set_infer(infer_global_pool);
  r.add("GlobalLpPool", OpKind::kOpaque).set_inputs(1, 1).set_infer(infer_global_pool);
  r.add("MaxUnpool", OpKind::kOpaque).set_inputs(2, 3);
  r.add("MaxRoiPool", OpKind::kOpaque).set_inputs(2, 2).set_infer(infer_max_roi_pool);

  r.add("BatchNormalization", OpKind::kBroadcast)
      .set_inputs(5, 5)
      .set_outputs(1, 5)
      .set_infer(infer_batch_norm);
  r.add("InstanceNormalization", OpKind::kOpaque).set_inputs(3, 3).set_infer(infer_same_as_input0);
  r.add("LayerNormalization", OpKind::kOpaque)
      .set_inputs(2, 3)
      .set_outputs(1, 3)
      .set_infer(infer_layer_norm);
  r.add("LRN", OpKind::kOpaque).set_inputs(1, 1).set_infer(infer_same_as_input0);
  r.add("MeanVarianceNormalization", OpKind::kOpaque)
      .set_inputs(1, 1)
      .set_infer(infer_same_as_input0);
}

}  // namespace tessera
