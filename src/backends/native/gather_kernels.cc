// Nearest Resize, Concat and GlobalAveragePool, and Resize+Concat fused.
//
// Nearest upsampling by integer factors (kh, kw) is a copy: output row (n, c, y) is input row
// (n, c, y / kh) with every pixel repeated kw times. The same row kernel writes a channel
// concatenation whose parts come through such upsamplings (factor 1 for a part read as is), so
// the fused group writes the concat output once, reading only the small inputs. Parallel over
// output rows. Concat in general is a byte copy, parallel over fixed-size chunks of the output.
// GlobalAveragePool sums rows with the ISA's reduce_rows, parallel over N * C.
#include "backends/native/gather_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "backends/kernel_io.h"
#include "backends/native/kernel_io.h"

namespace tessera::native {
namespace {

// ---------------------------------------------------------------------------------------------
// Resize: which ones are plain pixel replication

struct NearestResize {
  std::vector<int64_t> in, out;  // NCHW
  int64_t kh = 1, kw = 1;        // factors of H and W (N and C are 1)
};

bool present(const Node& node, size_t i) {
  return node.inputs.size() > i && node.inputs[i] != kNoValue;
}

// The input index ONNX's Resize (as the reference kernel computes it, before clamping) reads for
// output index o on an axis of `in` elements with scale `scale`; -1 when undefined.
int64_t onnx_nearest_pick(const std::string& coord, const std::string& nearest, int64_t o,
                          double scale, int64_t in_size) {
  const double x = static_cast<double>(o), in = static_cast<double>(in_size);
  const double out_width = scale * in;
  double x_ori = 0;
  if (coord == "half_pixel") {
    x_ori = (x + 0.5) / scale - 0.5;
  } else if (coord == "pytorch_half_pixel") {
    x_ori = out_width == 1.0 ? -0.5 : (x + 0.5) / scale - 0.5;
  } else if (coord == "asymmetric") {
    x_ori = x / scale;
  } else if (coord == "tf_half_pixel_for_nn") {
    x_ori = (x + 0.5) / scale;
  } else {
    return -1;
  }
  if (!std::isfinite(x_ori) || std::abs(x_ori) > 1e15) return -1;
  if (nearest == "simple") {  // opset 10: truncate when upsampling, ceil when downsampling
    return static_cast<int64_t>(scale < 1.0 ? std::ceil(x_ori) : std::trunc(x_ori));
  }
  const double ceil_x = std::ceil(x_ori);
  const int64_t base = static_cast<int64_t>(ceil_x) - 1;
  const double ratio = x_ori - static_cast<double>(base);
  bool right = true;
  if (x_ori != ceil_x) {
    if (nearest == "round_prefer_floor") {
      right = ratio > 0.5;
    } else if (nearest == "round_prefer_ceil") {
      right = ratio >= 0.5;
    } else if (nearest == "floor") {
      right = false;
    } else if (nearest != "ceil") {
      return -1;
    }
  }
  return right ? base + 1 : base;
}

// A constant Resize parameter (scales or sizes): nullptr when absent or empty.
Result<const Tensor*> resize_param(const Graph& g, const Node& node, size_t i, const char* what) {
  if (!present(node, i)) return static_cast<const Tensor*>(nullptr);
  const Value& v = g.value(node.inputs[i]);
  if (!v.constant) return unimplemented(std::string("Resize ") + what + " must be a constant");
  return v.constant->numel() == 0 ? nullptr : &*v.constant;
}

Result<NearestResize> plan_resize(const Graph& g, const Node& node) {
  if (node.opset < 10) return unimplemented("Resize before opset 10");
  if (node.inputs.empty()) return invalid_argument(node.describe() + ": no input");
  TESSERA_RETURN_IF_ERROR(check_float_value(g, node.inputs[0]));
  if (node.outputs.empty()) return invalid_argument(node.describe() + ": no output");
  TESSERA_RETURN_IF_ERROR(check_float_value(g, node.outputs[0]));
  const std::string mode = node.attr_string("mode", "nearest");
  if (mode != "nearest")
    return unimplemented("Resize mode '" + mode + "' (native runs nearest upsampling only)");
  const std::string coord = node.opset >= 11
                                ? node.attr_string("coordinate_transformation_mode", "half_pixel")
                                : "asymmetric";
  const std::string nearest =
      node.opset >= 11 ? node.attr_string("nearest_mode", "round_prefer_floor") : "simple";
  if (coord == "align_corners")
    return unimplemented("Resize with align_corners: its nearest pixel is not floor(out / factor)");
  if (coord == "tf_crop_and_resize") return unimplemented("Resize with tf_crop_and_resize (roi)");
  if (coord != "half_pixel" && coord != "pytorch_half_pixel" && coord != "asymmetric" &&
      coord != "tf_half_pixel_for_nn") {
    return unimplemented("Resize coordinate_transformation_mode '" + coord + "'");
  }
  if (nearest != "simple" && nearest != "round_prefer_floor" && nearest != "round_prefer_ceil" &&
      nearest != "floor" && nearest != "ceil") {
    return unimplemented("Resize nearest_mode '" + nearest + "'");
  }
  if (node.has_attr("axes")) return unimplemented("Resize with the axes attribute");
  if (node.attr_int("antialias", 0) != 0) return unimplemented("Resize with antialias");

  NearestResize r;
  r.in = g.value(node.inputs[0]).type.static_dims();
  if (r.in.size() != 4)
    return unimplemented("Resize of a rank-" + std::to_string(r.in.size()) +
                         " tensor (native: 4-D NCHW only)");
  const Tensor* scales = nullptr;
  const Tensor* sizes = nullptr;
  if (node.opset < 11) {
    if (!present(node, 1)) return invalid_argument("Resize-10 needs scales");
    TESSERA_ASSIGN_OR_RETURN(scales, resize_param(g, node, 1, "scales"));
  } else {
    TESSERA_ASSIGN_OR_RETURN(scales, resize_param(g, node, 2, "scales"));
    TESSERA_ASSIGN_OR_RETURN(sizes, resize_param(g, node, 3, "sizes"));
  }
  if ((scales == nullptr) == (sizes == nullptr))
    return invalid_argument("Resize needs exactly one of scales and sizes");
  if (sizes && node.attr_string("keep_aspect_ratio_policy", "stretch") != "stretch")
    return unimplemented("Resize keep_aspect_ratio_policy other than stretch");
  const std::vector<double> sv = scales ? scales->to_double_vector() : std::vector<double>{};
  const std::vector<int64_t> zv = sizes ? sizes->to_int64_vector() : std::vector<int64_t>{};
  if ((scales ? sv.size() : zv.size()) != 4)
    return invalid_argument("Resize scales / sizes do not match the input rank 4");
  r.out.resize(4);
  int64_t factor[4];
  for (int d = 0; d < 4; ++d) {
    const int64_t in = r.in[d];
    double scale;
    if (sizes) {
      r.out[d] = zv[d];
      scale = static_cast<double>(zv[d]) / static_cast<double>(in);
    } else {
      scale = sv[d];
      if (!(scale > 0) || !std::isfinite(scale))
        return invalid_argument("Resize scales must be positive");
      const double o = std::floor(static_cast<double>(in) * scale);
      if (o > 1e12) return invalid_argument("Resize output too large");
      r.out[d] = static_cast<int64_t>(o);
    }
    if (r.out[d] <= 0) return unimplemented("Resize to an empty tensor");
    if (d < 2 && r.out[d] != in) return unimplemented("Resize of N or C (native resizes H and W)");
    if (r.out[d] % in != 0) {
      return unimplemented("Resize by a non-integer factor (" + std::to_string(in) + " -> " +
                           std::to_string(r.out[d]) + ")");
    }
    factor[d] = r.out[d] / in;
    if (scales && static_cast<double>(in) * scale != static_cast<double>(r.out[d])) {
      return unimplemented("Resize scale " + std::to_string(scale) + " is not the integer factor " +
                           std::to_string(factor[d]));
    }
    // The source index must be exactly o / factor for every output index, as ONNX computes it.
    for (int64_t o = 0; o < r.out[d]; ++o) {
      if (onnx_nearest_pick(coord, nearest, o, scale, in) != o / factor[d]) {
        return unimplemented("Resize with " + coord + " / " + nearest + " by " +
                             std::to_string(factor[d]) + " does not repeat each pixel");
      }
    }
  }
  if (g.value(node.outputs[0]).type.static_dims() != r.out)
    return invalid_argument(node.describe() + ": output shape differs from its scales / sizes");
  r.kh = factor[2];
  r.kw = factor[3];
  return r;
}

// ---------------------------------------------------------------------------------------------
// Concat

struct ConcatPlan {
  int axis = 0;
  DType dtype = DType::kUndefined;
  size_t esize = 0;
  std::vector<int64_t> out_dims;
  int64_t outer = 1;                 // product of the dims before the axis
  std::vector<int64_t> block_bytes;  // per input: bytes per outer index
  int64_t row_bytes = 0;             // their sum: output bytes per outer index
};

Result<ConcatPlan> plan_concat(const Graph& g, const Node& node) {
  if (node.inputs.empty()) return invalid_argument("Concat needs at least one input");
  ConcatPlan p;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    if (node.inputs[i] == kNoValue)
      return invalid_argument("Concat input " + std::to_string(i) + " is missing");
    const TensorType& t = g.value(node.inputs[i]).type;
    if (!t.is_static()) return unimplemented("dynamic shape");
    if (i == 0) {
      p.dtype = t.dtype;
      p.out_dims = t.static_dims();
    } else if (t.dtype != p.dtype) {
      return invalid_argument("Concat inputs of different dtypes");
    }
  }
  if (p.dtype == DType::kString || dtype_size(p.dtype) == 0)
    return unimplemented(std::string("Concat of dtype ") + dtype_name(p.dtype));
  p.esize = dtype_size(p.dtype);
  const int rank = static_cast<int>(p.out_dims.size());
  if (rank == 0) return invalid_argument("Concat of scalars");
  if (!node.has_attr("axis") && node.opset >= 4) return invalid_argument("Concat needs axis");
  const int64_t a = node.attr_int("axis", 1);
  const int64_t axis = a < 0 ? a + rank : a;
  if (axis < 0 || axis >= rank) return invalid_argument(node.describe() + ": axis out of range");
  p.axis = static_cast<int>(axis);
  p.out_dims[axis] = 0;
  int64_t inner = 1;
  for (int d = p.axis + 1; d < rank; ++d) inner *= p.out_dims[d];
  for (int d = 0; d < p.axis; ++d) p.outer *= p.out_dims[d];
  for (int v : node.inputs) {
    const std::vector<int64_t> dims = g.value(v).type.static_dims();
    if (static_cast<int>(dims.size()) != rank) return invalid_argument("Concat ranks differ");
    for (int d = 0; d < rank; ++d)
      if (d != p.axis && dims[d] != p.out_dims[d])
        return invalid_argument("Concat input dims differ outside the axis");
    p.out_dims[axis] += dims[axis];
    p.block_bytes.push_back(dims[axis] * inner * static_cast<int64_t>(p.esize));
    p.row_bytes += p.block_bytes.back();
  }
  if (node.outputs.empty() || node.outputs[0] == kNoValue)
    return invalid_argument("Concat without an output");
  const TensorType& y = g.value(node.outputs[0]).type;
  if (!y.is_static() || y.static_dims() != p.out_dims || y.dtype != p.dtype)
    return invalid_argument(node.describe() + ": output type differs from the concatenation");
  return p;
}

class ConcatKernel final : public Kernel {
 public:
  ConcatKernel(ConcatPlan plan, std::vector<ValueSource> srcs)
      : plan_(std::move(plan)), srcs_(std::move(srcs)) {}

  Status run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs,
             KernelRunContext& ctx) override {
    std::vector<const char*> src(srcs_.size());
    for (size_t i = 0; i < srcs_.size(); ++i) {
      TESSERA_ASSIGN_OR_RETURN(const Tensor* t, resolve_tensor(srcs_[i], plan_.dtype, inputs));
      src[i] = static_cast<const char*>(t->raw_data());
    }
    outputs.resize(1);
    outputs[0] = ctx.alloc.allocate_uninitialized(plan_.dtype, plan_.out_dims);  // all written
    char* dst = static_cast<char*>(outputs[0].raw_data());
    const int64_t total = plan_.outer * plan_.row_bytes;
    if (total == 0) return Status();
    // Output bytes [pos, end): row pos / row_bytes, in it the blocks of the inputs in order.
    const ConcatPlan& p = plan_;
    auto copy = [&](int64_t pos, int64_t end) {
      while (pos < end) {
        const int64_t o = pos / p.row_bytes;
        int64_t r = pos - o * p.row_bytes;
        size_t i = 0;
        while (r >= p.block_bytes[i]) r -= p.block_bytes[i++];
        const int64_t n = std::min(end - pos, p.block_bytes[i] - r);
        std::memcpy(dst + pos, src[i] + o * p.block_bytes[i] + r, static_cast<size_t>(n));
        pos += n;
      }
    };
    constexpr int64_t kChunk = 64 * 1024;
    parallel(ctx.pool, (total + kChunk - 1) / kChunk, 1,
             [&](int64_t c0, int64_t c1) { copy(c0 * kChunk, std::min(total, c1 * kChunk)); });
    return Status();
  }

 private:
  ConcatPlan plan_;
  std::vector<ValueSource> srcs_;
};

// ---------------------------------------------------------------------------------------------
// Upsample + concat over NCHW float32 rows

// out[i * k + j] = in[i] for i < w, j < k.
void repeat_row(const float* in, int64_t w, int64_t k, float* out) {
  int64_t i = 0;
  switch (k) {
    case 1: std::memcpy(out, in, static_cast<size_t>(w) * sizeof(float)); return;
#if defined(__SSE2__)
    case 2:
      for (; i + 4 <= w; i += 4) {
        const __m128 v = _mm_loadu_ps(in + i);
        _mm_storeu_ps(out + 2 * i, _mm_unpacklo_ps(v, v));
        _mm_storeu_ps(out + 2 * i + 4, _mm_unpackhi_ps(v, v));
      }
      break;
    case 4:
    case 8:
      for (; i + 4 <= w; i += 4) {
        const __m128 v = _mm_loadu_ps(in + i);
        const __m128 b[4] = {_mm_shuffle_ps(v, v, 0x00), _mm_shuffle_ps(v, v, 0x55),
                             _mm_shuffle_ps(v, v, 0xAA), _mm_shuffle_ps(v, v, 0xFF)};
        float* o = out + i * k;
        for (int j = 0; j < 4; ++j) {
          for (int64_t s = 0; s < k; s += 4) _mm_storeu_ps(o + j * k + s, b[j]);
        }
      }
      break;
#endif
    default: break;
  }
  for (; i < w; ++i) std::fill_n(out + i * k, k, in[i]);
}

// One part of the output's channels: input x (C x H x W per image), repeated kh x kw.
struct UpsamplePart {
  ValueSource x;
  int64_t c = 0, h = 0, w = 0, kh = 1, kw = 1;
};

class UpsampleConcatKernel final : public Kernel {
 public:
  UpsampleConcatKernel(std::vector<UpsamplePart> parts, std::vector<int64_t> out_dims)
      : parts_(std::move(parts)), out_dims_(std::move(out_dims)) {
    for (size_t p = 0; p < parts_.size(); ++p)
      for (int64_t c = 0; c < parts_[p].c; ++c) {
        channel_part_.push_back(static_cast<int>(p));
        channel_local_.push_back(c);
      }
    TESSERA_CHECK(static_cast<int64_t>(channel_part_.size()) == out_dims_[1],
                  "upsample parts do not cover the output channels");
  }

  Status run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs,
             KernelRunContext& ctx) override {
    std::vector<const float*> src(parts_.size());
    for (size_t p = 0; p < parts_.size(); ++p) {
      TESSERA_ASSIGN_OR_RETURN(src[p], resolve_float(parts_[p].x, inputs));
    }
    outputs.resize(1);
    outputs[0] = ctx.alloc.allocate_uninitialized(DType::kFloat32, out_dims_);  // all written
    float* y = outputs[0].data<float>();
    const int64_t channels = out_dims_[1], ho = out_dims_[2], wo = out_dims_[3];
    const int64_t rows = out_dims_[0] * channels * ho;
    if (rows == 0 || wo == 0) return Status();
    // Tasks of about 64 KiB of output: a smaller output runs inline (cheaper than a wake-up).
    parallel(ctx.pool, rows, std::max<int64_t>(1, 16384 / wo), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t oy = r % ho, nc = r / ho;
        const int64_t c = nc % channels, n = nc / channels;
        const UpsamplePart& part = parts_[channel_part_[c]];
        const float* in = src[channel_part_[c]] +
                          ((n * part.c + channel_local_[c]) * part.h + oy / part.kh) * part.w;
        repeat_row(in, part.w, part.kw, y + r * wo);
      }
    });
    return Status();
  }

 private:
  std::vector<UpsamplePart> parts_;
  std::vector<int64_t> out_dims_;
  std::vector<int> channel_part_;
  std::vector<int64_t> channel_local_;
};

Result<UpsamplePart> resize_part(const SubGraph& sg, const Node& node) {
  TESSERA_ASSIGN_OR_RETURN(NearestResize r, plan_resize(sg.graph(), node));
  UpsamplePart part;
  TESSERA_ASSIGN_OR_RETURN(part.x, source_of(sg, node.inputs[0]));
  part.c = r.in[1];
  part.h = r.in[2];
  part.w = r.in[3];
  part.kh = r.kh;
  part.kw = r.kw;
  return part;
}

// ---------------------------------------------------------------------------------------------
// GlobalAveragePool

Status check_global_average_pool(const Graph& g, const Node& node) {
  if (node.inputs.empty() || node.outputs.empty())
    return invalid_argument(node.describe() + ": needs one input and one output");
  TESSERA_RETURN_IF_ERROR(check_float_value(g, node.inputs[0]));
  TESSERA_RETURN_IF_ERROR(check_float_value(g, node.outputs[0]));
  const std::vector<int64_t> dims = g.value(node.inputs[0]).type.static_dims();
  if (dims.size() < 3) return invalid_argument("GlobalAveragePool needs rank >= 3");
  std::vector<int64_t> out = {dims[0], dims[1]};
  out.resize(dims.size(), 1);
  if (g.value(node.outputs[0]).type.static_dims() != out)
    return invalid_argument(node.describe() + ": output shape is not N x C x 1...");
  return Status();
}

// Row-major, the mean of each (image, channel) row of H * W floats; channels-last, the mean down
// each channel's column of an image's [H * W, C] block.
class GlobalAveragePoolKernel final : public Kernel {
 public:
  GlobalAveragePoolKernel(const IsaKernels& isa, ValueSource x, bool channels_last)
      : isa_(isa), x_(std::move(x)), channels_last_(channels_last) {
    images_ = x_.dims[0];
    channels_ = x_.dims[1];
    len_ = shape_numel(x_.dims) / (images_ * channels_);
    out_dims_ = {images_, channels_};
    out_dims_.resize(x_.dims.size(), 1);
    if (channels_last_) {
      x_.dims = channels_last_dims(x_.dims);
      out_dims_ = channels_last_dims(out_dims_);
    }
  }

  Status run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs,
             KernelRunContext& ctx) override {
    TESSERA_ASSIGN_OR_RETURN(const float* x, resolve_float(x_, inputs));
    outputs.resize(1);
    outputs[0] = ctx.alloc.allocate_uninitialized(DType::kFloat32, out_dims_);  // all written
    float* y = outputs[0].data<float>();
    const int64_t len = len_, channels = channels_;
    const float count = static_cast<float>(len);
    if (!channels_last_) {
      parallel(ctx.pool, images_ * channels, std::max<int64_t>(1, 16384 / len), [&](int64_t r0, int64_t r1) {
        isa_.reduce_rows(ReduceKind::kSum, x + r0 * len, r1 - r0, len, y + r0);
        for (int64_t r = r0; r < r1; ++r) y[r] /= count;
      });
      return Status();
    }
    // Tasks of kChannelBlock channels of one image, enough of them per thread for 16K floats.
    constexpr int64_t kChannelBlock = 64;
    const int64_t blocks = (channels + kChannelBlock - 1) / kChannelBlock;
    parallel(ctx.pool, images_ * blocks, std::max<int64_t>(1, 16384 / (len * kChannelBlock)),
             [&](int64_t t0, int64_t t1) {
               for (int64_t t = t0; t < t1; ++t) {
                 const int64_t b = t / blocks, c0 = (t % blocks) * kChannelBlock;
                 const int64_t width = std::min(kChannelBlock, channels - c0);
                 float* yb = y + b * channels + c0;
                 isa_.reduce_columns(ReduceKind::kSum, x + b * len * channels + c0, len, channels, width, yb);
                 for (int64_t i = 0; i < width; ++i) yb[i] /= count;
               }
             });
    return Status();
  }

 private:
  const IsaKernels& isa_;
  ValueSource x_;
  bool channels_last_;
  int64_t images_ = 1, channels_ = 1, len_ = 1;
  std::vector<int64_t> out_dims_;
};

}  // namespace

bool is_gather_op(const std::string& op) {
  return op == "Resize" || op == "Concat" || op == "GlobalAveragePool";
}

Status check_gather_node(const Graph& g, int n) {
  const Node& node = g.node(n);
  if (!node.domain.empty() || !is_gather_op(node.op_type))
    return unimplemented(node.op_type + " is not a native data-movement op");
  if (node.op_type == "Resize") return plan_resize(g, node).status();
  if (node.op_type == "Concat") return plan_concat(g, node).status();
  return check_global_average_pool(g, node);
}

Status check_gather_group(const SubGraph& sg) {
  const Graph& g = sg.graph();
  if (sg.size() == 1) return check_gather_node(g, sg.nodes().first());
  int concat = -1;
  for (int n : sg.nodes()) {
    const std::string& op = g.node(n).op_type;
    if (op == "Concat") {
      if (concat >= 0) return unimplemented("one Concat per native group");
      concat = n;
    } else if (op != "Resize") {
      return unimplemented(op + " does not join a native Resize / Concat group");
    }
  }
  if (concat < 0) return unimplemented("Resizes group only into a Concat on native");
  const Node& cat = g.node(concat);
  TESSERA_ASSIGN_OR_RETURN(ConcatPlan plan, plan_concat(g, cat));
  if (plan.dtype != DType::kFloat32 || plan.out_dims.size() != 4 || plan.axis != 1)
    return unimplemented("a Resize + Concat group needs a float32 4-D Concat on axis 1");
  if (sg.outputs().size() != 1 || sg.outputs()[0] != cat.outputs[0])
    return unimplemented("a Resize + Concat group has the Concat's output as its only output");
  for (int n : sg.nodes()) {
    if (n == concat) continue;
    const Node& node = g.node(n);
    TESSERA_RETURN_IF_ERROR(plan_resize(g, node).status());
    const Value& out = g.value(node.outputs[0]);
    for (int consumer : out.consumers)
      if (consumer != concat) return unimplemented("a grouped Resize feeds only its Concat");
    const int producer = g.value(node.inputs[0]).producer;
    if (producer >= 0 && sg.nodes().contains(producer))
      return unimplemented("a grouped Resize reads from outside its group");
  }
  return Status();
}

bool gather_takes_channels_last(const SubGraph& sg) {
  const Graph& g = sg.graph();
  if (sg.size() != 1) return false;
  const Node& node = g.node(sg.nodes().first());
  return node.op_type == "GlobalAveragePool" && node.domain.empty() && check_global_average_pool(g, node).ok() &&
         g.value(node.inputs[0]).type.rank() == 4;
}

Result<std::unique_ptr<Kernel>> compile_gather_kernel(const SubGraph& sg, const IsaKernels& isa, bool channels_last) {
  TESSERA_RETURN_IF_ERROR(check_gather_group(sg));
  if (channels_last && !gather_takes_channels_last(sg))
    return internal_error("of the gather kernels, only a 4-D GlobalAveragePool takes channels-last");
  const Graph& g = sg.graph();
  if (sg.size() == 1) {
    const Node& node = g.node(sg.nodes().first());
    if (node.op_type == "GlobalAveragePool") {
      TESSERA_ASSIGN_OR_RETURN(ValueSource x, source_of(sg, node.inputs[0]));
      return std::unique_ptr<Kernel>(new GlobalAveragePoolKernel(isa, std::move(x), channels_last));
    }
    if (node.op_type == "Resize") {
      TESSERA_ASSIGN_OR_RETURN(UpsamplePart part, resize_part(sg, node));
      std::vector<int64_t> out = g.value(node.outputs[0]).type.static_dims();
      return std::unique_ptr<Kernel>(new UpsampleConcatKernel({std::move(part)}, std::move(out)));
    }
    TESSERA_ASSIGN_OR_RETURN(ConcatPlan plan, plan_concat(g, node));
    std::vector<ValueSource> srcs;
    for (int v : node.inputs) {
      TESSERA_ASSIGN_OR_RETURN(ValueSource s, source_of(sg, v));
      srcs.push_back(std::move(s));
    }
    return std::unique_ptr<Kernel>(new ConcatKernel(std::move(plan), std::move(srcs)));
  }
  // Resize + Concat: one part per Concat input, through its Resize when that is in the group.
  const Node* cat = nullptr;
  for (int n : sg.nodes())
    if (g.node(n).op_type == "Concat") cat = &g.node(n);
  TESSERA_CHECK(cat != nullptr, "a checked Resize + Concat group has its Concat");
  std::vector<UpsamplePart> parts;
  for (int v : cat->inputs) {
    const int producer = g.value(v).producer;
    if (producer >= 0 && sg.nodes().contains(producer)) {
      TESSERA_ASSIGN_OR_RETURN(UpsamplePart part, resize_part(sg, g.node(producer)));
      parts.push_back(std::move(part));
      continue;
    }
    UpsamplePart part;
    TESSERA_ASSIGN_OR_RETURN(part.x, source_of(sg, v));
    part.c = part.x.dims[1];
    part.h = part.x.dims[2];
    part.w = part.x.dims[3];
    parts.push_back(std::move(part));
  }
  std::vector<int64_t> out = g.value(cat->outputs[0]).type.static_dims();
  return std::unique_ptr<Kernel>(new UpsampleConcatKernel(std::move(parts), std::move(out)));
}

}  // namespace tessera::native
