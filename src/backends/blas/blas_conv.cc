// Conv (1 to 3 spatial dims, groups, pads, strides, dilations, auto_pad) as im2col + sgemm: per
// image and group, Y_g (M/g x P) = W_g (M/g x C/g*kernel) * col (C/g*kernel x P) over the P
// output positions. A 1x1 convolution with unit strides and no padding needs no im2col: the
// input is already that matrix.
#include <cblas.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "backends/blas/blas_kernels.h"
#include "ops/nn_geometry.h"

namespace tessera::blas {
namespace {

// A convolution in canonical 3-D form (depth, height, width).
struct ConvPlan {
  int64_t batch = 0, in_channels = 0, out_channels = 0, group = 1;
  std::array<int64_t, 3> in{1, 1, 1}, out{1, 1, 1}, kernel{1, 1, 1};
  std::array<int64_t, 3> stride{1, 1, 1}, dilation{1, 1, 1}, pad{0, 0, 0};  // leading pads
  std::vector<int64_t> out_dims;
  bool direct = false;  // 1x1, unit strides, no pads: no im2col

  int64_t in_plane() const { return in[0] * in[1] * in[2]; }
  int64_t out_plane() const { return out[0] * out[1] * out[2]; }
  int64_t kernel_size() const { return kernel[0] * kernel[1] * kernel[2]; }
};

Result<ConvPlan> plan_conv(const Graph& g, const Node& node) {
  if (node.inputs.size() < 2) return invalid_argument(node.describe() + ": expects X and W");
  TESSERA_RETURN_IF_ERROR(check_float_value(g, node.inputs[0]));
  TESSERA_RETURN_IF_ERROR(check_float_value(g, node.inputs[1]));
  if (node.outputs.empty() || node.outputs[0] == kNoValue) return invalid_argument("no output");
  TESSERA_RETURN_IF_ERROR(check_float_value(g, node.outputs[0]));
  const std::vector<int64_t> x = g.value(node.inputs[0]).type.static_dims();
  const std::vector<int64_t> w = g.value(node.inputs[1]).type.static_dims();
  if (x.size() < 3 || x.size() > 5)
    return unimplemented("Conv with " + std::to_string(x.size()) + "-D input");
  if (w.size() != x.size()) return invalid_argument("W rank differs from X rank");
  ConvPlan p;
  p.batch = x[0];
  p.in_channels = x[1];
  p.out_channels = w[0];
  p.group = node.attr_int("group", 1);
  if (p.group < 1 || p.in_channels % p.group != 0 || p.out_channels % p.group != 0 ||
      w[1] * p.group != p.in_channels) {
    return invalid_argument(node.describe() + ": channels do not match group");
  }
  if (node.inputs.size() > 2 && node.inputs[2] != kNoValue) {
    TESSERA_RETURN_IF_ERROR(check_float_value(g, node.inputs[2]));
    if (g.value(node.inputs[2]).type.static_dims() != std::vector<int64_t>{p.out_channels}) {
      return invalid_argument("bias must have M elements");
    }
  }
  const std::vector<int64_t> in_spatial(x.begin() + 2, x.end()), kernel(w.begin() + 2, w.end());
  const std::vector<int64_t> kernel_attr = node.attr_ints("kernel_shape");
  if (!kernel_attr.empty() && kernel_attr != kernel)
    return invalid_argument("kernel_shape differs from W");
  auto geo = nn::forward_window(node, in_spatial, kernel, false);
  if (!geo.ok()) return invalid_argument(node.describe() + ": " + geo.status().message());
  const size_t r = in_spatial.size(), off = 3 - r;
  for (size_t i = 0; i < r; ++i) {
    p.in[off + i] = in_spatial[i];
    p.out[off + i] = geo->out[i];
    p.kernel[off + i] = geo->kernel[i];
    p.stride[off + i] = geo->strides[i];
    p.dilation[off + i] = geo->dilations[i];
    p.pad[off + i] = geo->pads_begin[i];
  }
  p.out_dims = {p.batch, p.out_channels};
  p.out_dims.insert(p.out_dims.end(), geo->out.begin(), geo->out.end());
  if (g.value(node.outputs[0]).type.static_dims() != p.out_dims) {
    return invalid_argument(node.describe() + ": output shape does not match the geometry");
  }
  p.direct = p.kernel_size() == 1 && p.stride == std::array<int64_t, 3>{1, 1, 1} &&
             p.pad == std::array<int64_t, 3>{0, 0, 0} && p.out == p.in;
  const int64_t rows = p.in_channels / p.group * p.kernel_size();
  if (rows > INT32_MAX || p.out_plane() > INT32_MAX) return unimplemented("dims beyond 32 bits");
  return p;
}

// col[(c * kernel_size + kernel offset) * P + output position] for channels [c0, c1) of one image
// and group (x points at its first channel).
void im2col(const ConvPlan& p, const float* x, int64_t c0, int64_t c1, float* col) {
  const auto [id_n, ih_n, iw_n] = p.in;
  const auto [od_n, oh_n, ow_n] = p.out;
  const auto [kd_n, kh_n, kw_n] = p.kernel;
  const int64_t plane = p.out_plane();
  for (int64_t c = c0; c < c1; ++c) {
    const float* xc = x + c * p.in_plane();
    for (int64_t kd = 0; kd < kd_n; ++kd)
      for (int64_t kh = 0; kh < kh_n; ++kh)
        for (int64_t kw = 0; kw < kw_n; ++kw) {
          float* dst = col + ((c * kd_n + kd) * kh_n * kw_n + kh * kw_n + kw) * plane;
          for (int64_t od = 0; od < od_n; ++od) {
            const int64_t id = od * p.stride[0] + kd * p.dilation[0] - p.pad[0];
            for (int64_t oh = 0; oh < oh_n; ++oh, dst += ow_n) {
              const int64_t ih = oh * p.stride[1] + kh * p.dilation[1] - p.pad[1];
              if (id < 0 || id >= id_n || ih < 0 || ih >= ih_n) {
                std::fill(dst, dst + ow_n, 0.0f);
                continue;
              }
              const float* row = xc + (id * ih_n + ih) * iw_n;
              const int64_t shift = kw * p.dilation[2] - p.pad[2];  // iw = ow * stride + shift
              for (int64_t ow = 0; ow < ow_n; ++ow) {
                const int64_t iw = ow * p.stride[2] + shift;
                dst[ow] = iw >= 0 && iw < iw_n ? row[iw] : 0.0f;
              }
            }
          }
        }
  }
}

class ConvKernel final : public Kernel {
 public:
  ConvKernel(ConvPlan plan, ValueSource x, ValueSource w, ValueSource bias, bool has_bias, int threads)
      : p_(std::move(plan)),
        x_(std::move(x)),
        w_(std::move(w)),
        bias_(std::move(bias)),
        has_bias_(has_bias),
        threads_(threads) {}

  Status run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs,
             KernelRunContext& ctx) override {
    TESSERA_ASSIGN_OR_RETURN(const float* x, resolve_float(x_, inputs));
    TESSERA_ASSIGN_OR_RETURN(const float* w, resolve_float(w_, inputs));
    const float* bias = nullptr;
    if (has_bias_) {
      TESSERA_ASSIGN_OR_RETURN(bias, resolve_float(bias_, inputs));
    }
    outputs.resize(1);
    outputs[0] = ctx.alloc.allocate(DType::kFloat32, p_.out_dims);
    float* y = outputs[0].data<float>();
    const int64_t icpg = p_.in_channels / p_.group, ocpg = p_.out_channels / p_.group;
    const int64_t rows = icpg * p_.kernel_size(), plane = p_.out_plane();
    const bool spread_groups = p_.group > 1 && ctx.pool && threads_ > 1;
    std::vector<float> col(p_.direct || spread_groups ? 0 : static_cast<size_t>(rows * plane));
    if (bias) {
      for (int64_t n = 0; n < p_.batch; ++n)
        for (int64_t m = 0; m < p_.out_channels; ++m) {
          float* dst = y + (n * p_.out_channels + m) * plane;
          std::fill(dst, dst + plane, bias[m]);
        }
    }
    // Inside a parallel loop over groups the pool is busy: each sgemm then runs on one thread.
    auto gemm = [&](int64_t n, int64_t g, const float* cols) {
      parallel_sgemm(ctx.pool, false, false, ocpg, plane, rows, 1.0f, w + g * ocpg * rows, rows, cols, plane,
                     bias ? 1.0f : 0.0f, y + (n * p_.out_channels + g * ocpg) * plane, plane);
    };
    auto image = [&](int64_t n, int64_t g) {
      return x + (n * p_.in_channels + g * icpg) * p_.in_plane();
    };
    const int64_t units = p_.batch * p_.group;
    if (spread_groups) {
      // Many small products (grouped, depthwise): one single-threaded sgemm per group, the groups
      // spread over the session's threads.
      ctx.pool->parallel_for(units, 1, [&](int64_t u0, int64_t u1) {
        std::vector<float> own(p_.direct ? 0 : static_cast<size_t>(rows * plane));
        for (int64_t u = u0; u < u1; ++u) {
          const int64_t n = u / p_.group, g = u % p_.group;
          if (!p_.direct) im2col(p_, image(n, g), 0, icpg, own.data());
          gemm(n, g, p_.direct ? image(n, g) : own.data());
        }
      });
      return Status();
    }
    for (int64_t u = 0; u < units; ++u) {
      const int64_t n = u / p_.group, g = u % p_.group;
      if (p_.direct) {
        gemm(n, g, image(n, g));
        continue;
      }
      auto fill = [&](int64_t c0, int64_t c1) { im2col(p_, image(n, g), c0, c1, col.data()); };
      if (ctx.pool) {
        ctx.pool->parallel_for(icpg, std::max<int64_t>(1, 16384 / (p_.kernel_size() * plane)),
                               fill);
      } else {
        fill(0, icpg);
      }
      gemm(n, g, col.data());
    }
    return Status();
  }

 private:
  ConvPlan p_;
  ValueSource x_, w_, bias_;
  bool has_bias_;
  int threads_;
};

}  // namespace

Status check_conv_node(const Graph& g, int n) { return plan_conv(g, g.node(n)).status(); }

Result<std::unique_ptr<Kernel>> compile_conv(const SubGraph& sg, int threads) {
  const Node& node = sg.graph().node(sg.nodes().first());
  TESSERA_ASSIGN_OR_RETURN(ConvPlan plan, plan_conv(sg.graph(), node));
  TESSERA_ASSIGN_OR_RETURN(ValueSource x, source_of(sg, node.inputs[0]));
  TESSERA_ASSIGN_OR_RETURN(ValueSource w, source_of(sg, node.inputs[1]));
  const bool has_bias = node.inputs.size() > 2 && node.inputs[2] != kNoValue;
  ValueSource bias;
  if (has_bias) {
    TESSERA_ASSIGN_OR_RETURN(bias, source_of(sg, node.inputs[2]));
  }
  return std::unique_ptr<Kernel>(new ConvKernel(std::move(plan), std::move(x), std::move(w),
                                                std::move(bias), has_bias, threads));
}

}  // namespace tessera::blas
