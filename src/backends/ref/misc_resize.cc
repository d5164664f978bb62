// Resize (opset 10, 11, 13) and Upsample (opset 7, 9).
//
// Follows the ONNX reference implementation: every output element is a weighted sum of input
// elements; the weights are the tensor product of per-axis 1-D taps. On each axis the output
// coordinate maps back to x_original, the n nearest input positions around it (edge-padded) get
// coefficients from the mode (nearest: one of two, linear: two, cubic: four).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backends/ref/misc_kernels.h"
#include "backends/ref/ref_util.h"

namespace tessera {
namespace {

enum class Mode { kNearest, kLinear, kCubic };
enum class Coord { kHalfPixel, kPytorchHalfPixel, kAlignCorners, kAsymmetric, kTfHalfPixelForNn, kTfCropAndResize };
enum class Nearest { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil, kSimple };

struct ResizeParams {
  Mode mode = Mode::kNearest;
  Coord coord = Coord::kHalfPixel;
  Nearest nearest = Nearest::kRoundPreferFloor;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0.0;
};

struct Tap {
  int64_t index;
  double weight;
};

// The taps of one output coordinate on one axis; `outside` means "use the extrapolation value".
struct AxisTaps {
  std::vector<Tap> taps;
  bool outside = false;
};

double map_to_input(const ResizeParams& p, int64_t x_out, double scale, int64_t in_size,
                    int64_t out_size, double roi_start, double roi_end, bool* outside) {
  const double x = static_cast<double>(x_out);
  const double in = static_cast<double>(in_size);
  const double out_width = scale * in;  // as the ONNX reference does (not rounded)
  (void)out_size;
  switch (p.coord) {
    case Coord::kHalfPixel: return (x + 0.5) / scale - 0.5;
    case Coord::kPytorchHalfPixel: return out_width == 1.0 ? -0.5 : (x + 0.5) / scale - 0.5;
    case Coord::kAlignCorners: return out_width == 1.0 ? 0.0 : x * (in - 1) / (out_width - 1);
    case Coord::kAsymmetric: return x / scale;
    case Coord::kTfHalfPixelForNn: return (x + 0.5) / scale;
    case Coord::kTfCropAndResize: {
      double v = out_width == 1.0 ? (roi_end - roi_start) * (in - 1) / 2
                                  : x * (roi_end - roi_start) * (in - 1) / (out_width - 1);
      v += roi_start * (in - 1);
      if (v < 0 || v > in - 1) *outside = true;
      return v;
    }
  }
  return 0.0;
}

AxisTaps axis_taps(const ResizeParams& p, int64_t x_out, double scale, int64_t in_size,
                   int64_t out_size, double roi_start, double roi_end) {
  AxisTaps result;
  double x_ori = map_to_input(p, x_out, scale, in_size, out_size, roi_start, roi_end, &result.outside);
  // A NaN roi (or another degenerate mapping) reads as outside: the extrapolation value.
  if (!std::isfinite(x_ori) || std::abs(x_ori) > 1e15) result.outside = true;
  if (result.outside) return result;
  // base is the input position at or left of x_ori such that ratio is in (0, 1].
  double ceil_x = std::ceil(x_ori);
  int64_t base = static_cast<int64_t>(ceil_x) - 1;
  double ratio = x_ori - static_cast<double>(base);
  bool integral = x_ori == ceil_x;
  std::vector<double> coeffs;
  int64_t first = 0;
  switch (p.mode) {
    case Mode::kNearest: {
      bool right = true;
      if (p.nearest == Nearest::kSimple) {
        // onnxruntime's opset < 11 rule: truncate when upsampling, ceil when downsampling.
        int64_t pick = scale < 1.0 ? static_cast<int64_t>(std::ceil(x_ori))
                                   : static_cast<int64_t>(std::trunc(x_ori));
        right = pick == base + 1;
        if (pick != base && pick != base + 1) {
          result.taps.push_back({std::clamp<int64_t>(pick, 0, in_size - 1), 1.0});
          return result;
        }
      } else if (!integral) {
        switch (p.nearest) {
          case Nearest::kRoundPreferFloor: right = ratio > 0.5; break;
          case Nearest::kRoundPreferCeil: right = ratio >= 0.5; break;
          case Nearest::kFloor: right = false; break;
          case Nearest::kCeil: right = true; break;
          case Nearest::kSimple: break;
        }
      }
      coeffs = {right ? 0.0 : 1.0, right ? 1.0 : 0.0};
      first = base;
      break;
    }
    case Mode::kLinear:
      coeffs = {1.0 - ratio, ratio};
      first = base;
      break;
    case Mode::kCubic: {
      const double a = p.cubic_a, r = ratio, s = 1.0 - ratio;
      coeffs = {((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
                ((a + 2) * r - (a + 3)) * r * r + 1, ((a + 2) * s - (a + 3)) * s * s + 1,
                ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a};
      first = base - 1;
      break;
    }
  }
  if (p.exclude_outside) {
    double sum = 0;
    for (size_t k = 0; k < coeffs.size(); ++k) {
      int64_t idx = first + static_cast<int64_t>(k);
      if (idx < 0 || idx >= in_size) coeffs[k] = 0;
      sum += coeffs[k];
    }
    if (sum != 0) for (double& c : coeffs) c /= sum;
  }
  for (size_t k = 0; k < coeffs.size(); ++k) {
    if (coeffs[k] == 0) continue;
    int64_t idx = std::clamp<int64_t>(first + static_cast<int64_t>(k), 0, in_size - 1);
    result.taps.push_back({idx, coeffs[k]});
  }
  return result;
}

template <typename T>
T from_double(double v) {
  if constexpr (std::is_integral_v<T>) {
    if constexpr (std::is_same_v<T, bool>) {
      return v != 0;
    } else {
      double r = std::nearbyint(v);
      r = std::clamp(r, static_cast<double>(std::numeric_limits<T>::lowest()),
                     static_cast<double>(std::numeric_limits<T>::max()));
      return static_cast<T>(r);
    }
  } else {
    return static_cast<T>(v);
  }
}

template <typename T>
void resize_typed(RefKernelContext& ctx, const ResizeParams& p, const Tensor& x,
                  const std::vector<int64_t>& out_dims, const std::vector<double>& scales,
                  const std::vector<double>& roi, Tensor& y) {
  const int rank = x.rank();
  const std::vector<int64_t>& in_dims = x.dims();
  std::vector<std::vector<AxisTaps>> plan(rank);
  for (int d = 0; d < rank; ++d) {
    double rs = roi.empty() ? 0.0 : roi[d];
    double re = roi.empty() ? 1.0 : roi[d + rank];
    plan[d].reserve(out_dims[d]);
    for (int64_t o = 0; o < out_dims[d]; ++o) {
      plan[d].push_back(axis_taps(p, o, scales[d], in_dims[d], out_dims[d], rs, re));
    }
  }
  std::vector<int64_t> in_strides = ref::row_major_strides(in_dims);
  const T* src = x.data<T>();
  T* dst = y.data<T>();
  const int64_t inner = rank == 0 ? 1 : out_dims[rank - 1];
  const int64_t rows = inner == 0 ? 0 : y.numel() / inner;
  ctx.parallel_for(rows, 16, [&](int64_t row_begin, int64_t row_end) {
    std::vector<int64_t> idx(rank, 0);
    std::vector<const AxisTaps*> taps(rank);
    std::vector<size_t> k(rank);
    for (int64_t row = row_begin; row < row_end; ++row) {
      int64_t rem = row;
      for (int d = rank - 2; d >= 0; --d) {
        idx[d] = rem % out_dims[d];
        rem /= out_dims[d];
      }
      for (int64_t w = 0; w < inner; ++w) {
        if (rank > 0) idx[rank - 1] = w;
        bool outside = false;
        for (int d = 0; d < rank; ++d) {
          taps[d] = &plan[d][idx[d]];
          outside = outside || taps[d]->outside;
        }
        double acc = 0;
        if (outside) {
          acc = p.extrapolation;
        } else {
          // Sum over the cartesian product of the taps of every axis.
          std::fill(k.begin(), k.end(), 0);
          while (true) {
            double weight = 1.0;
            int64_t offset = 0;
            for (int d = 0; d < rank; ++d) {
              const Tap& t = taps[d]->taps[k[d]];
              weight *= t.weight;
              offset += t.index * in_strides[d];
            }
            acc += weight * static_cast<double>(static_cast<ref::compute_t<T>>(src[offset]));
            int d = rank - 1;
            for (; d >= 0; --d) {
              if (++k[d] < taps[d]->taps.size()) break;
              k[d] = 0;
            }
            if (d < 0) break;
          }
        }
        dst[row * inner + w] = from_double<T>(acc);
      }
    }
  });
}

Status parse_params(RefKernelContext& ctx, bool is_upsample, ResizeParams* p) {
  const Node& n = ctx.node();
  std::string mode = n.attr_string("mode", "nearest");
  if (mode == "nearest") p->mode = Mode::kNearest;
  else if (mode == "linear" || mode == "bilinear") p->mode = Mode::kLinear;
  else if (mode == "cubic" && !is_upsample && n.opset >= 11) p->mode = Mode::kCubic;
  else return ctx.error("unknown mode '" + mode + "'");
  if (is_upsample || n.opset < 11) {
    p->coord = Coord::kAsymmetric;
    p->nearest = Nearest::kSimple;
    return Status();
  }
  std::string coord = n.attr_string("coordinate_transformation_mode", "half_pixel");
  if (coord == "half_pixel") p->coord = Coord::kHalfPixel;
  else if (coord == "pytorch_half_pixel") p->coord = Coord::kPytorchHalfPixel;
  else if (coord == "align_corners") p->coord = Coord::kAlignCorners;
  else if (coord == "asymmetric") p->coord = Coord::kAsymmetric;
  else if (coord == "tf_half_pixel_for_nn") p->coord = Coord::kTfHalfPixelForNn;
  else if (coord == "tf_crop_and_resize") p->coord = Coord::kTfCropAndResize;
  else return ctx.error("unknown coordinate_transformation_mode '" + coord + "'");
  std::string nearest = n.attr_string("nearest_mode", "round_prefer_floor");
  if (nearest == "round_prefer_floor") p->nearest = Nearest::kRoundPreferFloor;
  else if (nearest == "round_prefer_ceil") p->nearest = Nearest::kRoundPreferCeil;
  else if (nearest == "floor") p->nearest = Nearest::kFloor;
  else if (nearest == "ceil") p->nearest = Nearest::kCeil;
  else return ctx.error("unknown nearest_mode '" + nearest + "'");
  p->cubic_a = n.attr_float("cubic_coeff_a", -0.75f);
  p->exclude_outside = n.attr_int("exclude_outside", 0) != 0;
  p->extrapolation = n.attr_float("extrapolation_value", 0.0f);
  return Status();
}

Status resize_kernel(RefKernelContext& ctx, bool is_upsample) {
  const Node& n = ctx.node();
  const Tensor* x = ctx.input(0);
  if (!x) return ctx.error("missing input X");
  if (x->dtype() == DType::kString) return ctx.unsupported("string tensors");
  ResizeParams p;
  TESSERA_RETURN_IF_ERROR(parse_params(ctx, is_upsample, &p));
  const int rank = x->rank();
  // Where the scales / sizes / roi come from depends on the op and opset.
  std::vector<double> scales, roi;
  std::vector<int64_t> sizes;
  bool have_sizes = false;
  if (is_upsample && n.opset < 9) {
    std::vector<float> s = n.attr_floats("scales");
    scales.assign(s.begin(), s.end());
  } else if (is_upsample || n.opset < 11) {
    if (!ctx.has_input(1)) return ctx.error("missing input scales");
    scales = ctx.input(1)->to_double_vector();
  } else {
    if (ctx.has_input(1) && ctx.input(1)->numel() > 0) roi = ctx.input(1)->to_double_vector();
    if (ctx.has_input(2) && ctx.input(2)->numel() > 0) scales = ctx.input(2)->to_double_vector();
    if (ctx.has_input(3) && ctx.input(3)->numel() > 0) {
      sizes = ctx.input(3)->to_int64_vector();
      have_sizes = true;
    }
    if (have_sizes && !scales.empty()) return ctx.error("only one of scales and sizes may be given");
    if (!have_sizes && scales.empty()) return ctx.error("one of scales and sizes must be given");
  }
  if (p.coord == Coord::kTfCropAndResize && static_cast<int>(roi.size()) != 2 * rank) {
    return ctx.error("tf_crop_and_resize needs roi of length 2 * rank = " + std::to_string(2 * rank));
  }
  if (p.coord != Coord::kTfCropAndResize) roi.clear();
  std::vector<int64_t> out_dims(rank);
  if (have_sizes) {
    if (static_cast<int>(sizes.size()) != rank) {
      return ctx.error("sizes has " + std::to_string(sizes.size()) + " values for rank " + std::to_string(rank));
    }
    scales.resize(rank);
    for (int d = 0; d < rank; ++d) {
      if (sizes[d] < 0) return ctx.error("negative size");
      if (sizes[d] > 0 && x->dim(d) == 0) return ctx.error("cannot resize an empty axis");
      out_dims[d] = sizes[d];
      scales[d] = x->dim(d) == 0 ? 1.0 : static_cast<double>(sizes[d]) / static_cast<double>(x->dim(d));
    }
  } else {
    if (static_cast<int>(scales.size()) != rank) {
      return ctx.error("scales has " + std::to_string(scales.size()) + " values for rank " + std::to_string(rank));
    }
    for (int d = 0; d < rank; ++d) {
      if (!(scales[d] > 0) || !std::isfinite(scales[d])) return ctx.error("scales must be positive");
      if (is_upsample && scales[d] < 1) return ctx.error("Upsample scales must be >= 1");
      double o = std::floor(static_cast<double>(x->dim(d)) * scales[d]);
      if (o > 1e12) return ctx.error("output too large");
      out_dims[d] = static_cast<int64_t>(o);
    }
  }
  double total = 1;
  for (int d = 0; d < rank; ++d) {
    if (out_dims[d] > 0 && scales[d] == 0) return ctx.error("zero scale");
    total *= static_cast<double>(out_dims[d]);
  }
  if (total > static_cast<double>(int64_t{1} << 34)) {
    return ctx.error("output " + dims_to_string(out_dims) + " is too large");
  }
  Tensor& y = ctx.output(0, x->dtype(), out_dims);
  if (y.numel() == 0) return Status();
  bool ok = visit_numeric_dtype(x->dtype(), [&](auto tag) {
    using T = decltype(tag);
    resize_typed<T>(ctx, p, *x, out_dims, scales, roi, y);
  });
  if (!ok) return ctx.unsupported(std::string("dtype ") + dtype_name(x->dtype()));
  return Status();
}

}  // namespace

void register_misc_resize_kernels(RefKernelTable& t) {
  t.add("Resize", [](RefKernelContext& ctx) { return resize_kernel(ctx, false); });
  t.add("Upsample", [](RefKernelContext& ctx) { return resize_kernel(ctx, true); });
}

}  // namespace tessera
