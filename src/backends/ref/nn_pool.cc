// MaxPool, AveragePool, LpPool, their Global* forms, MaxUnpool and MaxRoiPool. Windows run in a
// canonical 3-D form (1-D and 2-D pools have leading spatial dims of size 1), parallel over
// (batch, channel) planes.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "backends/ref/nn_kernels.h"
#include "ops/nn_geometry.h"

namespace tessera {
namespace {

using ref::compute_t;

struct PoolParams {
  int64_t planes = 0;  // batch * channels
  std::array<int64_t, 3> in{1, 1, 1}, out{1, 1, 1}, kernel{1, 1, 1};
  std::array<int64_t, 3> stride{1, 1, 1}, dilation{1, 1, 1}, pad{0, 0, 0}, pad_end{0, 0, 0};
  std::vector<int64_t> out_dims;
  int64_t in_plane() const { return in[0] * in[1] * in[2]; }
  int64_t out_plane() const { return out[0] * out[1] * out[2]; }
};

Result<PoolParams> pool_params(const RefKernelContext& ctx, const Tensor& x, bool global) {
  const Node& node = ctx.node();
  if (x.rank() < 3 || x.rank() > 5) {
    return ctx.unsupported("input rank " + std::to_string(x.rank()) + " (1-3 spatial dims)");
  }
  std::vector<int64_t> in_spatial(x.dims().begin() + 2, x.dims().end());
  const size_t r = in_spatial.size(), off = 3 - r;
  PoolParams p;
  p.planes = x.dim(0) * x.dim(1);
  p.out_dims = {x.dim(0), x.dim(1)};
  if (global) {
    for (size_t i = 0; i < r; ++i) {
      p.in[off + i] = p.kernel[off + i] = in_spatial[i];
      p.out_dims.push_back(1);
    }
    return p;
  }
  std::vector<int64_t> kernel = node.attr_ints("kernel_shape");
  if (kernel.size() != r) return ctx.error("kernel_shape must have one entry per spatial dim");
  auto g = nn::forward_window(node, in_spatial, kernel, node.attr_int("ceil_mode", 0) != 0);
  if (!g.ok()) return ctx.error(g.status().message());
  for (size_t i = 0; i < r; ++i) {
    p.in[off + i] = in_spatial[i];
    p.out[off + i] = g->out[i];
    p.kernel[off + i] = g->kernel[i];
    p.stride[off + i] = g->strides[i];
    p.dilation[off + i] = g->dilations[i];
    p.pad[off + i] = g->pads_begin[i];
    p.pad_end[off + i] = g->pads_end[i];
    p.out_dims.push_back(g->out[i]);
  }
  return p;
}

// Calls visit(in_offset) for each window position of output (od, oh, ow) inside the input, and
// returns the number of positions inside the padded input (for count_include_pad).
template <typename F>
int64_t for_each_window(const PoolParams& p, int64_t od, int64_t oh, int64_t ow, F&& visit) {
  int64_t padded_count = 1;
  std::array<int64_t, 3> o{od, oh, ow};
  for (int a = 0; a < 3; ++a) {
    const int64_t start = o[a] * p.stride[a] - p.pad[a];
    const int64_t limit = p.in[a] + p.pad_end[a];
    int64_t n = 0;
    for (int64_t k = 0; k < p.kernel[a]; ++k) n += start + k * p.dilation[a] < limit ? 1 : 0;
    padded_count *= n;
  }
  for (int64_t kd = 0; kd < p.kernel[0]; ++kd) {
    const int64_t id = od * p.stride[0] - p.pad[0] + kd * p.dilation[0];
    if (id < 0 || id >= p.in[0]) continue;
    for (int64_t kh = 0; kh < p.kernel[1]; ++kh) {
      const int64_t ih = oh * p.stride[1] - p.pad[1] + kh * p.dilation[1];
      if (ih < 0 || ih >= p.in[1]) continue;
      for (int64_t kw = 0; kw < p.kernel[2]; ++kw) {
        const int64_t iw = ow * p.stride[2] - p.pad[2] + kw * p.dilation[2];
        if (iw < 0 || iw >= p.in[2]) continue;
        visit((id * p.in[1] + ih) * p.in[2] + iw);
      }
    }
  }
  return padded_count;
}

// Calls fn(plane, out_offset, od, oh, ow) for every output element, parallel over planes.
template <typename F>
void for_each_output(const RefKernelContext& ctx, const PoolParams& p, F&& fn) {
  ctx.parallel_for(p.planes, 1, [&](int64_t b, int64_t e) {
    for (int64_t plane = b; plane < e; ++plane) {
      int64_t o = plane * p.out_plane();
      for (int64_t od = 0; od < p.out[0]; ++od)
        for (int64_t oh = 0; oh < p.out[1]; ++oh)
          for (int64_t ow = 0; ow < p.out[2]; ++ow) fn(plane, o++, od, oh, ow);
    }
  });
}

// Row-major or column-major (storage_order 1) flat index of spatial offset `in_offset`.
int64_t storage_index(const PoolParams& p, int64_t plane, int64_t in_offset, bool column_major) {
  if (!column_major) return plane * p.in_plane() + in_offset;
  const int64_t w = in_offset % p.in[2], h = (in_offset / p.in[2]) % p.in[1];
  const int64_t d = in_offset / (p.in[2] * p.in[1]);
  return plane * p.in_plane() + d + p.in[0] * (h + p.in[1] * w);
}

template <typename T>
Status max_pool_typed(RefKernelContext& ctx, const PoolParams& p) {
  using C = compute_t<T>;
  const Tensor& x = *ctx.input(0);
  const T* xp = x.data<T>();
  Tensor& y = ctx.output(0, x.dtype(), p.out_dims);
  T* yp = y.data<T>();
  int64_t* ip = nullptr;
  if (ctx.wants_output(1)) ip = ctx.output(1, DType::kInt64, p.out_dims).data<int64_t>();
  const bool column_major = ctx.node().attr_int("storage_order", 0) != 0;
  for_each_output(ctx, p, [&](int64_t plane, int64_t o, int64_t od, int64_t oh, int64_t ow) {
    const T* xs = xp + plane * p.in_plane();
    C best = std::numeric_limits<C>::lowest();
    if constexpr (std::numeric_limits<C>::has_infinity) best = -std::numeric_limits<C>::infinity();
    int64_t best_at = -1;
    for_each_window(p, od, oh, ow, [&](int64_t at) {
      const C v = static_cast<C>(xs[at]);
      if (best_at < 0 || v > best) {
        best = v;
        best_at = at;
      }
    });
    yp[o] = static_cast<T>(best);
    if (ip) ip[o] = best_at < 0 ? -1 : storage_index(p, plane, best_at, column_major);
  });
  return Status();
}

Status max_pool_common(RefKernelContext& ctx, bool global) {
  if (!ctx.has_input(0)) return ctx.error("expects input X");
  const Tensor& x = *ctx.input(0);
  TESSERA_ASSIGN_OR_RETURN(PoolParams p, pool_params(ctx, x, global));
  Status st;
  bool handled = false;
  if (x.dtype() == DType::kInt8 || x.dtype() == DType::kUint8 || dtype_is_float(x.dtype())) {
    handled = visit_numeric_dtype(x.dtype(), [&](auto tag) {
      st = max_pool_typed<decltype(tag)>(ctx, p);
    });
  }
  if (!handled) return ctx.unsupported(std::string("dtype ") + dtype_name(x.dtype()));
  return st;
}

Status max_pool_kernel(RefKernelContext& ctx) { return max_pool_common(ctx, false); }
Status global_max_pool_kernel(RefKernelContext& ctx) { return max_pool_common(ctx, true); }

enum class PoolKind { kAverage, kLp };

template <typename T>
Status average_or_lp_pool_typed(RefKernelContext& ctx, const PoolParams& p, PoolKind kind) {
  const Tensor& x = *ctx.input(0);
  const T* xp = x.data<T>();
  Tensor& y = ctx.output(0, x.dtype(), p.out_dims);
  T* yp = y.data<T>();
  const bool include_pad = ctx.node().attr_int("count_include_pad", 0) != 0;
  const double lp = ctx.node().attr_float("p", 2.0f);  // a float attribute in opset 1
  for_each_output(ctx, p, [&](int64_t plane, int64_t o, int64_t od, int64_t oh, int64_t ow) {
    const T* xs = xp + plane * p.in_plane();
    double sum = 0;
    int64_t count = 0;
    const int64_t padded_count = for_each_window(p, od, oh, ow, [&](int64_t at) {
      const double v = static_cast<double>(static_cast<compute_t<T>>(xs[at]));
      sum += kind == PoolKind::kLp ? std::pow(std::fabs(v), lp) : v;
      ++count;
    });
    double result;
    if (kind == PoolKind::kLp) {
      result = std::pow(sum, 1.0 / lp);
    } else {
      const int64_t divisor = include_pad ? padded_count : count;
      result = divisor > 0 ? sum / static_cast<double>(divisor)
                           : std::numeric_limits<double>::quiet_NaN();
    }
    yp[o] = static_cast<T>(static_cast<compute_t<T>>(result));
  });
  return Status();
}

Status average_or_lp_pool(RefKernelContext& ctx, bool global, PoolKind kind) {
  if (!ctx.has_input(0)) return ctx.error("expects input X");
  const Tensor& x = *ctx.input(0);
  if (kind == PoolKind::kLp && !(ctx.node().attr_float("p", 2.0f) > 0)) {
    return ctx.error("p must be positive");
  }
  TESSERA_ASSIGN_OR_RETURN(PoolParams p, pool_params(ctx, x, global));
  Status st;
  if (!ref::visit_float_dtype(x.dtype(), [&](auto tag) {
        st = average_or_lp_pool_typed<decltype(tag)>(ctx, p, kind);
      })) {
    return ctx.unsupported(std::string("dtype ") + dtype_name(x.dtype()));
  }
  return st;
}

Status average_pool_kernel(RefKernelContext& ctx) {
  return average_or_lp_pool(ctx, false, PoolKind::kAverage);
}
Status global_average_pool_kernel(RefKernelContext& ctx) {
  return average_or_lp_pool(ctx, true, PoolKind::kAverage);
}
Status lp_pool_kernel(RefKernelContext& ctx) { return average_or_lp_pool(ctx, false, PoolKind::kLp); }
Status global_lp_pool_kernel(RefKernelContext& ctx) {
  return average_or_lp_pool(ctx, true, PoolKind::kLp);
}

// MaxUnpool: X, I (int64 flat indices into the output), optional output_shape.
Status max_unpool_kernel(RefKernelContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.error("expects inputs X and I");
  const Tensor& x = *ctx.input(0);
  const Tensor& indices = *ctx.input(1);
  if (indices.dims() != x.dims()) return ctx.error("I must have the shape of X");
  if (x.rank() < 3) return ctx.error("X must have rank >= 3");
  const Node& node = ctx.node();
  const size_t r = static_cast<size_t>(x.rank() - 2);
  std::vector<int64_t> kernel = node.attr_ints("kernel_shape");
  std::vector<int64_t> strides = node.attr_ints("strides", std::vector<int64_t>(r, 1));
  std::vector<int64_t> pads = node.attr_ints("pads", std::vector<int64_t>(2 * r, 0));
  if (kernel.size() != r || strides.size() != r || pads.size() != 2 * r) {
    return ctx.error("kernel_shape/strides/pads do not match the spatial rank");
  }
  std::vector<int64_t> out_dims = {x.dim(0), x.dim(1)};
  for (size_t i = 0; i < r; ++i) {
    out_dims.push_back((x.dim(static_cast<int>(i) + 2) - 1) * strides[i] + kernel[i] - pads[i] -
                       pads[i + r]);
  }
  for (int64_t d : out_dims) {
    if (d < 0) return ctx.error("negative output dim");
  }
  const int64_t total = shape_numel(out_dims);
  std::vector<int64_t> idx = indices.to_int64_vector();
  for (int64_t i : idx) {
    if (i < 0 || i >= total) return ctx.error("index " + std::to_string(i) + " out of range");
  }
  // Indices address the inferred output shape; a given output_shape keeps their coordinates.
  if (const Tensor* shape = ctx.input(2)) {
    std::vector<int64_t> given = shape->to_int64_vector();
    if (given.size() != out_dims.size()) return ctx.error("output_shape has the wrong rank");
    for (int64_t& i : idx) {
      int64_t rest = i, relinear = 0, scale = 1;
      for (size_t d = out_dims.size(); d-- > 0;) {
        const int64_t coord = rest % out_dims[d];
        rest /= out_dims[d];
        if (coord >= given[d]) return ctx.error("index does not fit output_shape");
        relinear += coord * scale;
        scale *= given[d];
      }
      i = relinear;
    }
    out_dims = given;
  }
  Tensor& y = ctx.output(0, x.dtype(), out_dims);
  const size_t elem = dtype_size(x.dtype());
  if (elem == 0 || x.dtype() == DType::kString) return ctx.unsupported("dtype");
  const char* src = static_cast<const char*>(x.raw_data());
  char* dst = static_cast<char*>(y.raw_data());
  for (size_t i = 0; i < idx.size(); ++i) {
    std::copy(src + i * elem, src + (i + 1) * elem, dst + static_cast<size_t>(idx[i]) * elem);
  }
  return Status();
}

// MaxRoiPool: X (N x C x H x W), rois (R x 5: batch, x1, y1, x2, y2) -> (R x C x ph x pw).
template <typename T>
Status max_roi_pool_typed(RefKernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  const Tensor& rois = *ctx.input(1);
  std::vector<int64_t> pooled = ctx.node().attr_ints("pooled_shape");
  if (pooled.size() != 2 || pooled[0] < 1 || pooled[1] < 1) return ctx.error("bad pooled_shape");
  const double scale = ctx.node().attr_float("spatial_scale", 1.0f);
  if (x.rank() != 4 || rois.rank() != 2 || rois.dim(1) != 5) {
    return ctx.error("expects X of rank 4 and rois of shape R x 5");
  }
  const int64_t n_batch = x.dim(0), channels = x.dim(1), height = x.dim(2), width = x.dim(3);
  const int64_t num_rois = rois.dim(0);
  std::vector<double> rv = rois.to_double_vector();
  Tensor& y = ctx.output(0, x.dtype(), {num_rois, channels, pooled[0], pooled[1]});
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
  for (int64_t r = 0; r < num_rois; ++r) {
    const double* roi = &rv[static_cast<size_t>(r * 5)];
    const int64_t b = static_cast<int64_t>(roi[0]);
    if (b < 0 || b >= n_batch) return ctx.error("roi batch index out of range");
    const int64_t x1 = std::llround(roi[1] * scale), y1 = std::llround(roi[2] * scale);
    const int64_t x2 = std::llround(roi[3] * scale), y2 = std::llround(roi[4] * scale);
    const double bin_h = static_cast<double>(std::max<int64_t>(y2 - y1 + 1, 1)) / pooled[0];
    const double bin_w = static_cast<double>(std::max<int64_t>(x2 - x1 + 1, 1)) / pooled[1];
    for (int64_t c = 0; c < channels; ++c) {
      const T* plane = xp + (b * channels + c) * height * width;
      for (int64_t ph = 0; ph < pooled[0]; ++ph) {
        for (int64_t pw = 0; pw < pooled[1]; ++pw) {
          auto clampi = [](int64_t v, int64_t hi) { return std::min(std::max<int64_t>(v, 0), hi); };
          const int64_t hs = clampi(static_cast<int64_t>(std::floor(ph * bin_h)) + y1, height);
          const int64_t he = clampi(static_cast<int64_t>(std::ceil((ph + 1) * bin_h)) + y1, height);
          const int64_t ws = clampi(static_cast<int64_t>(std::floor(pw * bin_w)) + x1, width);
          const int64_t we = clampi(static_cast<int64_t>(std::ceil((pw + 1) * bin_w)) + x1, width);
          float best = 0;
          bool any = false;
          for (int64_t h = hs; h < he; ++h) {
            for (int64_t w = ws; w < we; ++w) {
              const float v = static_cast<float>(plane[h * width + w]);
              if (!any || v > best) best = v;
              any = true;
            }
          }
          yp[((r * channels + c) * pooled[0] + ph) * pooled[1] + pw] = static_cast<T>(best);
        }
      }
    }
  }
  return Status();
}

Status max_roi_pool_kernel(RefKernelContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.error("expects inputs X and rois");
  Status st;
  if (!ref::visit_float_dtype(ctx.input(0)->dtype(), [&](auto tag) {
        st = max_roi_pool_typed<decltype(tag)>(ctx);
      })) {
    return ctx.unsupported("dtype");
  }
  return st;
}

}  // namespace

void register_nn_pool_kernels(RefKernelTable& t) {
  t.add("MaxPool", max_pool_kernel);
  t.add("GlobalMaxPool", global_max_pool_kernel);
  t.add("AveragePool", average_pool_kernel);
  t.add("GlobalAveragePool", global_average_pool_kernel);
  t.add("LpPool", lp_pool_kernel);
  t.add("GlobalLpPool", global_lp_pool_kernel);
  t.add("MaxUnpool", max_unpool_kernel);
  t.add("MaxRoiPool", max_roi_pool_kernel);
}

}  // namespace tessera
