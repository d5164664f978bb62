// Rules for the compute-heavy ops: Conv (incl. depthwise and grouped), ConvTranspose, MatMul and
// Gemm as fully connected layers, Max/Average/Global pooling and BatchNormalization.
//
// Weights are repacked here at compile time into the layouts XNNPACK expects: OIHW -> OHWI for
// convolutions ([1, KH, KW, C*multiplier] for depthwise ones), [N, K] for fully connected.
#include <cmath>

#include "backends/xnnpack/xnnpack_emitter.h"
#include "ops/nn_geometry.h"

namespace tessera::xnnpack {
namespace {

Status require_computed(const NodeView& n, int i) {
  if (!n.has_input(i)) return n.reject("missing input " + std::to_string(i));
  if (n.constant(i))
    return n.reject("input " + std::to_string(i) + " is a constant (fold it first)");
  return Status();
}

// ---- Conv
// ----------------------------------------------------------------------------------------

struct ConvShape {
  int64_t n, c, m, group, kh, kw;
  nn::WindowGeometry geom;
};

Result<ConvShape> conv_shape(const NodeView& n) {
  if (n.input_rank(0) != 4) return n.reject("only 2-D convolutions (4-D input) run on XNNPACK");
  TESSERA_RETURN_IF_ERROR(require_computed(n, 0));
  TESSERA_RETURN_IF_ERROR(require_float_constant(n, 1, "the weight"));
  const std::vector<int64_t> x = n.input_dims(0), w = n.input_dims(1);
  if (w.size() != 4) return n.reject("weight must be 4-D");
  ConvShape s{x[0], x[1], w[0], n.node.attr_int("group", 1), w[2], w[3], {}};
  if (s.group < 1 || s.c % s.group != 0 || s.m % s.group != 0 || w[1] * s.group != s.c) {
    return n.reject("channels do not match group");
  }
  if (n.has_input(2)) {
    TESSERA_RETURN_IF_ERROR(require_float_constant(n, 2, "the bias"));
    if (n.constant(2)->numel() != s.m)
      return n.reject("bias size differs from the output channels");
  }
  std::vector<int64_t> kernel_attr = n.node.attr_ints("kernel_shape");
  if (!kernel_attr.empty() && kernel_attr != std::vector<int64_t>{s.kh, s.kw}) {
    return n.reject("kernel_shape differs from the weight");
  }
  auto g = nn::forward_window(n.node, {x[2], x[3]}, {s.kh, s.kw}, false);
  if (!g.ok()) return n.reject(g.status().message());
  s.geom = *g;
  return s;
}

Status check_conv(const NodeView& n) { return conv_shape(n).status(); }

std::vector<float> bias_or_zeros(const NodeView& n, int i, int64_t size) {
  std::vector<float> b(static_cast<size_t>(size), 0.0f);
  if (const Tensor* t = n.constant(i)) b.assign(t->data<float>(), t->data<float>() + size);
  return b;
}

// Output channel m's weight factor from the affine tail folded into the node (1 when none).
float scale_of(const Affine* a, int64_t m) { return a ? static_cast<float>(a->scale[m]) : 1.0f; }

// The bias after the folded affine tail: b * scale + shift.
std::vector<float> fold_bias(const Affine* a, std::vector<float> b) {
  if (!a) return b;
  for (size_t m = 0; m < b.size(); ++m) b[m] = static_cast<float>(b[m] * a->scale[m] + a->shift[m]);
  return b;
}

// Folds an affine head on a convolution's input into its OIHW weights and bias:
// W (x * s + t) + b = (W s) x + (b + W t), channel by channel.
void fold_input_affine(const Affine& in, const ConvShape& s, std::vector<float>& w,
                       std::vector<float>& b) {
  const int64_t khw = s.kh * s.kw, cg = s.c / s.group, mg = s.m / s.group;
  for (int64_t m = 0; m < s.m; ++m) {
    double acc = 0;
    for (int64_t ic = 0; ic < cg; ++ic) {
      const int64_t c = (m / mg) * cg + ic;
      for (int64_t k = 0; k < khw; ++k) {
        float& x = w[(m * cg + ic) * khw + k];
        acc += x * in.shift[c];
        x = static_cast<float>(x * in.scale[c]);
      }
    }
    b[m] = static_cast<float>(b[m] + acc);
  }
}

Status emit_conv(Emitter& e, const Node& node) {
  NodeView n{e.graph(), node};
  TESSERA_ASSIGN_OR_RETURN(ConvShape s, conv_shape(n));
  std::vector<float> weights(n.constant(1)->data<float>(),
                             n.constant(1)->data<float>() + n.constant(1)->numel());
  std::vector<float> bias0 = bias_or_zeros(n, 2, s.m);
  if (const Affine* in = e.input_affine(node)) fold_input_affine(*in, s, weights, bias0);
  const float* w = weights.data();
  const Affine* a = e.affine(node);
  const int64_t khw = s.kh * s.kw, cg = s.c / s.group;
  const bool depthwise = s.group == s.c && s.group > 1;
  std::vector<float> f(static_cast<size_t>(s.m * khw * cg));
  std::vector<size_t> fdims;
  if (depthwise) {  // [M, 1, KH, KW] -> [1, KH, KW, M]
    for (int64_t m = 0; m < s.m; ++m)
      for (int64_t k = 0; k < khw; ++k) f[k * s.m + m] = w[m * khw + k] * scale_of(a, m);
    fdims = {1, size_t(s.kh), size_t(s.kw), size_t(s.m)};
  } else {  // [M, C/g, KH, KW] -> [M, KH, KW, C/g]
    for (int64_t m = 0; m < s.m; ++m)
      for (int64_t ic = 0; ic < cg; ++ic)
        for (int64_t k = 0; k < khw; ++k)
          f[(m * khw + k) * cg + ic] = w[(m * cg + ic) * khw + k] * scale_of(a, m);
    fdims = {size_t(s.m), size_t(s.kh), size_t(s.kw), size_t(cg)};
  }
  TESSERA_ASSIGN_OR_RETURN(uint32_t filter, e.constant(fdims, f));
  TESSERA_ASSIGN_OR_RETURN(uint32_t bias, e.constant({size_t(s.m)}, fold_bias(a, bias0)));
  TESSERA_ASSIGN_OR_RETURN(uint32_t x, e.value(e.input_value(node)));
  TESSERA_ASSIGN_OR_RETURN(uint32_t y, e.output(node));
  const Range r = e.range(node);
  const auto& g = s.geom;
  auto u = [](int64_t v) { return static_cast<uint32_t>(v); };
  if (depthwise) {
    return e.check(xnn_define_depthwise_convolution_2d(
                       e.subgraph(), u(g.pads_begin[0]), u(g.pads_end[1]), u(g.pads_end[0]),
                       u(g.pads_begin[1]), u(s.kh), u(s.kw), u(g.strides[0]), u(g.strides[1]),
                       u(g.dilations[0]), u(g.dilations[1]), u(s.m / s.c), size_t(s.c), r.min,
                       r.max, x, filter, bias, y, 0),
                   node, "xnn_define_depthwise_convolution_2d");
  }
  return e.check(
      xnn_define_convolution_2d(
          e.subgraph(), u(g.pads_begin[0]), u(g.pads_end[1]), u(g.pads_end[0]), u(g.pads_begin[1]),
          u(s.kh), u(s.kw), u(g.strides[0]), u(g.strides[1]), u(g.dilations[0]), u(g.dilations[1]),
          u(s.group), size_t(cg), size_t(s.m / s.group), r.min, r.max, x, filter, bias, y, 0),
      node, "xnn_define_convolution_2d");
}

// ---- ConvTranspose
// ---------------------------------------------------------------------------------

struct DeconvShape {
  int64_t c, m, group, kh, kw;
  std::vector<int64_t> adjustment;
  nn::WindowGeometry geom;
};

Result<DeconvShape> deconv_shape(const NodeView& n) {
  if (n.input_rank(0) != 4)
    return n.reject("only 2-D transposed convolutions (4-D input) run on XNNPACK");
  TESSERA_RETURN_IF_ERROR(require_computed(n, 0));
  TESSERA_RETURN_IF_ERROR(require_float_constant(n, 1, "the weight"));
  const std::vector<int64_t> x = n.input_dims(0), w = n.input_dims(1);
  if (w.size() != 4) return n.reject("weight must be 4-D");
  DeconvShape s{x[1], 0, n.node.attr_int("group", 1), w[2], w[3], {}, {}};
  if (s.group < 1 || w[0] != s.c || s.c % s.group != 0)
    return n.reject("channels do not match group");
  s.m = w[1] * s.group;
  if (n.has_input(2)) {
    TESSERA_RETURN_IF_ERROR(require_float_constant(n, 2, "the bias"));
    if (n.constant(2)->numel() != s.m)
      return n.reject("bias size differs from the output channels");
  }
  std::vector<int64_t> kernel_attr = n.node.attr_ints("kernel_shape");
  if (!kernel_attr.empty() && kernel_attr != std::vector<int64_t>{s.kh, s.kw}) {
    return n.reject("kernel_shape differs from the weight");
  }
  auto g = nn::transposed_window(n.node, {x[2], x[3]}, {s.kh, s.kw});
  if (!g.ok()) return n.reject(g.status().message());
  s.geom = *g;
  s.adjustment = n.node.attr_ints("output_padding", {0, 0});
  for (int a = 0; a < 2; ++a) {
    if (s.geom.pads_begin[a] < 0 || s.geom.pads_end[a] < 0)
      return n.reject("output_shape needs negative padding");
    if (s.adjustment[a] >= s.geom.strides[a])
      return n.reject("output_padding must be smaller than the stride");
  }
  return s;
}

Status check_deconv(const NodeView& n) { return deconv_shape(n).status(); }

Status emit_deconv(Emitter& e, const Node& node) {
  NodeView n{e.graph(), node};
  TESSERA_ASSIGN_OR_RETURN(DeconvShape s, deconv_shape(n));
  const float* w = n.constant(1)->data<float>();
  const Affine* a = e.affine(node);
  const int64_t khw = s.kh * s.kw, cig = s.c / s.group, cog = s.m / s.group;
  // [C, M/g, KH, KW] -> [g * M/g, KH, KW, C/g]
  std::vector<float> f(static_cast<size_t>(s.m * khw * cig));
  for (int64_t gi = 0; gi < s.group; ++gi)
    for (int64_t ic = 0; ic < cig; ++ic)
      for (int64_t oc = 0; oc < cog; ++oc)
        for (int64_t k = 0; k < khw; ++k)
          f[((gi * cog + oc) * khw + k) * cig + ic] =
              w[((gi * cig + ic) * cog + oc) * khw + k] * scale_of(a, gi * cog + oc);
  TESSERA_ASSIGN_OR_RETURN(uint32_t filter,
                           e.constant({size_t(s.m), size_t(s.kh), size_t(s.kw), size_t(cig)}, f));
  TESSERA_ASSIGN_OR_RETURN(uint32_t bias,
                           e.constant({size_t(s.m)}, fold_bias(a, bias_or_zeros(n, 2, s.m))));
  TESSERA_ASSIGN_OR_RETURN(uint32_t x, e.value(node.inputs[0]));
  TESSERA_ASSIGN_OR_RETURN(uint32_t y, e.output(node));
  const Range r = e.range(node);
  const auto& g = s.geom;
  auto u = [](int64_t v) { return static_cast<uint32_t>(v); };
  return e.check(xnn_define_deconvolution_2d(
                     e.subgraph(), u(g.pads_begin[0]), u(g.pads_end[1]), u(g.pads_end[0]),
                     u(g.pads_begin[1]), u(s.adjustment[0]), u(s.adjustment[1]), u(s.kh), u(s.kw),
                     u(g.strides[0]), u(g.strides[1]), u(g.dilations[0]), u(g.dilations[1]),
                     u(s.group), size_t(cig), size_t(cog), r.min, r.max, x, filter, bias, y, 0),
                 node, "xnn_define_deconvolution_2d");
}

// ---- MatMul and Gemm as fully connected layers
// ----------------------------------------------------

Status check_matmul(const NodeView& n) {
  TESSERA_RETURN_IF_ERROR(require_computed(n, 0));
  if (!n.constant(1)) return n.reject("B must be a constant matrix (a fully connected layer)");
  TESSERA_RETURN_IF_ERROR(require_float_constant(n, 1, "B"));
  if (n.input_rank(1) != 2) return n.reject("B must be 2-D");
  if (n.input_rank(0) < 2) return n.reject("A must have at least 2 dims");
  if (n.input_dims(0).back() != n.input_dims(1)[0]) return n.reject("inner dims differ");
  return Status();
}

Status matmul_layout(const NodeView& n, bool nhwc) {
  if (nhwc && n.input_rank(0) == 4)
    return n.reject("4-D A in an NHWC subgraph (its last axis is C there)");
  return Status();
}

// A fully connected layer y = x W^T + b with W [N, K] (row n: output channel n).
Status emit_fully_connected(Emitter& e, const Node& node, uint32_t x, const std::vector<float>& w,
                            size_t n_out, size_t k, const std::vector<float>* bias, uint32_t y,
                            Range r) {
  TESSERA_ASSIGN_OR_RETURN(uint32_t filter, e.constant({n_out, k}, w));
  uint32_t bias_id = XNN_INVALID_VALUE_ID;
  if (bias) {
    TESSERA_ASSIGN_OR_RETURN(bias_id, e.constant({n_out}, *bias));
  }
  return e.check(xnn_define_fully_connected(e.subgraph(), r.min, r.max, x, filter, bias_id, y, 0),
                 node, "xnn_define_fully_connected");
}

Status emit_matmul(Emitter& e, const Node& node) {
  NodeView n{e.graph(), node};
  const std::vector<int64_t> bd = n.input_dims(1);
  const int64_t k = bd[0], nn_ = bd[1];
  const float* b = n.constant(1)->data<float>();
  const Affine* a = e.affine(node);
  const Affine* in = e.input_affine(node);  // x = u * s + t: B^T (u s + t) = (B^T s) u + B^T t
  std::vector<float> w(static_cast<size_t>(k * nn_));  // [K, N] -> [N, K]
  std::vector<double> head(static_cast<size_t>(nn_), 0.0);
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = 0; j < nn_; ++j) {
      const double bij = b[i * nn_ + j];
      w[j * k + i] = static_cast<float>(bij * (in ? in->scale[i] : 1.0) * scale_of(a, j));
      if (in) head[j] += bij * in->shift[i];
    }
  }
  TESSERA_ASSIGN_OR_RETURN(uint32_t x, e.value(e.input_value(node)));
  TESSERA_ASSIGN_OR_RETURN(uint32_t y, e.output(node));
  const std::vector<float> bias = fold_bias(a, std::vector<float>(head.begin(), head.end()));
  return emit_fully_connected(e, node, x, w, size_t(nn_), size_t(k), a || in ? &bias : nullptr, y,
                              e.range(node));
}

// Gemm's C as a bias row (numel N laid out along the last axis, or a single value), if it is one.
bool c_is_row(const Tensor& c, int64_t n) {
  if (c.numel() == 1) return true;
  return c.numel() == n && c.dims().back() == n;
}

Status check_gemm(const NodeView& n) {
  TESSERA_RETURN_IF_ERROR(require_computed(n, 0));
  if (n.node.attr_int("transA", 0) != 0)
    return n.reject("transA is not supported (A would need a transpose)");
  if (!n.constant(1)) return n.reject("B must be a constant matrix (a fully connected layer)");
  TESSERA_RETURN_IF_ERROR(require_float_constant(n, 1, "B"));
  if (n.input_rank(0) != 2 || n.input_rank(1) != 2) return n.reject("A and B must be 2-D");
  const std::vector<int64_t> a = n.input_dims(0), b = n.input_dims(1);
  const bool trans_b = n.node.attr_int("transB", 0) != 0;
  if (a[1] != (trans_b ? b[1] : b[0])) return n.reject("inner dims differ");
  if (n.has_input(2)) {
    const std::vector<int64_t> y = n.output_dims();
    auto bc = broadcast_dims(n.input_dims(2), y);
    if (!bc.ok() || *bc != y) return n.reject("C does not broadcast to the output");
    if (!n.constant(2) && n.node.attr_float("beta", 1.0f) != 1.0f)
      return n.reject("a computed C with beta != 1");
    if (n.constant(2) && n.constant(2)->dtype() != DType::kFloat32)
      return n.reject("C must be float32");
  }
  return Status();
}

Status emit_gemm(Emitter& e, const Node& node) {
  NodeView n{e.graph(), node};
  const std::vector<int64_t> bd = n.input_dims(1);
  const bool trans_b = node.attr_int("transB", 0) != 0;
  const int64_t k = trans_b ? bd[1] : bd[0], nn_ = trans_b ? bd[0] : bd[1];
  const float alpha = node.attr_float("alpha", 1.0f), beta = node.attr_float("beta", 1.0f);
  const float* b = n.constant(1)->data<float>();
  const Affine* a = e.affine(node);  // only when C is absent or a row (see FusionPlan)
  std::vector<float> w(static_cast<size_t>(k * nn_));  // alpha * B^T as [N, K]
  for (int64_t j = 0; j < nn_; ++j)
    for (int64_t i = 0; i < k; ++i)
      w[j * k + i] = alpha * (trans_b ? b[j * k + i] : b[i * nn_ + j]) * scale_of(a, j);
  TESSERA_ASSIGN_OR_RETURN(uint32_t x, e.value(node.inputs[0]));
  TESSERA_ASSIGN_OR_RETURN(uint32_t y, e.output(node));
  const Tensor* c = n.constant(2);
  if (!n.has_input(2) || (c && c_is_row(*c, nn_))) {
    std::vector<float> bias(static_cast<size_t>(nn_), 0.0f);
    if (c) {
      for (int64_t j = 0; j < nn_; ++j) bias[j] = beta * c->data<float>()[c->numel() == 1 ? 0 : j];
    }
    bias = fold_bias(a, std::move(bias));
    return emit_fully_connected(e, node, x, w, size_t(nn_), size_t(k), c || a ? &bias : nullptr, y,
                                e.range(node));
  }
  // A C that is not a row: the product, then C added with broadcasting.
  std::vector<int64_t> yd = n.output_dims();
  TESSERA_ASSIGN_OR_RETURN(uint32_t prod, e.internal({size_t(yd[0]), size_t(yd[1])}));
  TESSERA_RETURN_IF_ERROR(
      emit_fully_connected(e, node, x, w, size_t(nn_), size_t(k), nullptr, prod, Range{}));
  uint32_t cid = 0;
  if (c) {
    std::vector<size_t> cd(c->dims().begin(), c->dims().end());
    while (cd.size() < 2) cd.insert(cd.begin(), 1);
    std::vector<float> scaled(c->data<float>(), c->data<float>() + c->numel());
    for (float& v : scaled) v *= beta;
    TESSERA_ASSIGN_OR_RETURN(cid, e.constant(cd, scaled));
  } else {
    TESSERA_ASSIGN_OR_RETURN(cid, e.operand(node.inputs[2], 2));
  }
  const Range r = e.range(node);
  return e.check(xnn_define_add2(e.subgraph(), r.min, r.max, prod, cid, y, 0), node,
                 "xnn_define_add2");
}

// ---- pooling
// ---------------------------------------------------------------------------------------

struct PoolShape {
  int64_t kh, kw, sh, sw, dh, dw;
  int64_t top, left, bottom, right;  // bottom/right include what ceil_mode adds
};

Result<PoolShape> pool_shape(const NodeView& n, bool is_max) {
  if (n.input_rank(0) != 4) return n.reject("only 2-D pooling (4-D input) runs on XNNPACK");
  TESSERA_RETURN_IF_ERROR(require_computed(n, 0));
  const std::vector<int64_t> x = n.input_dims(0), y = n.output_dims();
  std::vector<int64_t> kernel = n.node.attr_ints("kernel_shape");
  if (kernel.size() != 2) return n.reject("kernel_shape must have 2 entries");
  auto g = nn::forward_window(n.node, {x[2], x[3]}, kernel, n.node.attr_int("ceil_mode", 0) != 0);
  if (!g.ok()) return n.reject(g.status().message());
  PoolShape s{kernel[0],
              kernel[1],
              g->strides[0],
              g->strides[1],
              g->dilations[0],
              g->dilations[1],
              g->pads_begin[0],
              g->pads_begin[1],
              0,
              0};
  // The end padding that gives exactly ONNX's output size with XNNPACK's floor rule.
  int64_t* end[2] = {&s.bottom, &s.right};
  for (int a = 0; a < 2; ++a) {
    const int64_t extent = (kernel[a] - 1) * g->dilations[a] + 1;
    *end[a] = std::max<int64_t>(
        0, (g->out[a] - 1) * g->strides[a] + extent - x[2 + a] - g->pads_begin[a]);
    if ((x[2 + a] + g->pads_begin[a] + *end[a] - extent) / g->strides[a] + 1 != g->out[a]) {
      return n.reject("output size not reachable with XNNPACK's padding");
    }
  }
  if (s.kh * s.kw == 1) return n.reject("XNNPACK has no 1x1 pooling");
  const bool padded = s.top + s.left + s.bottom + s.right > 0;
  if (is_max && padded && (s.dh > 1 || s.dw > 1)) {
    return n.reject("padded dilated MaxPool (XNNPACK clamps window positions to the edge)");
  }
  if (!is_max) {
    if (s.dh > 1 || s.dw > 1) return n.reject("dilated AveragePool");
    // XNNPACK averages over the window's positions inside the input only.
    if (padded && n.node.attr_int("count_include_pad", 0) != 0) {
      const bool explicit_pads =
          g->pads_begin[0] + g->pads_begin[1] + g->pads_end[0] + g->pads_end[1] > 0;
      if (explicit_pads) return n.reject("count_include_pad with padding");
    }
  }
  return s;
}

Status check_max_pool(const NodeView& n) { return pool_shape(n, true).status(); }
Status check_avg_pool(const NodeView& n) { return pool_shape(n, false).status(); }

Status emit_pool(Emitter& e, const Node& node, bool is_max) {
  NodeView n{e.graph(), node};
  TESSERA_ASSIGN_OR_RETURN(PoolShape s, pool_shape(n, is_max));
  TESSERA_ASSIGN_OR_RETURN(uint32_t x, e.value(node.inputs[0]));
  TESSERA_ASSIGN_OR_RETURN(uint32_t y, e.output(node));
  const Range r = e.range(node);
  auto u = [](int64_t v) { return static_cast<uint32_t>(v); };
  if (is_max) {
    return e.check(xnn_define_max_pooling_2d(e.subgraph(), u(s.top), u(s.right), u(s.bottom),
                                             u(s.left), u(s.kh), u(s.kw), u(s.sh), u(s.sw), u(s.dh),
                                             u(s.dw), r.min, r.max, x, y, 0),
                   node, "xnn_define_max_pooling_2d");
  }
  return e.check(
      xnn_define_average_pooling_2d(e.subgraph(), u(s.top), u(s.right), u(s.bottom), u(s.left),
                                    u(s.kh), u(s.kw), u(s.sh), u(s.sw), r.min, r.max, x, y, 0),
      node, "xnn_define_average_pooling_2d");
}

Status check_global_pool(const NodeView& n) {
  if (n.input_rank(0) != 4) return n.reject("only 2-D pooling (4-D input) runs on XNNPACK");
  TESSERA_RETURN_IF_ERROR(require_computed(n, 0));
  if (n.node.op_type == "GlobalMaxPool") {
    const std::vector<int64_t> x = n.input_dims(0);
    if (x[2] * x[3] == 1) return n.reject("XNNPACK has no 1x1 pooling");
  }
  return Status();
}

Status emit_global_pool(Emitter& e, const Node& node) {
  TESSERA_ASSIGN_OR_RETURN(uint32_t x, e.value(node.inputs[0]));
  TESSERA_ASSIGN_OR_RETURN(uint32_t y, e.output(node));
  const Range r = e.range(node);
  if (node.op_type == "GlobalAveragePool") {
    return e.check(xnn_define_global_average_pooling_2d(e.subgraph(), r.min, r.max, x, y, 0), node,
                   "xnn_define_global_average_pooling_2d");
  }
  // GlobalMaxPool: one window over the whole plane.
  const std::vector<int64_t> d = e.dims(node.inputs[0]);
  const uint32_t h = static_cast<uint32_t>(d[2]), w = static_cast<uint32_t>(d[3]);
  return e.check(
      xnn_define_max_pooling_2d(e.subgraph(), 0, 0, 0, 0, h, w, 1, 1, 1, 1, r.min, r.max, x, y, 0),
      node, "xnn_define_max_pooling_2d");
}

// ---- BatchNormalization (inference): y = x * s + t per channel
// -----------------------------------

Status check_batch_norm(const NodeView& n) {
  TESSERA_RETURN_IF_ERROR(require_computed(n, 0));
  if (n.input_rank(0) < 2) return n.reject("input must have a channel dim");
  if (n.node.attr_int("training_mode", 0) != 0) return n.reject("training mode");
  if (n.node.opset < 9 && n.node.attr_int("spatial", 1) == 0) return n.reject("spatial = 0");
  const int64_t c = n.input_dims(0)[1];
  for (int i = 1; i <= 4; ++i) {
    TESSERA_RETURN_IF_ERROR(require_float_constant(n, i, "scale, B, mean and var"));
    if (n.constant(i)->numel() != c)
      return n.reject("scale, B, mean and var must have one value per channel");
  }
  return Status();
}

Status emit_batch_norm(Emitter& e, const Node& node) {
  NodeView n{e.graph(), node};
  const float eps = node.attr_float("epsilon", 1e-5f);
  const float *scale = n.constant(1)->data<float>(), *b = n.constant(2)->data<float>();
  const float *mean = n.constant(3)->data<float>(), *var = n.constant(4)->data<float>();
  const int64_t c = n.input_dims(0)[1];
  std::vector<float> s(static_cast<size_t>(c)), t(static_cast<size_t>(c));
  for (int64_t k = 0; k < c; ++k) {
    const double sk = static_cast<double>(scale[k]) / std::sqrt(static_cast<double>(var[k]) + eps);
    s[k] = static_cast<float>(sk);
    t[k] = static_cast<float>(b[k] - mean[k] * sk);
  }
  const int x_value = node.inputs[0];
  const int rank = n.input_rank(0);
  const bool nhwc = e.is_nhwc(x_value);
  TESSERA_ASSIGN_OR_RETURN(uint32_t x, e.value(x_value));
  TESSERA_ASSIGN_OR_RETURN(uint32_t sid, e.channel_constant(s, rank, nhwc));
  TESSERA_ASSIGN_OR_RETURN(uint32_t tid, e.channel_constant(t, rank, nhwc));
  TESSERA_ASSIGN_OR_RETURN(uint32_t scaled, e.internal(e.layout_dims(x_value)));
  TESSERA_ASSIGN_OR_RETURN(uint32_t y, e.output(node));
  const Range r = e.range(node);
  const Range all;
  TESSERA_RETURN_IF_ERROR(
      e.check(xnn_define_multiply2(e.subgraph(), all.min, all.max, x, sid, scaled, 0), node,
              "xnn_define_multiply2"));
  return e.check(xnn_define_add2(e.subgraph(), r.min, r.max, scaled, tid, y, 0), node,
                 "xnn_define_add2");
}

}  // namespace

void add_nn_rules(std::vector<OpRule>& rules) {
  rules.push_back({"Conv", always_nhwc, check_conv, nullptr, emit_conv, true});
  rules.push_back({"ConvTranspose", always_nhwc, check_deconv, nullptr, emit_deconv, true});
  rules.push_back({"MatMul", never_nhwc, check_matmul, matmul_layout, emit_matmul, true});
  rules.push_back({"Gemm", never_nhwc, check_gemm, nullptr, emit_gemm, true});
  rules.push_back({"MaxPool", always_nhwc, check_max_pool, nullptr,
                   [](Emitter& e, const Node& n) { return emit_pool(e, n, true); }, true});
  rules.push_back({"AveragePool", always_nhwc, check_avg_pool, nullptr,
                   [](Emitter& e, const Node& n) { return emit_pool(e, n, false); }, true});
  rules.push_back(
      {"GlobalAveragePool", always_nhwc, check_global_pool, nullptr, emit_global_pool, true});
  rules.push_back(
      {"GlobalMaxPool", always_nhwc, check_global_pool, nullptr, emit_global_pool, true});
  rules.push_back(
      {"BatchNormalization", never_nhwc, check_batch_norm, nullptr, emit_batch_norm, true});
}

}  // namespace tessera::xnnpack
