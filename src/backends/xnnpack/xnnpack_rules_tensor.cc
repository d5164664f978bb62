// Rules for data-movement ops: Concat, Resize, Softmax and the reshapes.
//
// This XNNPACK (2022) has no concatenate or transpose node, so Concat pads every input with zeros
// to the output's shape (at its offset along the axis) and adds the padded tensors: exact, since
// x + 0 == x. Nearest-neighbour Resize by integer factors is a broadcast multiply by ones (NHWC):
// x[N,H,1,W,1,C] * 1[1,1,kh,1,kw,1] is the upsampled tensor [N,H*kh,W*kw,C].
#include <cmath>

#include "backends/backend.h"
#include "backends/xnnpack/xnnpack_emitter.h"
#include "ops/op_registry.h"

namespace tessera::xnnpack {
namespace {

Status require_computed_input(const NodeView& n) {
  if (!n.has_input(0)) return n.reject("missing input");
  if (n.constant(0)) return n.reject("input is a constant (fold it first)");
  return Status();
}

Status reshape(Emitter& e, const Node& node, uint32_t x, const std::vector<size_t>& dims,
               uint32_t y) {
  return e.check(xnn_define_static_reshape(e.subgraph(), dims.size(), dims.data(), x, y, 0), node,
                 "xnn_define_static_reshape");
}

// ---- Concat
// ----------------------------------------------------------------------------------------

Status check_concat(const NodeView& n) {
  if (n.num_inputs() < 1) return n.reject("no inputs");
  bool any_computed = false;
  for (int i = 0; i < n.num_inputs(); ++i) {
    if (!n.has_input(i)) return n.reject("omitted input");
    if (n.input_rank(i) != n.output_rank()) return n.reject("inputs of different ranks");
    if (shape_numel(n.input_dims(i)) == 0) return n.reject("empty input");
    if (n.constant(i) && n.constant(i)->dtype() != DType::kFloat32)
      return n.reject("constant input is not float32");
    any_computed = any_computed || !n.constant(i);
  }
  if (!any_computed) return n.reject("all inputs are constants (fold them first)");
  return normalize_axis(n.node.attr_int("axis", 0), n.output_rank()).status();
}

Status emit_concat(Emitter& e, const Node& node) {
  NodeView n{e.graph(), node};
  const int rank = n.output_rank();
  const int yv = node.outputs[0];
  TESSERA_ASSIGN_OR_RETURN(int axis, normalize_axis(node.attr_int("axis", 0), rank));
  if (e.is_nhwc(yv)) axis = nhwc_axis(axis);
  const std::vector<size_t> yd = e.layout_dims(yv);
  TESSERA_ASSIGN_OR_RETURN(uint32_t y, e.output(node));
  if (n.num_inputs() == 1) {
    TESSERA_ASSIGN_OR_RETURN(uint32_t x, e.operand(node.inputs[0], rank));
    return reshape(e, node, x, yd, y);
  }
  std::vector<uint32_t> padded;
  size_t offset = 0;
  for (int i = 0; i < n.num_inputs(); ++i) {
    std::vector<int64_t> d = n.input_dims(i);
    if (e.is_nhwc(yv)) d = channels_last_dims(d);
    const size_t size = static_cast<size_t>(d[axis]);
    std::vector<size_t> pre(rank, 0), post(rank, 0);
    pre[axis] = offset;
    post[axis] = yd[axis] - offset - size;
    offset += size;
    TESSERA_ASSIGN_OR_RETURN(uint32_t x, e.operand(node.inputs[i], rank));
    TESSERA_ASSIGN_OR_RETURN(uint32_t p, e.internal(yd));
    TESSERA_RETURN_IF_ERROR(e.check(
        xnn_define_static_constant_pad(e.subgraph(), pre.data(), post.data(), 0.0f, x, p, 0), node,
        "xnn_define_static_constant_pad"));
    padded.push_back(p);
  }
  const Range all;
  uint32_t acc = padded[0];
  for (size_t i = 1; i < padded.size(); ++i) {
    uint32_t sum = y;
    if (i + 1 < padded.size()) {
      TESSERA_ASSIGN_OR_RETURN(sum, e.internal(yd));
    }
    TESSERA_RETURN_IF_ERROR(
        e.check(xnn_define_add2(e.subgraph(), all.min, all.max, acc, padded[i], sum, 0), node,
                "xnn_define_add2"));
    acc = sum;
  }
  return Status();
}

// ---- Resize
// ----------------------------------------------------------------------------------------

enum class Coord {
  kHalfPixel,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfHalfPixelForNn,
  kOther
};

struct ResizeSpec {
  bool linear = false;
  Coord coord = Coord::kHalfPixel;
  std::string nearest_mode;
  std::vector<int64_t> in, out;  // H, W
  std::vector<double> scale;     // H, W as ONNX's coordinate mapping uses them
};

Coord parse_coord(const Node& node) {
  if (node.opset < 11) return Coord::kAsymmetric;
  const std::string c = node.attr_string("coordinate_transformation_mode", "half_pixel");
  if (c == "half_pixel") return Coord::kHalfPixel;
  if (c == "pytorch_half_pixel") return Coord::kPytorchHalfPixel;
  if (c == "align_corners") return Coord::kAlignCorners;
  if (c == "asymmetric") return Coord::kAsymmetric;
  if (c == "tf_half_pixel_for_nn") return Coord::kTfHalfPixelForNn;
  return Coord::kOther;
}

// The input position ONNX's reference picks for output position o of a nearest resize.
int64_t nearest_source(const ResizeSpec& s, int a, int64_t o, int opset) {
  const double x = static_cast<double>(o), scale = s.scale[a], in = static_cast<double>(s.in[a]);
  const double out_width = scale * in;
  double x_ori = 0;
  switch (s.coord) {
    case Coord::kHalfPixel: x_ori = (x + 0.5) / scale - 0.5; break;
    case Coord::kPytorchHalfPixel: x_ori = out_width == 1.0 ? -0.5 : (x + 0.5) / scale - 0.5; break;
    case Coord::kAlignCorners:
      x_ori = out_width == 1.0 ? 0.0 : x * (in - 1) / (out_width - 1);
      break;
    case Coord::kAsymmetric: x_ori = x / scale; break;
    case Coord::kTfHalfPixelForNn: x_ori = (x + 0.5) / scale; break;
    case Coord::kOther: return -1;
  }
  int64_t pick = 0;
  if (opset < 11) {
    pick = static_cast<int64_t>(scale < 1.0 ? std::ceil(x_ori) : std::trunc(x_ori));
  } else {
    const double ceil_x = std::ceil(x_ori);
    const int64_t base = static_cast<int64_t>(ceil_x) - 1;
    const double ratio = x_ori - static_cast<double>(base);
    bool right = true;
    if (x_ori != ceil_x) {
      const std::string& m = s.nearest_mode;
      right = m == "round_prefer_ceil" ? ratio >= 0.5
              : m == "floor"           ? false
              : m == "ceil"            ? true
                                       : ratio > 0.5;
    }
    pick = right ? base + 1 : base;
  }
  return std::clamp<int64_t>(pick, 0, s.in[a] - 1);
}

Result<ResizeSpec> resize_spec(const NodeView& n) {
  if (n.input_rank(0) != 4) return n.reject("only 4-D inputs (2-D resizes)");
  TESSERA_RETURN_IF_ERROR(require_computed_input(n));
  const Node& node = n.node;
  ResizeSpec s;
  const std::string mode = node.attr_string("mode", "nearest");
  if (mode == "linear" || mode == "bilinear")
    s.linear = true;
  else if (mode != "nearest")
    return n.reject("mode '" + mode + "'");
  if (node.attr_int("antialias", 0) != 0) return n.reject("antialias");
  if (node.has_attr("axes")) return n.reject("the axes attribute");
  s.coord = parse_coord(node);
  s.nearest_mode = node.attr_string("nearest_mode", "round_prefer_floor");
  // Where the scales come from: input 1 before opset 11, inputs 2 (scales) or 3 (sizes) after.
  std::vector<double> scales;
  const int scales_input = node.opset < 11 ? 1 : 2;
  for (int i = 1; i < n.num_inputs(); ++i) {
    if (!n.has_input(i) || (i == 1 && node.opset >= 11))
      continue;  // roi matters only for tf_crop_and_resize
    const Tensor* t = n.constant(i);
    if (!t) return n.reject("scales and sizes must be constants");
    if (i == scales_input && t->numel() > 0) scales = t->to_double_vector();
  }
  const std::vector<int64_t> x = n.input_dims(0), y = n.output_dims();
  if (x[0] != y[0] || x[1] != y[1]) return n.reject("resizes N or C");
  for (int a = 0; a < 2; ++a) {
    s.in.push_back(x[2 + a]);
    s.out.push_back(y[2 + a]);
    // With scales given, ONNX maps coordinates with them; XNNPACK with in/out: equal only when
    // the scale gives the output size exactly.
    const double scale = scales.empty() ? double(y[2 + a]) / double(x[2 + a]) : scales[2 + a];
    if (double(x[2 + a]) * scale != double(y[2 + a]))
      return n.reject("scale does not give an integral output size");
    s.scale.push_back(scale);
  }
  if (s.linear) {
    switch (s.coord) {
      case Coord::kHalfPixel:
      case Coord::kAlignCorners:
      case Coord::kAsymmetric: break;
      case Coord::kPytorchHalfPixel:
        if (s.out[0] == 1 || s.out[1] == 1) return n.reject("pytorch_half_pixel to size 1");
        break;
      default:
        return n.reject("linear resize with coordinate_transformation_mode '" +
                        node.attr_string("coordinate_transformation_mode", "") + "'");
    }
    return s;
  }
  // Nearest: integer upsampling only, and ONNX's pick must be floor(o / k) on both axes.
  for (int a = 0; a < 2; ++a) {
    if (s.out[a] % s.in[a] != 0) return n.reject("nearest resize by a non-integer factor");
    const int64_t k = s.out[a] / s.in[a];
    for (int64_t o = 0; o < s.out[a]; ++o) {
      if (nearest_source(s, a, o, node.opset) != o / k) {
        return n.reject("nearest resize whose coordinate mode does not replicate pixels");
      }
    }
  }
  return s;
}

Status check_resize(const NodeView& n) { return resize_spec(n).status(); }

Status emit_resize(Emitter& e, const Node& node) {
  NodeView n{e.graph(), node};
  TESSERA_ASSIGN_OR_RETURN(ResizeSpec s, resize_spec(n));
  TESSERA_ASSIGN_OR_RETURN(uint32_t x, e.value(node.inputs[0]));
  TESSERA_ASSIGN_OR_RETURN(uint32_t y, e.output(node));
  if (s.linear) {
    uint32_t flags = 0;  // half_pixel: XNNPACK's default mapping
    if (s.coord == Coord::kAlignCorners) flags = XNN_FLAG_ALIGN_CORNERS;
    if (s.coord == Coord::kAsymmetric) flags = XNN_FLAG_TENSORFLOW_LEGACY_MODE;
    return e.check(xnn_define_static_resize_bilinear_2d(e.subgraph(), size_t(s.out[0]),
                                                        size_t(s.out[1]), x, y, flags),
                   node, "xnn_define_static_resize_bilinear_2d");
  }
  // NHWC (Resize makes its subgraph NHWC): the broadcast's inner loop runs over C.
  const std::vector<size_t> yd = e.layout_dims(node.outputs[0]);
  const size_t kh = size_t(s.out[0] / s.in[0]), kw = size_t(s.out[1] / s.in[1]);
  if (kh == 1 && kw == 1) return reshape(e, node, x, yd, y);
  const std::vector<int64_t> d = e.dims(node.inputs[0]);
  const size_t nb = size_t(d[0]), c = size_t(d[1]), h = size_t(d[2]), w = size_t(d[3]);
  const std::vector<size_t> spread{nb, h, 1, w, 1, c}, ones{1, 1, kh, 1, kw, 1},
      wide{nb, h, kh, w, kw, c};
  TESSERA_ASSIGN_OR_RETURN(uint32_t xs, e.internal(spread));
  TESSERA_ASSIGN_OR_RETURN(uint32_t one, e.constant(ones, std::vector<float>(kh * kw, 1.0f)));
  TESSERA_ASSIGN_OR_RETURN(uint32_t up, e.internal(wide));
  TESSERA_RETURN_IF_ERROR(reshape(e, node, x, spread, xs));
  const Range all;
  TESSERA_RETURN_IF_ERROR(
      e.check(xnn_define_multiply2(e.subgraph(), all.min, all.max, xs, one, up, 0), node,
              "xnn_define_multiply2"));
  return reshape(e, node, up, yd, y);
}

// ---- Softmax
// ---------------------------------------------------------------------------------------

Status check_softmax(const NodeView& n) {
  TESSERA_RETURN_IF_ERROR(require_computed_input(n));
  const int rank = n.input_rank(0);
  if (rank < 1) return n.reject("scalar input");
  TESSERA_ASSIGN_OR_RETURN(
      int axis, normalize_axis(n.node.attr_int("axis", n.node.opset >= 13 ? -1 : 1), rank));
  if (axis == rank - 1) return Status();
  // Before opset 13 Softmax flattens dims [axis, rank): the last axis alone when the others are 1.
  if (n.node.opset < 13) {
    const std::vector<int64_t> d = n.input_dims(0);
    int64_t mid = 1;
    for (int k = axis; k < rank - 1; ++k) mid *= d[k];
    if (mid == 1) return Status();
  }
  return n.reject("XNNPACK's softmax runs over the last axis only");
}

Status softmax_layout(const NodeView& n, bool nhwc) {
  if (nhwc && n.input_rank(0) == 4)
    return n.reject("4-D softmax in an NHWC subgraph (its last axis is C there)");
  return Status();
}

Status emit_softmax(Emitter& e, const Node& node) {
  TESSERA_ASSIGN_OR_RETURN(uint32_t x, e.value(node.inputs[0]));
  TESSERA_ASSIGN_OR_RETURN(uint32_t y, e.output(node));
  return e.check(xnn_define_softmax(e.subgraph(), x, y, 0), node, "xnn_define_softmax");
}

// ---- Reshape, Flatten, Squeeze, Unsqueeze: the output type says the shape -----------------------

Status check_reshape(const NodeView& n) { return require_computed_input(n); }

// An NHWC value may take part only when its data reads the same in both orders.
Status reshape_layout(const NodeView& n, bool nhwc) {
  if (!nhwc) return Status();
  if (n.input_rank(0) == 4 && !nhwc_is_plain(n.input_dims(0)))
    return n.reject("reshapes an NHWC tensor");
  if (n.output_rank() == 4 && !nhwc_is_plain(n.output_dims()))
    return n.reject("reshapes into an NHWC tensor");
  return Status();
}

Status emit_reshape(Emitter& e, const Node& node) {
  TESSERA_ASSIGN_OR_RETURN(uint32_t x, e.value(node.inputs[0]));
  TESSERA_ASSIGN_OR_RETURN(uint32_t y, e.output(node));
  return reshape(e, node, x, e.layout_dims(node.outputs[0]), y);
}

}  // namespace

void add_tensor_rules(std::vector<OpRule>& rules) {
  rules.push_back({"Concat", never_nhwc, check_concat, nullptr, emit_concat, false});
  // Resize runs NHWC in both modes: XNNPACK's bilinear resize is NHWC only, and the nearest one's
  // broadcast would loop over the (tiny) replication factor innermost in NCHW.
  rules.push_back({"Resize", always_nhwc, check_resize, nullptr, emit_resize, false});
  rules.push_back({"Softmax", never_nhwc, check_softmax, softmax_layout, emit_softmax, false});
  for (const char* op : {"Reshape", "Flatten", "Squeeze", "Unsqueeze"}) {
    rules.push_back({op, never_nhwc, check_reshape, reshape_layout, emit_reshape, false});
  }
}

}  // namespace tessera::xnnpack
