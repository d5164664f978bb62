// MaxPool and AveragePool, one output row at a time: the row starts at -inf (max) or 0 (sum),
// then each tap (kh, kw) that falls inside the input folds one input row into it over the range of
// output columns it reaches, a loop the compiler vectorizes when the stride is 1. Averages then
// divide each column by its tap count (inside the input, or inside the padded input with
// count_include_pad). Parallel over N * C planes.
#include "backends/native/pool_kernels.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "backends/kernel_io.h"
#include "backends/native/kernel_io.h"
#include "ops/nn_geometry.h"

namespace tessera::native {
namespace {

struct PoolPlan {
  bool max = true;
  bool include_pad = false;
  int64_t planes = 0, h = 0, w = 0, oh = 0, ow = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  std::vector<int64_t> out_dims;
};

Result<PoolPlan> plan_pool(const Graph& g, const Node& node) {
  if (node.inputs.empty() || node.outputs.empty() || node.inputs[0] == kNoValue)
    return invalid_argument(node.describe() + ": needs input X");
  TESSERA_RETURN_IF_ERROR(check_float_value(g, node.inputs[0]));
  TESSERA_RETURN_IF_ERROR(check_float_value(g, node.outputs[0]));
  if (node.outputs.size() > 1 && node.outputs[1] != kNoValue) {
    const Value& indices = g.value(node.outputs[1]);
    if (!indices.consumers.empty() || indices.is_graph_output)
      return unimplemented("native MaxPool does not produce Indices");
  }
  const std::vector<int64_t> x = g.value(node.inputs[0]).type.static_dims();
  if (x.size() != 4) return unimplemented("native pools take 4-D N x C x H x W");
  const std::vector<int64_t> kernel = node.attr_ints("kernel_shape", {});
  if (kernel.size() != 2) return invalid_argument(node.describe() + ": kernel_shape needs 2 values");
  PoolPlan p;
  p.max = node.op_type == "MaxPool";
  p.include_pad = !p.max && node.attr_int("count_include_pad", 0) != 0;
  TESSERA_ASSIGN_OR_RETURN(nn::WindowGeometry geo,
                           nn::forward_window(node, {x[2], x[3]}, kernel, node.attr_int("ceil_mode", 0) != 0));
  p.planes = x[0] * x[1];
  p.h = x[2], p.w = x[3], p.oh = geo.out[0], p.ow = geo.out[1];
  p.kh = geo.kernel[0], p.kw = geo.kernel[1], p.sh = geo.strides[0], p.sw = geo.strides[1];
  p.dh = geo.dilations[0], p.dw = geo.dilations[1];
  p.pad_top = geo.pads_begin[0], p.pad_left = geo.pads_begin[1];
  p.pad_bottom = geo.pads_end[0], p.pad_right = geo.pads_end[1];
  p.out_dims = {x[0], x[1], p.oh, p.ow};
  if (g.value(node.outputs[0]).type.static_dims() != p.out_dims)
    return invalid_argument(node.describe() + ": output shape does not match the window");
  return p;
}

// Output columns [lo, hi) whose tap at offset `off` (= k * dilation - pad) reads inside [0, len).
std::pair<int64_t, int64_t> columns_inside(int64_t off, int64_t stride, int64_t len, int64_t out) {
  // o * stride + off in [0, len)  <=>  o in [ceil(-off / stride), ceil((len - off) / stride))
  const int64_t lo = std::max<int64_t>(0, nn::ceil_div(-off, stride));
  const int64_t hi = std::min<int64_t>(out, nn::ceil_div(len - off, stride));
  return {lo, std::max(lo, hi)};
}

class PoolKernel final : public Kernel {
 public:
  PoolKernel(PoolPlan plan, ValueSource x) : p_(std::move(plan)), x_(std::move(x)) {
    // Tap counts per output row and column: inside the input, and inside the padded input.
    rows_inside_.assign(p_.oh, 0), rows_padded_.assign(p_.oh, 0);
    cols_inside_.assign(p_.ow, 0), cols_padded_.assign(p_.ow, 0);
    count_taps(p_.kh, p_.dh, p_.pad_top, p_.sh, p_.h, p_.pad_bottom, rows_inside_, rows_padded_);
    count_taps(p_.kw, p_.dw, p_.pad_left, p_.sw, p_.w, p_.pad_right, cols_inside_, cols_padded_);
  }

  Status run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs,
             KernelRunContext& ctx) override {
    TESSERA_ASSIGN_OR_RETURN(const float* x, resolve_float(x_, inputs));
    outputs.resize(1);
    outputs[0] = ctx.alloc.allocate_uninitialized(DType::kFloat32, p_.out_dims);  // all written
    float* y = outputs[0].data<float>();
    const int64_t out_plane = p_.oh * p_.ow;
    const int64_t work = std::max<int64_t>(1, out_plane * p_.kh * p_.kw);
    parallel(ctx.pool, p_.planes, std::max<int64_t>(1, 32768 / work), [&](int64_t b, int64_t e) {
      for (int64_t plane = b; plane < e; ++plane)
        for (int64_t r = 0; r < p_.oh; ++r) pool_row(x + plane * p_.h * p_.w, r, y + plane * out_plane + r * p_.ow);
    });
    return Status();
  }

 private:
  static void count_taps(int64_t k, int64_t d, int64_t pad, int64_t s, int64_t len, int64_t pad_end,
                         std::vector<int64_t>& inside, std::vector<int64_t>& padded) {
    for (size_t o = 0; o < inside.size(); ++o) {
      for (int64_t t = 0; t < k; ++t) {
        const int64_t at = static_cast<int64_t>(o) * s - pad + t * d;
        inside[o] += at >= 0 && at < len;
        padded[o] += at < len + pad_end;  // ONNX: the padding ceil_mode adds past pad_end is not counted
      }
    }
  }

  void pool_row(const float* x, int64_t r, float* y) const {
    const float start = p_.max ? -std::numeric_limits<float>::infinity() : 0.0f;
    std::fill(y, y + p_.ow, start);
    for (int64_t t = 0; t < p_.kh; ++t) {
      const int64_t ih = r * p_.sh - p_.pad_top + t * p_.dh;
      if (ih < 0 || ih >= p_.h) continue;
      const float* xr = x + ih * p_.w;
      for (int64_t u = 0; u < p_.kw; ++u) {
        const int64_t off = u * p_.dw - p_.pad_left;
        const auto [lo, hi] = columns_inside(off, p_.sw, p_.w, p_.ow);
        const float* src = xr + off;
        const int64_t s = p_.sw;
        if (p_.max) {
          for (int64_t o = lo; o < hi; ++o) y[o] = src[o * s] > y[o] ? src[o * s] : y[o];
        } else {
          for (int64_t o = lo; o < hi; ++o) y[o] += src[o * s];
        }
      }
    }
    if (p_.max) return;
    for (int64_t o = 0; o < p_.ow; ++o) {
      const int64_t n = p_.include_pad ? rows_padded_[r] * cols_padded_[o] : rows_inside_[r] * cols_inside_[o];
      y[o] = n > 0 ? y[o] / static_cast<float>(n) : std::numeric_limits<float>::quiet_NaN();
    }
  }

  PoolPlan p_;
  ValueSource x_;
  std::vector<int64_t> rows_inside_, rows_padded_, cols_inside_, cols_padded_;
};

}  // namespace

bool is_pool_op(const std::string& op_type) { return op_type == "MaxPool" || op_type == "AveragePool"; }

Status check_pool_node(const Graph& g, int n) { return plan_pool(g, g.node(n)).status(); }

Result<std::unique_ptr<Kernel>> compile_pool_kernel(const SubGraph& sg) {
  if (sg.size() != 1) return unimplemented("a native pool runs alone");
  const Node& node = sg.graph().node(sg.nodes().first());
  TESSERA_ASSIGN_OR_RETURN(PoolPlan plan, plan_pool(sg.graph(), node));
  TESSERA_ASSIGN_OR_RETURN(ValueSource x, source_of(sg, node.inputs[0]));
  return std::unique_ptr<Kernel>(new PoolKernel(std::move(plan), std::move(x)));
}

}  // namespace tessera::native
