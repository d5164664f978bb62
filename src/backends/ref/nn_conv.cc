// Conv, ConvTranspose, ConvInteger, QLinearConv. 1-D and 2-D convolutions run as 3-D ones with
// leading spatial dims of size 1. Conv is a direct convolution parallel over (batch, output
// channel, output depth, block of output rows), with a contiguous inner loop over output columns.
#include <algorithm>
#include <array>
#include <type_traits>

#include "backends/ref/nn_kernels.h"
#include "ops/nn_geometry.h"

namespace tessera {
namespace {

using nn::ceil_div;
using nn::floor_div;
using ref::compute_t;

// A convolution in canonical 3-D form (depth, height, width).
struct ConvParams {
  int64_t batch = 0, in_channels = 0, out_channels = 0, group = 1;
  std::array<int64_t, 3> in{1, 1, 1}, out{1, 1, 1}, kernel{1, 1, 1};
  std::array<int64_t, 3> stride{1, 1, 1}, dilation{1, 1, 1}, pad{0, 0, 0};  // pad: leading pads
  std::vector<int64_t> out_dims;  // full output dims (N, M, spatial...)

  int64_t in_plane() const { return in[0] * in[1] * in[2]; }
  int64_t out_plane() const { return out[0] * out[1] * out[2]; }
  int64_t kernel_size() const { return kernel[0] * kernel[1] * kernel[2]; }
};

void set_canonical(ConvParams& p, const std::vector<int64_t>& in_spatial,
                   const nn::WindowGeometry& g) {
  const size_t r = in_spatial.size(), off = 3 - r;
  for (size_t i = 0; i < r; ++i) {
    p.in[off + i] = in_spatial[i];
    p.out[off + i] = g.out[i];
    p.kernel[off + i] = g.kernel[i];
    p.stride[off + i] = g.strides[i];
    p.dilation[off + i] = g.dilations[i];
    p.pad[off + i] = g.pads_begin[i];
  }
}

// Shapes for Conv-like ops: x (N x C x D1..Dr), w (M x C/group x k1..kr).
Result<ConvParams> conv_params(const RefKernelContext& ctx, const Tensor& x, const Tensor& w) {
  const Node& node = ctx.node();
  if (x.rank() < 3 || x.rank() > 5) {
    return ctx.unsupported("input rank " + std::to_string(x.rank()) + " (1-3 spatial dims)");
  }
  if (w.rank() != x.rank()) return ctx.error("W rank differs from X rank");
  ConvParams p;
  p.batch = x.dim(0);
  p.in_channels = x.dim(1);
  p.out_channels = w.dim(0);
  p.group = node.attr_int("group", 1);
  if (p.group < 1 || p.in_channels % p.group != 0 || p.out_channels % p.group != 0 ||
      w.dim(1) * p.group != p.in_channels) {
    return ctx.error("channels do not match group: X " + x.describe() + ", W " + w.describe() +
                     ", group " + std::to_string(p.group));
  }
  std::vector<int64_t> in_spatial(x.dims().begin() + 2, x.dims().end());
  std::vector<int64_t> kernel(w.dims().begin() + 2, w.dims().end());
  std::vector<int64_t> kernel_attr = node.attr_ints("kernel_shape");
  if (!kernel_attr.empty() && kernel_attr != kernel) {
    return ctx.error("kernel_shape attribute differs from W " + w.describe());
  }
  auto g = nn::forward_window(node, in_spatial, kernel, false);
  if (!g.ok()) return ctx.error(g.status().message());
  set_canonical(p, in_spatial, *g);
  p.out_dims = {p.batch, p.out_channels};
  p.out_dims.insert(p.out_dims.end(), g->out.begin(), g->out.end());
  return p;
}

// y[N, M, out] = conv(x, w) + bias (bias may be null). y must not alias x or w.
template <typename A>
void conv_forward(const RefKernelContext& ctx, const ConvParams& p, const A* x, const A* w,
                  const A* bias, A* y) {
  const int64_t icpg = p.in_channels / p.group, ocpg = p.out_channels / p.group;
  const auto [id_n, ih_n, iw_n] = p.in;
  const auto [od_n, oh_n, ow_n] = p.out;
  const auto [kd_n, kh_n, kw_n] = p.kernel;
  const auto [sd, sh, sw] = p.stride;
  const auto [dd, dh, dw] = p.dilation;
  const auto [pd, ph, pw] = p.pad;
  const int64_t rows_per_block = std::max<int64_t>(1, 2048 / std::max<int64_t>(1, ow_n));
  const int64_t row_blocks = (oh_n + rows_per_block - 1) / rows_per_block;
  const int64_t units = p.batch * p.out_channels * od_n * row_blocks;
  const int64_t work_per_unit = std::max<int64_t>(1, rows_per_block * ow_n * icpg * p.kernel_size());
  ctx.parallel_for(units, std::max<int64_t>(1, 65536 / work_per_unit), [&](int64_t b, int64_t e) {
    for (int64_t u = b; u < e; ++u) {
      const int64_t rb = u % row_blocks;
      const int64_t od = (u / row_blocks) % od_n;
      const int64_t oc = (u / (row_blocks * od_n)) % p.out_channels;
      const int64_t n = u / (row_blocks * od_n * p.out_channels);
      const int64_t g = oc / ocpg;
      const int64_t oh0 = rb * rows_per_block, oh1 = std::min(oh_n, oh0 + rows_per_block);
      A* yb = y + (((n * p.out_channels + oc) * od_n + od) * oh_n + oh0) * ow_n;
      std::fill(yb, yb + (oh1 - oh0) * ow_n, bias ? bias[oc] : A(0));
      for (int64_t icg = 0; icg < icpg; ++icg) {
        const A* xc = x + (n * p.in_channels + g * icpg + icg) * p.in_plane();
        const A* wc = w + (oc * icpg + icg) * p.kernel_size();
        for (int64_t kd = 0; kd < kd_n; ++kd) {
          const int64_t id = od * sd + kd * dd - pd;
          if (id < 0 || id >= id_n) continue;
          for (int64_t kh = 0; kh < kh_n; ++kh) {
            const A* wrow = wc + (kd * kh_n + kh) * kw_n;
            for (int64_t oh = oh0; oh < oh1; ++oh) {
              const int64_t ih = oh * sh + kh * dh - ph;
              if (ih < 0 || ih >= ih_n) continue;
              const A* xrow = xc + (id * ih_n + ih) * iw_n;
              A* yrow = yb + (oh - oh0) * ow_n;
              for (int64_t kw = 0; kw < kw_n; ++kw) {
                const A wv = wrow[kw];
                const int64_t shift = kw * dw - pw;  // iw = ow * sw + shift
                const int64_t lo = std::max<int64_t>(0, ceil_div(-shift, sw));
                const int64_t hi = std::min(ow_n, floor_div(iw_n - 1 - shift, sw) + 1);
                if (sw == 1) {
                  const A* xs = xrow + shift;
                  for (int64_t ow = lo; ow < hi; ++ow) yrow[ow] += wv * xs[ow];
                } else {
                  for (int64_t ow = lo; ow < hi; ++ow) yrow[ow] += wv * xrow[ow * sw + shift];
                }
              }
            }
          }
        }
      }
    }
  });
}

template <typename T>
Status conv_typed(RefKernelContext& ctx, const ConvParams& p) {
  using C = compute_t<T>;
  const Tensor& x = *ctx.input(0);
  const Tensor& w = *ctx.input(1);
  const Tensor* b = ctx.input(2);
  if (b && (b->rank() != 1 || b->dim(0) != p.out_channels)) {
    return ctx.error("bias " + b->describe() + " must have M elements");
  }
  Tensor& y = ctx.output(0, x.dtype(), p.out_dims);
  if constexpr (std::is_same_v<T, C>) {
    conv_forward<C>(ctx, p, x.data<T>(), w.data<T>(), b ? b->data<T>() : nullptr, y.data<T>());
  } else {
    std::vector<C> xv = ref::to_vector_as<C>(x), wv = ref::to_vector_as<C>(w), bv;
    if (b) bv = ref::to_vector_as<C>(*b);
    std::vector<C> yv(static_cast<size_t>(y.numel()));
    conv_forward<C>(ctx, p, xv.data(), wv.data(), b ? bv.data() : nullptr, yv.data());
    ref::store_as<T>(yv, y);
  }
  return Status();
}

Status check_same_dtype(const RefKernelContext& ctx, int count) {
  DType dt = ctx.input(0)->dtype();
  for (int i = 1; i < count; ++i) {
    if (ctx.has_input(i) && ctx.input(i)->dtype() != dt) return ctx.error("input dtypes differ");
  }
  return Status();
}

Status conv_kernel(RefKernelContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.error("expects inputs X and W");
  TESSERA_RETURN_IF_ERROR(check_same_dtype(ctx, 3));
  TESSERA_ASSIGN_OR_RETURN(ConvParams p, conv_params(ctx, *ctx.input(0), *ctx.input(1)));
  Status st;
  DType dt = ctx.input(0)->dtype();
  if (!ref::visit_float_dtype(dt, [&](auto tag) { st = conv_typed<decltype(tag)>(ctx, p); })) {
    return ctx.unsupported(std::string("dtype ") + dtype_name(dt));
  }
  return st;
}

// ---- ConvTranspose ----

// y[N, M, out] = conv_transpose(x, w) + bias; w is (C x M/group x kernel).
template <typename A>
void conv_transpose_forward(const RefKernelContext& ctx, const ConvParams& p, const A* x,
                            const A* w, const A* bias, A* y) {
  const int64_t icpg = p.in_channels / p.group, ocpg = p.out_channels / p.group;
  const auto [id_n, ih_n, iw_n] = p.in;
  const auto [od_n, oh_n, ow_n] = p.out;
  const auto [kd_n, kh_n, kw_n] = p.kernel;
  const auto [sd, sh, sw] = p.stride;
  const auto [dd, dh, dw] = p.dilation;
  const auto [pd, ph, pw] = p.pad;
  ctx.parallel_for(p.batch * p.out_channels, 1, [&](int64_t b, int64_t e) {
    for (int64_t u = b; u < e; ++u) {
      const int64_t n = u / p.out_channels, oc = u % p.out_channels;
      const int64_t g = oc / ocpg, ocg = oc % ocpg;
      A* yp = y + u * p.out_plane();
      std::fill(yp, yp + p.out_plane(), bias ? bias[oc] : A(0));
      for (int64_t icg = 0; icg < icpg; ++icg) {
        const int64_t ic = g * icpg + icg;
        const A* xc = x + (n * p.in_channels + ic) * p.in_plane();
        const A* wc = w + (ic * ocpg + ocg) * p.kernel_size();
        for (int64_t kd = 0; kd < kd_n; ++kd) {
          for (int64_t kh = 0; kh < kh_n; ++kh) {
            for (int64_t kw = 0; kw < kw_n; ++kw) {
              const A wv = wc[(kd * kh_n + kh) * kw_n + kw];
              const int64_t shift = kw * dw - pw;  // ow = iw * sw + shift
              const int64_t lo = std::max<int64_t>(0, ceil_div(-shift, sw));
              const int64_t hi = std::min(iw_n, floor_div(ow_n - 1 - shift, sw) + 1);
              for (int64_t id = 0; id < id_n; ++id) {
                const int64_t od = id * sd + kd * dd - pd;
                if (od < 0 || od >= od_n) continue;
                for (int64_t ih = 0; ih < ih_n; ++ih) {
                  const int64_t oh = ih * sh + kh * dh - ph;
                  if (oh < 0 || oh >= oh_n) continue;
                  const A* xrow = xc + (id * ih_n + ih) * iw_n;
                  A* yrow = yp + (od * oh_n + oh) * ow_n;
                  for (int64_t iw = lo; iw < hi; ++iw) yrow[iw * sw + shift] += wv * xrow[iw];
                }
              }
            }
          }
        }
      }
    }
  });
}

Result<ConvParams> conv_transpose_params(const RefKernelContext& ctx, const Tensor& x,
                                         const Tensor& w) {
  const Node& node = ctx.node();
  if (x.rank() < 3 || x.rank() > 5) {
    return ctx.unsupported("input rank " + std::to_string(x.rank()) + " (1-3 spatial dims)");
  }
  if (w.rank() != x.rank()) return ctx.error("W rank differs from X rank");
  ConvParams p;
  p.batch = x.dim(0);
  p.in_channels = x.dim(1);
  p.group = node.attr_int("group", 1);
  if (p.group < 1 || w.dim(0) != p.in_channels || p.in_channels % p.group != 0) {
    return ctx.error("channels do not match group: X " + x.describe() + ", W " + w.describe());
  }
  p.out_channels = w.dim(1) * p.group;
  std::vector<int64_t> in_spatial(x.dims().begin() + 2, x.dims().end());
  std::vector<int64_t> kernel(w.dims().begin() + 2, w.dims().end());
  std::vector<int64_t> kernel_attr = node.attr_ints("kernel_shape");
  if (!kernel_attr.empty() && kernel_attr != kernel) {
    return ctx.error("kernel_shape attribute differs from W " + w.describe());
  }
  auto g = nn::transposed_window(node, in_spatial, kernel);
  if (!g.ok()) return ctx.error(g.status().message());
  set_canonical(p, in_spatial, *g);
  p.out_dims = {p.batch, p.out_channels};
  p.out_dims.insert(p.out_dims.end(), g->out.begin(), g->out.end());
  return p;
}

template <typename T>
Status conv_transpose_typed(RefKernelContext& ctx, const ConvParams& p) {
  using C = compute_t<T>;
  const Tensor* b = ctx.input(2);
  if (b && (b->rank() != 1 || b->dim(0) != p.out_channels)) {
    return ctx.error("bias " + b->describe() + " must have M elements");
  }
  std::vector<C> xv = ref::to_vector_as<C>(*ctx.input(0)), wv = ref::to_vector_as<C>(*ctx.input(1));
  std::vector<C> bv;
  if (b) bv = ref::to_vector_as<C>(*b);
  std::vector<C> yv(static_cast<size_t>(shape_numel(p.out_dims)));
  conv_transpose_forward<C>(ctx, p, xv.data(), wv.data(), b ? bv.data() : nullptr, yv.data());
  Tensor& y = ctx.output(0, ctx.input(0)->dtype(), p.out_dims);
  ref::store_as<T>(yv, y);
  return Status();
}

Status conv_transpose_kernel(RefKernelContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.error("expects inputs X and W");
  TESSERA_RETURN_IF_ERROR(check_same_dtype(ctx, 3));
  TESSERA_ASSIGN_OR_RETURN(ConvParams p, conv_transpose_params(ctx, *ctx.input(0), *ctx.input(1)));
  Status st;
  DType dt = ctx.input(0)->dtype();
  if (!ref::visit_float_dtype(dt, [&](auto tag) { st = conv_transpose_typed<decltype(tag)>(ctx, p); })) {
    return ctx.unsupported(std::string("dtype ") + dtype_name(dt));
  }
  return st;
}

// ---- ConvInteger, QLinearConv ----

// x minus its (scalar) zero point, as int32.
Result<std::vector<int32_t>> centered_input(const RefKernelContext& ctx, const Tensor& x,
                                            const Tensor* zero_point) {
  if (x.dtype() != DType::kInt8 && x.dtype() != DType::kUint8) {
    return ctx.unsupported(std::string("input dtype ") + dtype_name(x.dtype()));
  }
  std::vector<int32_t> v = ref::to_vector_as<int32_t>(x);
  if (!zero_point) return v;
  if (zero_point->dtype() != x.dtype() || zero_point->numel() != 1) {
    return ctx.error("x zero point must be a scalar of the input dtype");
  }
  const int32_t zp = static_cast<int32_t>(zero_point->as_int64(0));
  for (int32_t& e : v) e -= zp;
  return v;
}

// w minus its zero point (scalar or per output channel), as int32.
Result<std::vector<int32_t>> centered_weights(const RefKernelContext& ctx, const Tensor& w,
                                              const Tensor* zero_point) {
  if (w.dtype() != DType::kInt8 && w.dtype() != DType::kUint8) {
    return ctx.unsupported(std::string("weight dtype ") + dtype_name(w.dtype()));
  }
  std::vector<int32_t> v = ref::to_vector_as<int32_t>(w);
  if (!zero_point) return v;
  const int64_t m = w.dim(0);
  if (zero_point->dtype() != w.dtype() || !ref::is_scalar_or_vector_of(*zero_point, m)) {
    return ctx.error("w zero point must be a scalar or have M elements of the weight dtype");
  }
  std::vector<int32_t> zp = ref::to_vector_as<int32_t>(*zero_point);
  const int64_t per_channel = m == 0 ? 0 : w.numel() / m;
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] -= zp.size() == 1 ? zp[0] : zp[static_cast<size_t>(static_cast<int64_t>(i) / per_channel)];
  }
  return v;
}

Status conv_integer_kernel(RefKernelContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.error("expects inputs x and w");
  const Tensor& x = *ctx.input(0);
  const Tensor& w = *ctx.input(1);
  TESSERA_ASSIGN_OR_RETURN(ConvParams p, conv_params(ctx, x, w));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int32_t> xv, centered_input(ctx, x, ctx.input(2)));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int32_t> wv, centered_weights(ctx, w, ctx.input(3)));
  Tensor& y = ctx.output(0, DType::kInt32, p.out_dims);
  conv_forward<int32_t>(ctx, p, xv.data(), wv.data(), nullptr, y.data<int32_t>());
  return Status();
}

// x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B (int32).
Status qlinear_conv_kernel(RefKernelContext& ctx) {
  for (int i = 0; i < 8; ++i) {
    if (!ctx.has_input(i)) return ctx.error("expects at least 8 inputs");
  }
  const Tensor& x = *ctx.input(0);
  const Tensor& w = *ctx.input(3);
  TESSERA_ASSIGN_OR_RETURN(ConvParams p, conv_params(ctx, x, w));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int32_t> xv, centered_input(ctx, x, ctx.input(2)));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int32_t> wv, centered_weights(ctx, w, ctx.input(5)));
  std::vector<int32_t> bias;
  if (const Tensor* b = ctx.input(8)) {
    if (b->dtype() != DType::kInt32 || b->rank() != 1 || b->dim(0) != p.out_channels) {
      return ctx.error("B must be int32 with M elements");
    }
    bias = ref::to_vector_as<int32_t>(*b);
  }
  const Tensor& x_scale = *ctx.input(1);
  const Tensor& w_scale = *ctx.input(4);
  const Tensor& y_scale = *ctx.input(6);
  const Tensor& y_zp = *ctx.input(7);
  if (x_scale.numel() != 1 || y_scale.numel() != 1 || y_zp.numel() != 1 ||
      !ref::is_scalar_or_vector_of(w_scale, p.out_channels)) {
    return ctx.error("scales / zero points have bad shapes");
  }
  std::vector<int32_t> acc(static_cast<size_t>(shape_numel(p.out_dims)));
  conv_forward<int32_t>(ctx, p, xv.data(), wv.data(), bias.empty() ? nullptr : bias.data(),
                        acc.data());
  std::vector<double> ws = ref::to_vector_as<double>(w_scale);
  const double xs = x_scale.as_double(0), ys = y_scale.as_double(0), zp = y_zp.as_double(0);
  const int64_t plane = p.out_plane();
  bool handled = ref::visit_quant_dtype(y_zp.dtype(), [&](auto tag) {
    using Q = decltype(tag);
    Tensor& y = ctx.output(0, y_zp.dtype(), p.out_dims);
    Q* out = y.data<Q>();
    for (size_t i = 0; i < acc.size(); ++i) {
      const int64_t oc = (static_cast<int64_t>(i) / plane) % p.out_channels;
      const float scale = static_cast<float>(xs * ws[ws.size() == 1 ? 0 : oc] / ys);
      out[i] = ref::saturate_round<Q>(static_cast<double>(static_cast<float>(acc[i]) * scale) + zp);
    }
  });
  if (!handled) return ctx.unsupported(std::string("y dtype ") + dtype_name(y_zp.dtype()));
  return Status();
}

}  // namespace

void register_nn_conv_kernels(RefKernelTable& t) {
  t.add("Conv", conv_kernel);
  t.add("ConvTranspose", conv_transpose_kernel);
  t.add("ConvInteger", conv_integer_kernel);
  t.add("QLinearConv", qlinear_conv_kernel);
}

}  // namespace tessera
