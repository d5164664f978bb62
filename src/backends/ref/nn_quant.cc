// QuantizeLinear, DequantizeLinear (per tensor and per axis) and DynamicQuantizeLinear.
#include <algorithm>
#include <cmath>

#include "backends/ref/nn_kernels.h"

namespace tessera {
namespace {

// Maps each element of x to its index into a per-tensor (size 1) or per-axis parameter.
struct ChannelMap {
  int64_t channels = 1, inner = 1;  // per-axis: channel of element i is (i / inner) % channels
  bool per_axis = false;
  size_t at(size_t i) const {
    return per_axis ? static_cast<size_t>((static_cast<int64_t>(i) / inner) % channels) : 0;
  }
};

Result<ChannelMap> channel_map(const RefKernelContext& ctx, const Tensor& x, const Tensor& scale,
                               const Tensor* zero_point) {
  ChannelMap m;
  if (zero_point && zero_point->dims() != scale.dims()) {
    return ctx.error("scale and zero point shapes differ");
  }
  if (scale.numel() == 1 && scale.rank() <= 1) return m;
  if (scale.rank() != 1) return ctx.unsupported("blocked quantization (scale rank > 1)");
  TESSERA_ASSIGN_OR_RETURN(int axis, ref::normalize_axis(ctx.node().attr_int("axis", 1), x.rank()));
  if (scale.dim(0) != x.dim(axis)) {
    return ctx.error("scale " + scale.describe() + " does not match axis " + std::to_string(axis) +
                     " of " + x.describe());
  }
  m.per_axis = true;
  m.channels = x.dim(axis);
  m.inner = shape_numel(std::vector<int64_t>(x.dims().begin() + axis + 1, x.dims().end()));
  return m;
}

// y = saturate(round(x / y_scale) + y_zero_point)
Status quantize_linear_kernel(RefKernelContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.error("expects inputs x and y_scale");
  const Tensor& x = *ctx.input(0);
  const Tensor& scale = *ctx.input(1);
  const Tensor* zero_point = ctx.input(2);
  TESSERA_ASSIGN_OR_RETURN(ChannelMap map, channel_map(ctx, x, scale, zero_point));
  if (!dtype_is_float(x.dtype()) && x.dtype() != DType::kInt32) {
    return ctx.unsupported(std::string("x dtype ") + dtype_name(x.dtype()));
  }
  const DType out_dt = zero_point ? zero_point->dtype() : DType::kUint8;
  std::vector<double> xv = ref::to_vector_as<double>(x);
  std::vector<double> sv = ref::to_vector_as<double>(scale);
  std::vector<double> zv = zero_point ? ref::to_vector_as<double>(*zero_point)
                                      : std::vector<double>(sv.size(), 0.0);
  Status st;
  bool handled = ref::visit_quant_dtype(out_dt, [&](auto tag) {
    using Q = decltype(tag);
    Tensor& y = ctx.output(0, out_dt, x.dims());
    Q* out = y.data<Q>();
    for (size_t i = 0; i < xv.size(); ++i) {
      const size_t c = map.at(i);
      // Divide in float like the reference implementations do.
      const float q = static_cast<float>(xv[i]) / static_cast<float>(sv[c]);
      out[i] = ref::saturate_round<Q>(std::nearbyint(static_cast<double>(q)) + zv[c]);
    }
  });
  if (!handled) return ctx.unsupported(std::string("output dtype ") + dtype_name(out_dt));
  return st;
}

// y = (x - x_zero_point) * x_scale
Status dequantize_linear_kernel(RefKernelContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.error("expects inputs x and x_scale");
  const Tensor& x = *ctx.input(0);
  const Tensor& scale = *ctx.input(1);
  const Tensor* zero_point = ctx.input(2);
  if (x.dtype() != DType::kInt8 && x.dtype() != DType::kUint8 && x.dtype() != DType::kInt32) {
    return ctx.unsupported(std::string("x dtype ") + dtype_name(x.dtype()));
  }
  if (zero_point && zero_point->dtype() != x.dtype()) return ctx.error("zero point dtype differs");
  TESSERA_ASSIGN_OR_RETURN(ChannelMap map, channel_map(ctx, x, scale, zero_point));
  std::vector<double> xv = ref::to_vector_as<double>(x);
  std::vector<double> sv = ref::to_vector_as<double>(scale);
  std::vector<double> zv = zero_point ? ref::to_vector_as<double>(*zero_point)
                                      : std::vector<double>(sv.size(), 0.0);
  if (!dtype_is_float(scale.dtype())) return ctx.error("x_scale must be a float tensor");
  Tensor& y = ctx.output(0, scale.dtype(), x.dims());
  ref::visit_float_dtype(scale.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = ref::compute_t<T>;
    T* out = y.data<T>();
    for (size_t i = 0; i < xv.size(); ++i) {
      const size_t c = map.at(i);
      out[i] = static_cast<T>(static_cast<C>(xv[i] - zv[c]) * static_cast<C>(sv[c]));
    }
  });
  return Status();
}

// uint8 quantization of x with scale and zero point chosen from its range (including 0).
Status dynamic_quantize_linear_kernel(RefKernelContext& ctx) {
  if (!ctx.has_input(0)) return ctx.error("expects input x");
  const Tensor& x = *ctx.input(0);
  if (x.dtype() != DType::kFloat32) return ctx.unsupported(std::string("dtype ") + dtype_name(x.dtype()));
  const float* xp = x.data<float>();
  float lo = 0, hi = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    lo = std::min(lo, xp[i]);
    hi = std::max(hi, xp[i]);
  }
  const float scale = (hi - lo) / 255.0f;
  const uint8_t zp = scale == 0 ? 0 : ref::saturate_round<uint8_t>(0.0 - static_cast<double>(lo / scale));
  uint8_t* yp = ctx.output(0, DType::kUint8, x.dims()).data<uint8_t>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double q = scale == 0 ? 0.0 : std::nearbyint(static_cast<double>(xp[i] / scale));
    yp[i] = ref::saturate_round<uint8_t>(q + zp);
  }
  if (ctx.wants_output(1)) ctx.output(1, DType::kFloat32, {}).data<float>()[0] = scale;
  if (ctx.wants_output(2)) ctx.output(2, DType::kUint8, {}).data<uint8_t>()[0] = zp;
  return Status();
}

}  // namespace

void register_nn_quant_kernels(RefKernelTable& t) {
  t.add("QuantizeLinear", quantize_linear_kernel);
  t.add("DequantizeLinear", dequantize_linear_kernel);
  t.add("DynamicQuantizeLinear", dynamic_quantize_linear_kernel);
}

}  // namespace tessera
