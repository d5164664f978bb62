#include "backends/onednn/onednn_support.h"

#include <cmath>
#include <functional>
#include <limits>
#include <map>

#include "ops/nn_geometry.h"

namespace tessera::onednn {
namespace {

Status reject(const Node& node, const std::string& why) {
  return unimplemented(node.op_type + ": " + why);
}

// Input i is present, float32, and of known rank.
Status check_data_input(const Graph& g, const Node& node, size_t i, const char* name) {
  if (i >= node.inputs.size() || node.inputs[i] == kNoValue)
    return reject(node, std::string("missing input ") + name);
  const TensorType& t = g.value(node.inputs[i]).type;
  if (t.dtype != DType::kFloat32)
    return reject(node, std::string(name) + " dtype " + dtype_name(t.dtype) + " (float32 only)");
  if (!t.has_rank()) return reject(node, std::string(name) + " has unknown rank");
  if (t.is_static()) {
    for (int64_t d : t.static_dims())
      if (d == 0) return reject(node, "empty tensors");
  }
  return Status();
}

// Every output that the graph uses must be float32; `used` outputs beyond the first are rejected.
Status check_outputs(const Graph& g, const Node& node, size_t max_used) {
  for (size_t o = 0; o < node.outputs.size(); ++o) {
    int v = node.outputs[o];
    if (v == kNoValue) continue;
    if (o >= max_used && (!g.value(v).consumers.empty() || g.value(v).is_graph_output)) {
      return reject(node, "output " + std::to_string(o) + " is not supported");
    }
    if (o < max_used && g.value(v).type.dtype != DType::kFloat32)
      return reject(node, "output dtype must be float32");
  }
  return Status();
}

bool present(const Node& node, size_t i) {
  return i < node.inputs.size() && node.inputs[i] != kNoValue;
}

int known_rank(const Graph& g, const Node& node, size_t i) {
  return g.value(node.inputs[i]).type.rank();
}

Status check_conv(const Graph& g, const Node& node) {
  TESSERA_RETURN_IF_ERROR(check_data_input(g, node, 0, "X"));
  TESSERA_RETURN_IF_ERROR(check_data_input(g, node, 1, "W"));
  const int rank = known_rank(g, node, 0);
  if (rank < 3 || rank > 5)
    return reject(node, "input rank " + std::to_string(rank) + " (1-3 spatial dims)");
  if (known_rank(g, node, 1) != rank) return reject(node, "W rank differs from X rank");
  if (present(node, 2)) {
    TESSERA_RETURN_IF_ERROR(check_data_input(g, node, 2, "B"));
    if (known_rank(g, node, 2) != 1) return reject(node, "B must be 1-D");
  }
  if (node.attr_int("group", 1) < 1) return reject(node, "group must be positive");
  TESSERA_ASSIGN_OR_RETURN(nn::AutoPad ap, nn::parse_auto_pad(node));
  (void)ap;
  const TensorType& x = g.value(node.inputs[0]).type;
  const TensorType& w = g.value(node.inputs[1]).type;
  if (!x.is_static() || !w.is_static()) return Status();  // geometry checked when shapes are known
  Dims xd = x.static_dims(), wd = w.static_dims();
  Dims in(xd.begin() + 2, xd.end()), kernel(wd.begin() + 2, wd.end());
  const int64_t group = node.attr_int("group", 1);
  if (node.op_type == "Conv") {
    if (xd[1] % group != 0 || wd[0] % group != 0 || wd[1] * group != xd[1]) {
      return reject(node, "channels do not match group");
    }
    auto geo = nn::forward_window(node, in, kernel, false);
    if (!geo.ok()) return reject(node, geo.status().message());
    for (int64_t o : geo->out)
      if (o <= 0) return reject(node, "empty output");
    return Status();
  }
  if (wd[0] != xd[1] || xd[1] % group != 0) return reject(node, "channels do not match group");
  auto geo = nn::transposed_window(node, in, kernel);
  if (!geo.ok()) return reject(node, geo.status().message());
  std::vector<int64_t> out_pad = node.attr_ints("output_padding", Dims(in.size(), 0));
  for (size_t i = 0; i < in.size(); ++i) {
    // oneDNN's deconvolution has no output_padding: it becomes less right padding, which must
    // stay >= 0; negative left padding (output_shape larger than the full extent) neither.
    const int64_t full =
        geo->strides[i] * (in[i] - 1) + (geo->kernel[i] - 1) * geo->dilations[i] + 1;
    const int64_t right = full - geo->out[i] - geo->pads_begin[i];
    if (geo->pads_begin[i] < 0 || right < 0) {
      return reject(
          node, "output_padding / output_shape beyond the padding (oneDNN has no output padding)");
    }
    if (geo->out[i] <= 0) return reject(node, "empty output");
  }
  return Status();
}

Status check_conv_transpose(const Graph& g, const Node& node) {
  TESSERA_RETURN_IF_ERROR(check_conv(g, node));
  const TensorType& x = g.value(node.inputs[0]).type;
  const bool static_shapes = x.is_static() && g.value(node.inputs[1]).type.is_static();
  TESSERA_ASSIGN_OR_RETURN(nn::AutoPad ap, nn::parse_auto_pad(node));
  if (!static_shapes) {
    if (node.has_attr("output_shape") || ap == nn::AutoPad::kSameUpper ||
        ap == nn::AutoPad::kSameLower) {
      return reject(node, "output_shape / SAME padding needs static shapes");
    }
    Dims pads = node.attr_ints("pads"), out_pad = node.attr_ints("output_padding");
    for (size_t i = 0; i < out_pad.size(); ++i) {
      int64_t end = ap == nn::AutoPad::kValid || pads.size() != 2 * out_pad.size()
                        ? 0
                        : pads[out_pad.size() + i];
      if (out_pad[i] > end)
        return reject(node, "output_padding beyond the padding (oneDNN has no output padding)");
    }
  }
  return Status();
}

Status check_matmul(const Graph& g, const Node& node) {
  TESSERA_RETURN_IF_ERROR(check_data_input(g, node, 0, "A"));
  TESSERA_RETURN_IF_ERROR(check_data_input(g, node, 1, "B"));
  for (size_t i = 0; i < 2; ++i) {
    int r = known_rank(g, node, i);
    if (r < 1 || r > 6) return reject(node, "operand rank " + std::to_string(r) + " (1 to 6)");
  }
  return Status();
}

Status check_gemm(const Graph& g, const Node& node) {
  TESSERA_RETURN_IF_ERROR(check_data_input(g, node, 0, "A"));
  TESSERA_RETURN_IF_ERROR(check_data_input(g, node, 1, "B"));
  if (node.opset < 7) return reject(node, "opset < 7 (legacy broadcast attribute)");
  if (known_rank(g, node, 0) != 2 || known_rank(g, node, 1) != 2)
    return reject(node, "A and B must be 2-D");
  if (present(node, 2)) {
    TESSERA_RETURN_IF_ERROR(check_data_input(g, node, 2, "C"));
    if (known_rank(g, node, 2) > 2) return reject(node, "C rank > 2");
    const float beta = node.attr_float("beta", 1.0f);
    if (beta != 1.0f && !g.value(node.inputs[2]).constant)
      return reject(node, "beta != 1 with a non-constant C");
  }
  return Status();
}

Status check_pool(const Graph& g, const Node& node) {
  TESSERA_RETURN_IF_ERROR(check_data_input(g, node, 0, "X"));
  const int rank = known_rank(g, node, 0);
  if (rank < 3 || rank > 5)
    return reject(node, "input rank " + std::to_string(rank) + " (1-3 spatial dims)");
  if (node.op_type == "GlobalAveragePool" || node.op_type == "GlobalMaxPool") return Status();
  if (node.attr_ints("kernel_shape").size() != static_cast<size_t>(rank - 2))
    return reject(node, "bad kernel_shape");
  TESSERA_ASSIGN_OR_RETURN(nn::AutoPad ap, nn::parse_auto_pad(node));
  (void)ap;
  const bool ceil_mode = node.attr_int("ceil_mode", 0) != 0;
  if (node.op_type == "AveragePool" && node.attr_int("count_include_pad", 0) != 0 && ceil_mode) {
    // With ceil_mode the last window may overhang the padding; ONNX then divides by the padded
    // part only, oneDNN by the whole kernel. Static shapes tell whether any window overhangs.
    const TensorType& x = g.value(node.inputs[0]).type;
    if (!x.is_static()) return reject(node, "count_include_pad with ceil_mode needs static shapes");
    Dims xd = x.static_dims();
    auto geo = nn::forward_window(node, Dims(xd.begin() + 2, xd.end()),
                                  node.attr_ints("kernel_shape"), true);
    if (!geo.ok()) return reject(node, geo.status().message());
    for (size_t i = 0; i < geo->out.size(); ++i) {
      const int64_t last_end =
          (geo->out[i] - 1) * geo->strides[i] + (geo->kernel[i] - 1) * geo->dilations[i] + 1;
      if (last_end > xd[i + 2] + geo->pads_begin[i] + geo->pads_end[i]) {
        return reject(node, "count_include_pad with a ceil_mode window beyond the padding");
      }
    }
  }
  return Status();
}

Status check_batch_norm(const Graph& g, const Node& node) {
  TESSERA_RETURN_IF_ERROR(check_data_input(g, node, 0, "X"));
  if (known_rank(g, node, 0) < 2) return reject(node, "X rank < 2");
  if (node.attr_int("training_mode", 0) != 0) return reject(node, "training mode");
  if (node.opset < 9 && node.attr_int("spatial", 1) == 0) return reject(node, "spatial=0");
  for (size_t i = 1; i <= 4; ++i) {
    const Tensor* t = float_constant(g, present(node, i) ? node.inputs[i] : -1);
    if (!t || t->rank() != 1)
      return reject(node, "scale, B, mean and var must be 1-D float32 constants");
  }
  return Status();
}

Status check_activation(const Graph& g, const Node& node) {
  TESSERA_RETURN_IF_ERROR(check_data_input(g, node, 0, "X"));
  auto ops = activation_ops(g, node);
  return ops.ok() ? Status() : ops.status();
}

Status check_binary(const Graph& g, const Node& node) {
  if (node.inputs.size() != 2) return reject(node, "exactly two inputs");
  TESSERA_RETURN_IF_ERROR(check_data_input(g, node, 0, "A"));
  TESSERA_RETURN_IF_ERROR(check_data_input(g, node, 1, "B"));
  if (node.opset < 7 && node.attr_int("broadcast", 0) != 0)
    return reject(node, "legacy broadcast attribute");
  return Status();
}

Status check_softmax(const Graph& g, const Node& node) {
  TESSERA_RETURN_IF_ERROR(check_data_input(g, node, 0, "X"));
  const int rank = known_rank(g, node, 0);
  const int64_t axis = node.attr_int("axis", node.opset >= 13 ? -1 : 1);
  if (axis < -rank || axis > (node.opset >= 13 ? rank - 1 : rank) || rank == 0)
    return reject(node, "bad axis");
  return Status();
}

Status check_layer_norm(const Graph& g, const Node& node) {
  TESSERA_RETURN_IF_ERROR(check_data_input(g, node, 0, "X"));
  TESSERA_RETURN_IF_ERROR(check_data_input(g, node, 1, "Scale"));
  TESSERA_RETURN_IF_ERROR(check_outputs(g, node, 1));
  const int rank = known_rank(g, node, 0);
  const int64_t axis = node.attr_int("axis", -1);
  if (rank == 0 || axis < -rank || axis >= rank) return reject(node, "bad axis");
  const int norm_rank = rank - static_cast<int>(axis < 0 ? axis + rank : axis);
  for (size_t i = 1; i <= 2; ++i) {
    if (!present(node, i)) continue;
    TESSERA_RETURN_IF_ERROR(check_data_input(g, node, i, i == 1 ? "Scale" : "B"));
    const Value& v = g.value(node.inputs[i]);
    // A constant may broadcast (it is expanded once); a runtime one must have the full shape.
    if (!v.constant && v.type.rank() != norm_rank)
      return reject(node, "a runtime Scale/B must not broadcast");
  }
  return Status();
}

Status check_concat(const Graph& g, const Node& node) {
  if (node.inputs.empty()) return reject(node, "no inputs");
  int rank = -1;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    TESSERA_RETURN_IF_ERROR(check_data_input(g, node, i, "input"));
    int r = known_rank(g, node, i);
    if (rank >= 0 && r != rank) return reject(node, "inputs of different ranks");
    rank = r;
  }
  const int64_t axis = node.attr_int("axis", 0);
  if (rank == 0 || axis < -rank || axis >= rank) return reject(node, "bad axis");
  return Status();
}

Status check_resize(const Graph& g, const Node& node) {
  TESSERA_RETURN_IF_ERROR(check_data_input(g, node, 0, "X"));
  TESSERA_ASSIGN_OR_RETURN(ResizeSpec spec, resize_spec(g, node));
  const TensorType& x = g.value(node.inputs[0]).type;
  if (x.is_static()) {
    auto out = resize_output_dims(spec, x.static_dims());
    if (!out.ok()) return out.status();
  } else if (!spec.sizes.empty()) {
    return reject(node, "sizes with dynamic input shape");
  } else {
    for (size_t d = 2; d < spec.scales.size(); ++d) {
      if (spec.scales[d] != std::floor(spec.scales[d]))
        return reject(node, "non-integer scale with dynamic input shape");
    }
  }
  return Status();
}

Status check_reduce(const Graph& g, const Node& node) {
  TESSERA_RETURN_IF_ERROR(check_data_input(g, node, 0, "data"));
  const int rank = known_rank(g, node, 0);
  if (rank < 1 || rank > 6) return reject(node, "input rank " + std::to_string(rank) + " (1 to 6)");
  auto spec = reduce_spec(g, node, rank);
  return spec.ok() ? Status() : spec.status();
}

using CheckFn = std::function<Status(const Graph&, const Node&)>;

const std::map<std::string, CheckFn>& checks() {
  static const std::map<std::string, CheckFn> table = [] {
    std::map<std::string, CheckFn> t;
    t["Conv"] = check_conv;
    t["ConvTranspose"] = check_conv_transpose;
    t["MatMul"] = check_matmul;
    t["Gemm"] = check_gemm;
    for (const char* op : {"MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"})
      t[op] = check_pool;
    t["BatchNormalization"] = check_batch_norm;
    for (const char* op :
         {"Relu", "LeakyRelu", "Clip", "HardSigmoid", "HardSwish", "Sigmoid", "Tanh", "Elu", "Exp",
          "Log", "Sqrt", "Abs", "Neg", "Softplus", "Round", "Pow"}) {
      t[op] = check_activation;
    }
    for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min"}) t[op] = check_binary;
    t["Softmax"] = check_softmax;
    t["LayerNormalization"] = check_layer_norm;
    t["Concat"] = check_concat;
    t["Resize"] = check_resize;
    for (const char* op : {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"})
      t[op] = check_reduce;
    return t;
  }();
  return table;
}

}  // namespace

Status node_support(const Graph& g, int n) {
  const Node& node = g.node(n);
  if (!node.domain.empty())
    return unimplemented("op '" + node.domain + "." + node.op_type + "' is not supported");
  auto it = checks().find(node.op_type);
  if (it == checks().end())
    return unimplemented("op '" + node.op_type + "' is not supported by onednn");
  TESSERA_RETURN_IF_ERROR(check_outputs(g, node, 1));
  return it->second(g, node);
}

bool is_activation_op(const std::string& op) {
  static const char* const kOps[] = {
      "Relu", "LeakyRelu", "Clip", "HardSigmoid", "HardSwish", "Sigmoid",  "Tanh",  "Elu",
      "Exp",  "Log",       "Sqrt", "Abs",         "Neg",       "Softplus", "Round", "Pow"};
  for (const char* o : kOps)
    if (op == o) return true;
  return false;
}

Result<std::vector<EltwiseOp>> activation_ops(const Graph& g, const Node& node) {
  const std::string& op = node.op_type;
  auto one = [](algorithm alg, float alpha = 0.0f, float beta = 0.0f) {
    return std::vector<EltwiseOp>{EltwiseOp{alg, alpha, beta}};
  };
  if (op == "Relu") return one(algorithm::eltwise_relu);
  if (op == "LeakyRelu") return one(algorithm::eltwise_relu, node.attr_float("alpha", 0.01f));
  if (op == "Elu") return one(algorithm::eltwise_elu, node.attr_float("alpha", 1.0f));
  if (op == "Sigmoid") return one(algorithm::eltwise_logistic);
  if (op == "Tanh") return one(algorithm::eltwise_tanh);
  if (op == "Exp") return one(algorithm::eltwise_exp);
  if (op == "Log") return one(algorithm::eltwise_log);
  if (op == "Sqrt") return one(algorithm::eltwise_sqrt);
  if (op == "Abs") return one(algorithm::eltwise_abs);
  if (op == "Neg") return one(algorithm::eltwise_linear, -1.0f, 0.0f);
  if (op == "Softplus") return one(algorithm::eltwise_soft_relu);
  if (op == "Round") return one(algorithm::eltwise_round);
  if (op == "HardSwish") return one(algorithm::eltwise_hardswish);
  if (op == "HardSigmoid") {
    // max(0, min(1, alpha * x + beta)): oneDNN 2.6 has no hardsigmoid; linear then clip is the
    // same arithmetic.
    return std::vector<EltwiseOp>{
        {algorithm::eltwise_linear, node.attr_float("alpha", 0.2f), node.attr_float("beta", 0.5f)},
        {algorithm::eltwise_clip, 0.0f, 1.0f}};
  }
  if (op == "Clip") {
    float lo = std::numeric_limits<float>::lowest(), hi = std::numeric_limits<float>::max();
    if (node.opset < 11) {
      lo = node.attr_float("min", lo);
      hi = node.attr_float("max", hi);
    } else {
      for (size_t i = 1; i <= 2; ++i) {
        if (!present(node, i)) continue;
        double v;
        if (!constant_scalar(g, node.inputs[i], &v) ||
            g.value(node.inputs[i]).constant->dtype() != DType::kFloat32) {
          return reject(node, "min/max must be float32 scalar constants");
        }
        (i == 1 ? lo : hi) = static_cast<float>(v);
      }
    }
    return one(algorithm::eltwise_clip, lo, hi);
  }
  if (op == "Pow") {
    double e;
    if (node.inputs.size() != 2 || !constant_scalar(g, node.inputs[1], &e)) {
      return reject(node, "the exponent must be a scalar constant");
    }
    // oneDNN's jit pow goes through exp/log (NaN for negative bases): only exact forms.
    if (e == 2.0) return one(algorithm::eltwise_square);
    if (e == 1.0) return one(algorithm::eltwise_linear, 1.0f, 0.0f);
    if (e == 0.5) return one(algorithm::eltwise_sqrt);
    return reject(node, "exponent " + std::to_string(e) + " (only 0.5, 1 and 2)");
  }
  return reject(node, "not an activation");
}

bool is_binary_op(const std::string& op) {
  return op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Max" || op == "Min";
}

algorithm binary_algorithm(const std::string& op) {
  if (op == "Add") return algorithm::binary_add;
  if (op == "Sub") return algorithm::binary_sub;
  if (op == "Mul") return algorithm::binary_mul;
  if (op == "Div") return algorithm::binary_div;
  if (op == "Max") return algorithm::binary_max;
  return algorithm::binary_min;
}

Result<ResizeSpec> resize_spec(const Graph& g, const Node& node) {
  if (node.opset < 10) return reject(node, "opset < 10");
  ResizeSpec spec;
  const std::string mode = node.attr_string("mode", "nearest");
  const std::string coord = node.opset >= 11
                                ? node.attr_string("coordinate_transformation_mode", "half_pixel")
                                : "asymmetric";
  const std::string nearest =
      node.opset >= 11 ? node.attr_string("nearest_mode", "round_prefer_floor") : "simple";
  if (mode == "nearest") {
    spec.alg = algorithm::resampling_nearest;
    // With integer upscales, oneDNN's nearest index floor((o + 0.5) / f) equals ONNX's index in
    // exactly these combinations (checked by hand: o = k*f + r, 0 <= r < f).
    const bool half = coord == "half_pixel" || coord == "pytorch_half_pixel";
    const bool ok = (half && (nearest == "round_prefer_floor" || nearest == "round_prefer_ceil")) ||
                    ((coord == "asymmetric" || coord == "tf_half_pixel_for_nn") &&
                     (nearest == "floor" || nearest == "simple"));
    if (!ok)
      return reject(node,
                    "nearest with " + coord + " / " + nearest + " differs from oneDNN's rounding");
  } else if (mode == "linear") {
    spec.alg = algorithm::resampling_linear;
    if (coord != "half_pixel" && coord != "pytorch_half_pixel") {
      return reject(node, "linear with " + coord + " (oneDNN uses half_pixel)");
    }
  } else {
    return reject(node, "mode " + mode);
  }
  auto read_const = [&](size_t i, const char* what) -> Result<const Tensor*> {
    if (!present(node, i)) return static_cast<const Tensor*>(nullptr);
    const Value& v = g.value(node.inputs[i]);
    if (!v.constant) return reject(node, std::string(what) + " must be a constant");
    return v.constant->numel() == 0 ? nullptr : &*v.constant;
  };
  const size_t scales_at = node.opset >= 11 ? 2 : 1;
  TESSERA_ASSIGN_OR_RETURN(const Tensor* scales, read_const(scales_at, "scales"));
  const Tensor* sizes = nullptr;
  if (node.opset >= 11) {
    TESSERA_ASSIGN_OR_RETURN(sizes, read_const(3, "sizes"));
  }
  if ((scales == nullptr) == (sizes == nullptr))
    return reject(node, "exactly one of scales and sizes");
  if (scales) {
    spec.scales = scales->to_double_vector();
    for (size_t d = 0; d < spec.scales.size(); ++d) {
      if (!(spec.scales[d] > 0) || !std::isfinite(spec.scales[d]))
        return reject(node, "scales must be positive");
      if (d < 2 && spec.scales[d] != 1.0) return reject(node, "scaling batch or channels");
      if (spec.alg == algorithm::resampling_nearest && d >= 2 && spec.scales[d] < 1.0) {
        return reject(node, "nearest downscaling");
      }
    }
  } else {
    spec.sizes = sizes->to_int64_vector();
  }
  const size_t rank = spec.scales.empty() ? spec.sizes.size() : spec.scales.size();
  if (rank < 3 || rank > 5)
    return reject(node, "rank " + std::to_string(rank) + " (1-3 spatial dims)");
  const int xr = g.value(node.inputs[0]).type.rank();
  if (xr != static_cast<int>(rank)) return reject(node, "scales/sizes do not match the input rank");
  return spec;
}

Result<Dims> resize_output_dims(const ResizeSpec& spec, const Dims& in) {
  const bool sized = !spec.sizes.empty();
  const size_t rank = sized ? spec.sizes.size() : spec.scales.size();
  if (in.size() != rank)
    return invalid_argument("Resize: scales/sizes do not match the input rank");
  Dims out(rank);
  for (size_t d = 0; d < rank; ++d) {
    double scale;
    if (sized) {
      out[d] = spec.sizes[d];
      scale = static_cast<double>(out[d]) / static_cast<double>(in[d]);
    } else {
      scale = spec.scales[d];
      out[d] = static_cast<int64_t>(std::floor(static_cast<double>(in[d]) * scale));
    }
    if (out[d] <= 0 || in[d] <= 0) return unimplemented("Resize: empty tensors");
    if (d < 2) {
      if (out[d] != in[d]) return unimplemented("Resize: scaling batch or channels");
      continue;
    }
    // oneDNN uses the factor out/in; ONNX the given scale. They must agree exactly, and nearest
    // is only exact for integer upscales.
    if (static_cast<double>(out[d]) != static_cast<double>(in[d]) * scale) {
      return unimplemented("Resize: scale " + std::to_string(scale) +
                           " does not give an integral size");
    }
    if (spec.alg == algorithm::resampling_nearest && (out[d] % in[d] != 0)) {
      return unimplemented("Resize: nearest with a non-integer factor");
    }
  }
  return out;
}

Result<ReduceSpec> reduce_spec(const Graph& g, const Node& node, int rank) {
  ReduceSpec spec;
  if (node.op_type == "ReduceMean")
    spec.alg = algorithm::reduction_mean;
  else if (node.op_type == "ReduceSum")
    spec.alg = algorithm::reduction_sum;
  else if (node.op_type == "ReduceMax")
    spec.alg = algorithm::reduction_max;
  else
    spec.alg = algorithm::reduction_min;
  spec.keepdims = node.attr_int("keepdims", 1) != 0;
  const bool axes_from_input =
      node.opset >= 18 || (node.op_type == "ReduceSum" && node.opset >= 13);
  Dims axes;
  if (axes_from_input) {
    if (present(node, 1)) {
      const Value& v = g.value(node.inputs[1]);
      if (!v.constant) return reject(node, "axes must be a constant");
      axes = v.constant->to_int64_vector();
    }
    if (axes.empty() && node.attr_int("noop_with_empty_axes", 0) != 0)
      return reject(node, "noop_with_empty_axes");
  } else {
    axes = node.attr_ints("axes");
  }
  spec.reduced.assign(rank, axes.empty());
  for (int64_t a : axes) {
    if (a < -rank || a >= rank) return reject(node, "axis out of range");
    spec.reduced[a < 0 ? a + rank : a] = true;
  }
  return spec;
}

}  // namespace tessera::onednn
