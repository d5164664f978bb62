// NonMaxSuppression (opset 10/11), RoiAlign (opset 10/16) and GridSample (opset 16), following
// onnxruntime's CPU kernels, which produced the ONNX test data.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "backends/ref/misc_kernels.h"
#include "backends/ref/ref_util.h"

namespace tessera {
namespace {

// Writes values computed in double as output 0 of float dtype `dtype`.
Status write_float_output(RefKernelContext& ctx, const std::vector<double>& values, DType dtype,
                          std::vector<int64_t> dims) {
  Tensor& out = ctx.output(0, dtype, std::move(dims));
  bool ok = ref::visit_float_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = out.data<T>();
    for (size_t i = 0; i < values.size(); ++i) p[i] = static_cast<T>(values[i]);
  });
  if (!ok) return ctx.unsupported(std::string("dtype ") + dtype_name(dtype));
  return Status();
}

// ---------------------------------------------------------------------------------------------
// NonMaxSuppression

struct Box {
  double y1, x1, y2, x2;  // normalized so that y1 <= y2 and x1 <= x2
};

Box read_box(const std::vector<double>& v, int64_t offset, bool center_point) {
  double a = v[offset], b = v[offset + 1], c = v[offset + 2], d = v[offset + 3];
  if (center_point) {  // [x_center, y_center, width, height]
    return {b - d / 2, a - c / 2, b + d / 2, a + c / 2};
  }
  return {std::min(a, c), std::min(b, d), std::max(a, c), std::max(b, d)};
}

// Whether `a` suppresses `b`: IoU strictly above the threshold.
bool suppresses(const Box& a, const Box& b, double iou_threshold) {
  double area_a = (a.y2 - a.y1) * (a.x2 - a.x1);
  double area_b = (b.y2 - b.y1) * (b.x2 - b.x1);
  if (area_a <= 0 || area_b <= 0) return false;
  double iy = std::min(a.y2, b.y2) - std::max(a.y1, b.y1);
  double ix = std::min(a.x2, b.x2) - std::max(a.x1, b.x1);
  if (iy <= 0 || ix <= 0) return false;
  double inter = iy * ix;
  return inter / (area_a + area_b - inter) > iou_threshold;
}

Status nms_kernel(RefKernelContext& ctx) {
  const Tensor* boxes = ctx.input(0);
  const Tensor* scores = ctx.input(1);
  if (!boxes || !scores) return ctx.error("missing boxes or scores");
  if (boxes->rank() != 3 || boxes->dim(2) != 4) return ctx.error("boxes must be [batches, boxes, 4]");
  if (scores->rank() != 3) return ctx.error("scores must be [batches, classes, boxes]");
  const int64_t batches = boxes->dim(0), num_boxes = boxes->dim(1), classes = scores->dim(1);
  if (scores->dim(0) != batches || scores->dim(2) != num_boxes) {
    return ctx.error("boxes " + dims_to_string(boxes->dims()) + " and scores " +
                     dims_to_string(scores->dims()) + " do not match");
  }
  int64_t max_per_class = 0;
  double iou_threshold = 0;
  bool has_score_threshold = false;
  double score_threshold = 0;
  if (const Tensor* t = ctx.input(2); t && t->numel() > 0) max_per_class = t->as_int64(0);
  if (const Tensor* t = ctx.input(3); t && t->numel() > 0) iou_threshold = t->as_double(0);
  if (const Tensor* t = ctx.input(4); t && t->numel() > 0) {
    has_score_threshold = true;
    score_threshold = t->as_double(0);
  }
  if (iou_threshold < 0 || iou_threshold > 1) return ctx.error("iou_threshold must be in [0, 1]");
  const int64_t center = ctx.node().attr_int("center_point_box", 0);
  if (center != 0 && center != 1) return ctx.error("center_point_box must be 0 or 1");
  std::vector<double> box_values = boxes->to_double_vector();
  std::vector<double> score_values = scores->to_double_vector();
  std::vector<int64_t> selected;  // triples
  for (int64_t b = 0; b < batches && max_per_class > 0; ++b) {
    std::vector<Box> all(num_boxes);
    for (int64_t i = 0; i < num_boxes; ++i) all[i] = read_box(box_values, (b * num_boxes + i) * 4, center == 1);
    for (int64_t c = 0; c < classes; ++c) {
      const double* s = score_values.data() + (b * classes + c) * num_boxes;
      std::vector<int64_t> order;
      for (int64_t i = 0; i < num_boxes; ++i) {
        if (!has_score_threshold || s[i] > score_threshold) order.push_back(i);
      }
      std::stable_sort(order.begin(), order.end(), [&](int64_t l, int64_t r) { return s[l] > s[r]; });
      std::vector<int64_t> kept;
      for (int64_t i : order) {
        if (static_cast<int64_t>(kept.size()) >= max_per_class) break;
        bool keep = true;
        for (int64_t k : kept) {
          if (suppresses(all[k], all[i], iou_threshold)) {
            keep = false;
            break;
          }
        }
        if (keep) kept.push_back(i);
      }
      for (int64_t k : kept) selected.insert(selected.end(), {b, c, k});
    }
  }
  Tensor& out = ctx.output(0, DType::kInt64, {static_cast<int64_t>(selected.size() / 3), 3});
  std::copy(selected.begin(), selected.end(), out.data<int64_t>());
  return Status();
}

// ---------------------------------------------------------------------------------------------
// RoiAlign

Status roi_align_kernel(RefKernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  const Tensor* rois = ctx.input(1);
  const Tensor* batch_indices = ctx.input(2);
  if (!x || !rois || !batch_indices) return ctx.error("needs X, rois and batch_indices");
  if (x->rank() != 4) return ctx.error("X must be [N, C, H, W]");
  if (rois->rank() != 2 || rois->dim(1) != 4) return ctx.error("rois must be [num_rois, 4]");
  const int64_t num_rois = rois->dim(0);
  if (batch_indices->numel() != num_rois) return ctx.error("batch_indices must have num_rois values");
  const Node& n = ctx.node();
  const std::string mode = n.attr_string("mode", "avg");
  if (mode != "avg" && mode != "max") return ctx.error("unknown mode '" + mode + "'");
  const int64_t out_h = n.attr_int("output_height", 1), out_w = n.attr_int("output_width", 1);
  const int64_t sampling_ratio = n.attr_int("sampling_ratio", 0);
  const double spatial_scale = n.attr_float("spatial_scale", 1.0f);
  if (out_h <= 0 || out_w <= 0) return ctx.error("output_height and output_width must be positive");
  if (sampling_ratio < 0) return ctx.error("sampling_ratio must be >= 0");
  const std::string coord =
      n.attr_string("coordinate_transformation_mode", n.opset >= 16 ? "half_pixel" : "output_half_pixel");
  if (coord != "half_pixel" && coord != "output_half_pixel") {
    return ctx.error("unknown coordinate_transformation_mode '" + coord + "'");
  }
  const bool half_pixel = coord == "half_pixel";
  const int64_t N = x->dim(0), C = x->dim(1), H = x->dim(2), W = x->dim(3);
  if (H <= 0 || W <= 0) return ctx.error("X has an empty spatial dimension");
  std::vector<double> xv = x->to_double_vector();
  std::vector<double> rv = rois->to_double_vector();
  std::vector<int64_t> bi = batch_indices->to_int64_vector();
  std::vector<double> result(num_rois * C * out_h * out_w, 0.0);
  for (int64_t r = 0; r < num_rois; ++r) {
    if (bi[r] < 0 || bi[r] >= N) return ctx.error("batch index out of range");
    const double offset = half_pixel ? 0.5 : 0.0;
    const double start_w = rv[r * 4] * spatial_scale - offset, start_h = rv[r * 4 + 1] * spatial_scale - offset;
    const double end_w = rv[r * 4 + 2] * spatial_scale - offset, end_h = rv[r * 4 + 3] * spatial_scale - offset;
    double roi_w = end_w - start_w, roi_h = end_h - start_h;
    if (!half_pixel) {
      roi_w = std::max(roi_w, 1.0);
      roi_h = std::max(roi_h, 1.0);
    }
    const double bin_h = roi_h / static_cast<double>(out_h), bin_w = roi_w / static_cast<double>(out_w);
    const int64_t grid_h = sampling_ratio > 0 ? sampling_ratio : static_cast<int64_t>(std::ceil(roi_h / out_h));
    const int64_t grid_w = sampling_ratio > 0 ? sampling_ratio : static_cast<int64_t>(std::ceil(roi_w / out_w));
    if (grid_h > (1 << 20) || grid_w > (1 << 20)) return ctx.error("roi too large");
    const double count = static_cast<double>(std::max<int64_t>(grid_h * grid_w, 1));
    for (int64_t c = 0; c < C; ++c) {
      const double* img = xv.data() + (bi[r] * C + c) * H * W;
      for (int64_t ph = 0; ph < out_h; ++ph) {
        for (int64_t pw = 0; pw < out_w; ++pw) {
          double acc = 0;
          bool have_max = false;
          for (int64_t iy = 0; iy < grid_h; ++iy) {
            for (int64_t ix = 0; ix < grid_w; ++ix) {
              double y = start_h + ph * bin_h + (iy + 0.5) * bin_h / static_cast<double>(grid_h);
              double xx = start_w + pw * bin_w + (ix + 0.5) * bin_w / static_cast<double>(grid_w);
              double w1 = 0, w2 = 0, w3 = 0, w4 = 0;
              int64_t y_low = 0, x_low = 0, y_high = 0, x_high = 0;
              if (!(y < -1.0 || y > H || xx < -1.0 || xx > W)) {
                y = std::max(y, 0.0);
                xx = std::max(xx, 0.0);
                y_low = static_cast<int64_t>(y);
                x_low = static_cast<int64_t>(xx);
                if (y_low >= H - 1) { y_high = y_low = H - 1; y = static_cast<double>(y_low); } else { y_high = y_low + 1; }
                if (x_low >= W - 1) { x_high = x_low = W - 1; xx = static_cast<double>(x_low); } else { x_high = x_low + 1; }
                double ly = y - y_low, lx = xx - x_low, hy = 1 - ly, hx = 1 - lx;
                w1 = hy * hx; w2 = hy * lx; w3 = ly * hx; w4 = ly * lx;
              }
              double v1 = w1 * img[y_low * W + x_low], v2 = w2 * img[y_low * W + x_high];
              double v3 = w3 * img[y_high * W + x_low], v4 = w4 * img[y_high * W + x_high];
              if (mode == "avg") {
                acc += v1 + v2 + v3 + v4;
              } else {
                double m = std::max({v1, v2, v3, v4});
                acc = have_max ? std::max(acc, m) : m;
                have_max = true;
              }
            }
          }
          if (mode == "avg") acc /= count;
          result[((r * C + c) * out_h + ph) * out_w + pw] = acc;
        }
      }
    }
  }
  return write_float_output(ctx, result, x->dtype(), {num_rois, C, out_h, out_w});
}

// ---------------------------------------------------------------------------------------------
// GridSample

enum class Padding { kZeros, kBorder, kReflection };

double reflect(double x, double lo, double hi) {
  double range = hi - lo;
  if (range <= 0) return lo;
  if (x < lo) {
    double dx = lo - x;
    int64_t n = static_cast<int64_t>(dx / range);
    double r = dx - static_cast<double>(n) * range;
    return n % 2 == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    double dx = x - hi;
    int64_t n = static_cast<int64_t>(dx / range);
    double r = dx - static_cast<double>(n) * range;
    return n % 2 == 0 ? hi - r : lo + r;
  }
  return x;
}

void cubic_coeffs(double t, double coeffs[4]) {
  const double a = -0.75;
  t = std::abs(t);
  coeffs[0] = ((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a;
  coeffs[1] = ((a + 2) * t - (a + 3)) * t * t + 1;
  coeffs[2] = ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1;
  coeffs[3] = ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a;
}

Status grid_sample_kernel(RefKernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  const Tensor* grid = ctx.input(1);
  if (!x || !grid) return ctx.error("needs X and grid");
  if (x->rank() != 4) return ctx.unsupported("only 4-D inputs (N, C, H, W)");
  if (grid->rank() != 4 || grid->dim(3) != 2 || grid->dim(0) != x->dim(0)) {
    return ctx.error("grid must be [N, H_out, W_out, 2]");
  }
  const Node& n = ctx.node();
  const bool align = n.attr_int("align_corners", 0) != 0;
  std::string mode = n.attr_string("mode", "bilinear");
  std::string pad_name = n.attr_string("padding_mode", "zeros");
  int interp;  // 0 nearest, 1 bilinear, 2 bicubic
  if (mode == "nearest") interp = 0;
  else if (mode == "bilinear" || mode == "linear") interp = 1;
  else if (mode == "bicubic" || mode == "cubic") interp = 2;
  else return ctx.error("unknown mode '" + mode + "'");
  Padding padding;
  if (pad_name == "zeros") padding = Padding::kZeros;
  else if (pad_name == "border") padding = Padding::kBorder;
  else if (pad_name == "reflection") padding = Padding::kReflection;
  else return ctx.error("unknown padding_mode '" + pad_name + "'");
  const int64_t N = x->dim(0), C = x->dim(1), H = x->dim(2), W = x->dim(3);
  const int64_t Ho = grid->dim(1), Wo = grid->dim(2);
  std::vector<double> xv = x->to_double_vector(), gv = grid->to_double_vector();
  const double x_min = align ? 0.0 : -0.5, x_max = align ? W - 1.0 : W - 0.5;
  const double y_min = align ? 0.0 : -0.5, y_max = align ? H - 1.0 : H - 0.5;
  auto pixel = [&](const double* img, int64_t r, int64_t c) -> double {
    if (padding == Padding::kZeros) {
      return (r >= 0 && r < H && c >= 0 && c < W) ? img[r * W + c] : 0.0;
    }
    if (padding == Padding::kBorder) {
      r = std::clamp<int64_t>(r, 0, H - 1);
      c = std::clamp<int64_t>(c, 0, W - 1);
    } else {
      c = static_cast<int64_t>(reflect(static_cast<double>(c), x_min, x_max));
      r = static_cast<int64_t>(reflect(static_cast<double>(r), y_min, y_max));
      r = std::clamp<int64_t>(r, 0, H - 1);
      c = std::clamp<int64_t>(c, 0, W - 1);
    }
    return img[r * W + c];
  };
  std::vector<double> result(N * C * Ho * Wo, 0.0);
  if (H > 0 && W > 0) {
    for (int64_t b = 0; b < N; ++b) {
      for (int64_t oy = 0; oy < Ho; ++oy) {
        for (int64_t ox = 0; ox < Wo; ++ox) {
          const double* g = gv.data() + ((b * Ho + oy) * Wo + ox) * 2;
          double xs = align ? (g[0] + 1) / 2 * (W - 1) : ((g[0] + 1) * W - 1) / 2;
          double ys = align ? (g[1] + 1) / 2 * (H - 1) : ((g[1] + 1) * H - 1) / 2;
          if (!std::isfinite(xs) || !std::isfinite(ys)) continue;  // NaN grid: zero output
          if (interp == 0) {
            xs = std::nearbyint(xs);
            ys = std::nearbyint(ys);
          }
          if (xs < x_min || xs > x_max || ys < y_min || ys > y_max) {
            if (padding == Padding::kBorder) {
              xs = std::clamp(xs, 0.0, W - 1.0);
              ys = std::clamp(ys, 0.0, H - 1.0);
            } else if (padding == Padding::kReflection) {
              xs = reflect(xs, x_min, x_max);
              ys = reflect(ys, y_min, y_max);
            }
          }
          // Far-away coordinates only ever read padding; keep the integer math in range.
          xs = std::clamp(xs, -4.0 - W, 4.0 + 2.0 * W);
          ys = std::clamp(ys, -4.0 - H, 4.0 + 2.0 * H);
          for (int64_t c = 0; c < C; ++c) {
            const double* img = xv.data() + (b * C + c) * H * W;
            double v = 0;
            if (interp == 0) {
              v = pixel(img, static_cast<int64_t>(ys), static_cast<int64_t>(xs));
            } else if (interp == 1) {
              double fx = std::floor(xs), fy = std::floor(ys);
              int64_t x1 = static_cast<int64_t>(fx), y1 = static_cast<int64_t>(fy);
              double dx1 = xs - fx, dy1 = ys - fy, dx2 = 1 - dx1, dy2 = 1 - dy1;
              v = dy2 * (dx2 * pixel(img, y1, x1) + dx1 * pixel(img, y1, x1 + 1)) +
                  dy1 * (dx2 * pixel(img, y1 + 1, x1) + dx1 * pixel(img, y1 + 1, x1 + 1));
            } else {
              double fx = std::floor(xs), fy = std::floor(ys);
              int64_t x0 = static_cast<int64_t>(fx) - 1, y0 = static_cast<int64_t>(fy) - 1;
              double cx[4], cy[4];
              cubic_coeffs(xs - fx, cx);
              cubic_coeffs(ys - fy, cy);
              for (int i = 0; i < 4; ++i) {
                double row = 0;
                for (int j = 0; j < 4; ++j) row += cx[j] * pixel(img, y0 + i, x0 + j);
                v += cy[i] * row;
              }
            }
            result[((b * C + c) * Ho + oy) * Wo + ox] = v;
          }
        }
      }
    }
  }
  return write_float_output(ctx, result, x->dtype(), {N, C, Ho, Wo});
}

}  // namespace

void register_misc_vision_kernels(RefKernelTable& t) {
  t.add("NonMaxSuppression", nms_kernel);
  t.add("RoiAlign", roi_align_kernel);
  t.add("GridSample", grid_sample_kernel);
}

}  // namespace tessera
