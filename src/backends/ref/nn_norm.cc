// BatchNormalization, InstanceNormalization, LayerNormalization, LRN, MeanVarianceNormalization.
// Statistics are computed in double.
#include <algorithm>
#include <cmath>

#include "backends/ref/nn_kernels.h"

namespace tessera {
namespace {

// A per-channel parameter of `channels` elements as doubles, or an error.
Result<std::vector<double>> channel_param(const RefKernelContext& ctx, int input, int64_t channels,
                                          const char* name) {
  const Tensor* t = ctx.input(input);
  if (!t) return ctx.error(std::string("missing input ") + name);
  if (t->numel() != channels) {
    return ctx.error(std::string(name) + " " + t->describe() + " must have " +
                     std::to_string(channels) + " elements");
  }
  return ref::to_vector_as<double>(*t);
}

// Writes doubles into a new output i of dtype dt.
Status write_output(RefKernelContext& ctx, int i, DType dt, std::vector<int64_t> dims,
                    const std::vector<double>& values) {
  Tensor& out = ctx.output(i, dt, std::move(dims));
  if (!ref::visit_float_dtype(dt, [&](auto tag) {
        using T = decltype(tag);
        T* p = out.data<T>();
        for (size_t k = 0; k < values.size(); ++k) {
          p[k] = static_cast<T>(static_cast<ref::compute_t<T>>(values[k]));
        }
      })) {
    return ctx.unsupported(std::string("dtype ") + dtype_name(dt));
  }
  return Status();
}

// X: N x C x D1..Dn; scale, B, input_mean, input_var: C.
Status batch_norm_kernel(RefKernelContext& ctx) {
  const Node& node = ctx.node();
  if (!ctx.has_input(0)) return ctx.error("expects input X");
  const Tensor& x = *ctx.input(0);
  if (!dtype_is_float(x.dtype())) return ctx.unsupported(std::string("dtype ") + dtype_name(x.dtype()));
  if (x.rank() < 2) return ctx.error("X must have rank >= 2");
  if (node.opset < 9 && node.attr_int("spatial", 1) == 0) return ctx.unsupported("spatial=0");
  const double eps = node.attr_float("epsilon", 1e-5f);
  const double momentum = node.attr_float("momentum", 0.9f);
  const bool training = node.attr_int("training_mode", 0) != 0;
  if (node.opset < 14 && ctx.wants_output(1)) {
    return ctx.unsupported("training-mode outputs before opset 14");
  }
  const int64_t channels = x.dim(1), batch = x.dim(0);
  const int64_t inner = channels == 0 || batch == 0 ? 0 : x.numel() / (batch * channels);
  TESSERA_ASSIGN_OR_RETURN(std::vector<double> scale, channel_param(ctx, 1, channels, "scale"));
  TESSERA_ASSIGN_OR_RETURN(std::vector<double> bias, channel_param(ctx, 2, channels, "B"));
  TESSERA_ASSIGN_OR_RETURN(std::vector<double> mean, channel_param(ctx, 3, channels, "mean"));
  TESSERA_ASSIGN_OR_RETURN(std::vector<double> var, channel_param(ctx, 4, channels, "var"));
  std::vector<double> xv = ref::to_vector_as<double>(x);
  std::vector<double> use_mean = mean, use_var = var;
  if (training) {
    for (int64_t c = 0; c < channels; ++c) {
      double sum = 0, sq = 0;
      for (int64_t n = 0; n < batch; ++n) {
        const double* p = &xv[static_cast<size_t>((n * channels + c) * inner)];
        for (int64_t i = 0; i < inner; ++i) sum += p[i];
      }
      const double count = static_cast<double>(batch * inner);
      const double m = count > 0 ? sum / count : 0;
      for (int64_t n = 0; n < batch; ++n) {
        const double* p = &xv[static_cast<size_t>((n * channels + c) * inner)];
        for (int64_t i = 0; i < inner; ++i) sq += (p[i] - m) * (p[i] - m);
      }
      use_mean[static_cast<size_t>(c)] = m;
      use_var[static_cast<size_t>(c)] = count > 0 ? sq / count : 0;
    }
  }
  std::vector<double> yv(xv.size());
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t c = 0; c < channels; ++c) {
      const size_t ci = static_cast<size_t>(c);
      const double a = scale[ci] / std::sqrt(use_var[ci] + eps);
      const double b = bias[ci] - use_mean[ci] * a;
      const size_t base = static_cast<size_t>((n * channels + c) * inner);
      for (int64_t i = 0; i < inner; ++i) yv[base + i] = xv[base + i] * a + b;
    }
  }
  TESSERA_RETURN_IF_ERROR(write_output(ctx, 0, x.dtype(), x.dims(), yv));
  if (!training) return Status();
  std::vector<double> running_mean(mean.size()), running_var(var.size());
  for (size_t c = 0; c < mean.size(); ++c) {
    running_mean[c] = mean[c] * momentum + use_mean[c] * (1 - momentum);
    running_var[c] = var[c] * momentum + use_var[c] * (1 - momentum);
  }
  const DType stat_dt = ctx.input(3)->dtype();
  if (ctx.wants_output(1)) {
    TESSERA_RETURN_IF_ERROR(write_output(ctx, 1, stat_dt, {channels}, running_mean));
  }
  if (ctx.wants_output(2)) {
    TESSERA_RETURN_IF_ERROR(write_output(ctx, 2, stat_dt, {channels}, running_var));
  }
  return Status();
}

// input (N x C x D1..Dn), scale (C), B (C): normalizes each (n, c) plane.
Status instance_norm_kernel(RefKernelContext& ctx) {
  if (!ctx.has_input(0)) return ctx.error("expects input");
  const Tensor& x = *ctx.input(0);
  if (!dtype_is_float(x.dtype())) return ctx.unsupported(std::string("dtype ") + dtype_name(x.dtype()));
  if (x.rank() < 3) return ctx.error("input must have rank >= 3");
  const double eps = ctx.node().attr_float("epsilon", 1e-5f);
  const int64_t channels = x.dim(1), planes = x.dim(0) * channels;
  const int64_t inner = planes == 0 ? 0 : x.numel() / planes;
  TESSERA_ASSIGN_OR_RETURN(std::vector<double> scale, channel_param(ctx, 1, channels, "scale"));
  TESSERA_ASSIGN_OR_RETURN(std::vector<double> bias, channel_param(ctx, 2, channels, "B"));
  std::vector<double> xv = ref::to_vector_as<double>(x);
  std::vector<double> yv(xv.size());
  ctx.parallel_for(planes, 1, [&](int64_t b, int64_t e) {
    for (int64_t pl = b; pl < e; ++pl) {
      const size_t base = static_cast<size_t>(pl * inner), c = static_cast<size_t>(pl % channels);
      double sum = 0, sq = 0;
      for (int64_t i = 0; i < inner; ++i) sum += xv[base + i];
      const double m = inner > 0 ? sum / static_cast<double>(inner) : 0;
      for (int64_t i = 0; i < inner; ++i) sq += (xv[base + i] - m) * (xv[base + i] - m);
      const double v = inner > 0 ? sq / static_cast<double>(inner) : 0;
      const double a = scale[c] / std::sqrt(v + eps);
      for (int64_t i = 0; i < inner; ++i) yv[base + i] = (xv[base + i] - m) * a + bias[c];
    }
  });
  return write_output(ctx, 0, x.dtype(), x.dims(), yv);
}

// X, Scale, optional B; normalizes over dims [axis, rank). Outputs Y, Mean, InvStdDev.
Status layer_norm_kernel(RefKernelContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.error("expects inputs X and Scale");
  const Tensor& x = *ctx.input(0);
  if (!dtype_is_float(x.dtype())) return ctx.unsupported(std::string("dtype ") + dtype_name(x.dtype()));
  const Node& node = ctx.node();
  TESSERA_ASSIGN_OR_RETURN(int axis, ref::normalize_axis(node.attr_int("axis", -1), x.rank()));
  const double eps = node.attr_float("epsilon", 1e-5f);
  std::vector<int64_t> norm_dims(x.dims().begin() + axis, x.dims().end());
  const int64_t inner = shape_numel(norm_dims);
  const int64_t outer = shape_numel(std::vector<int64_t>(x.dims().begin(), x.dims().begin() + axis));
  // Scale and B broadcast onto the normalized dims.
  auto expand = [&](const Tensor& t, const char* name) -> Result<std::vector<double>> {
    auto bc = ref::broadcast_shapes({t.dims(), norm_dims});
    if (!bc.ok() || *bc != norm_dims) {
      return ctx.error(std::string(name) + " " + t.describe() + " does not broadcast to " +
                       dims_to_string(norm_dims));
    }
    std::vector<double> src = ref::to_vector_as<double>(t), out(static_cast<size_t>(inner));
    std::vector<std::vector<int64_t>> strides = {ref::broadcast_strides(t.dims(), norm_dims)};
    ref::for_each_broadcast(norm_dims, strides, [&](int64_t i, const std::vector<int64_t>& off) {
      out[static_cast<size_t>(i)] = src[static_cast<size_t>(off[0])];
    });
    return out;
  };
  TESSERA_ASSIGN_OR_RETURN(std::vector<double> scale, expand(*ctx.input(1), "Scale"));
  std::vector<double> bias(static_cast<size_t>(inner), 0.0);
  if (ctx.has_input(2)) {
    TESSERA_ASSIGN_OR_RETURN(bias, expand(*ctx.input(2), "B"));
  }
  std::vector<double> xv = ref::to_vector_as<double>(x);
  std::vector<double> yv(xv.size()), mean(static_cast<size_t>(outer)), inv(static_cast<size_t>(outer));
  for (int64_t o = 0; o < outer; ++o) {
    const size_t base = static_cast<size_t>(o * inner);
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < inner; ++i) sum += xv[base + i];
    const double m = inner > 0 ? sum / static_cast<double>(inner) : 0;
    for (int64_t i = 0; i < inner; ++i) sq += (xv[base + i] - m) * (xv[base + i] - m);
    const double is = 1.0 / std::sqrt((inner > 0 ? sq / static_cast<double>(inner) : 0) + eps);
    for (int64_t i = 0; i < inner; ++i) {
      yv[base + i] = (xv[base + i] - m) * is * scale[static_cast<size_t>(i)] + bias[static_cast<size_t>(i)];
    }
    mean[static_cast<size_t>(o)] = m;
    inv[static_cast<size_t>(o)] = is;
  }
  TESSERA_RETURN_IF_ERROR(write_output(ctx, 0, x.dtype(), x.dims(), yv));
  std::vector<int64_t> stat_dims(x.dims().begin(), x.dims().begin() + axis);
  stat_dims.resize(x.dims().size(), 1);
  const DType stat_dt = node.attr_int("stash_type", 1) == 1 ? DType::kFloat32 : x.dtype();
  if (ctx.wants_output(1)) TESSERA_RETURN_IF_ERROR(write_output(ctx, 1, stat_dt, stat_dims, mean));
  if (ctx.wants_output(2)) TESSERA_RETURN_IF_ERROR(write_output(ctx, 2, stat_dt, stat_dims, inv));
  return Status();
}

// y = x / (bias + alpha / size * sum of squares over nearby channels) ^ beta.
Status lrn_kernel(RefKernelContext& ctx) {
  if (!ctx.has_input(0)) return ctx.error("expects input X");
  const Tensor& x = *ctx.input(0);
  if (!dtype_is_float(x.dtype())) return ctx.unsupported(std::string("dtype ") + dtype_name(x.dtype()));
  if (x.rank() < 2) return ctx.error("X must have rank >= 2");
  const Node& node = ctx.node();
  const int64_t size = node.attr_int("size", 0);
  if (size < 1) return ctx.error("size must be positive");
  const double alpha = node.attr_float("alpha", 1e-4f), beta = node.attr_float("beta", 0.75f);
  const double bias = node.attr_float("bias", 1.0f);
  const int64_t channels = x.dim(1), batch = x.dim(0);
  const int64_t inner = channels == 0 || batch == 0 ? 0 : x.numel() / (batch * channels);
  const int64_t before = (size - 1) / 2, after = size - 1 - before;
  std::vector<double> xv = ref::to_vector_as<double>(x), yv(xv.size());
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t c = 0; c < channels; ++c) {
      const int64_t c0 = std::max<int64_t>(0, c - before), c1 = std::min(channels - 1, c + after);
      for (int64_t i = 0; i < inner; ++i) {
        double sq = 0;
        for (int64_t k = c0; k <= c1; ++k) {
          const double v = xv[static_cast<size_t>((n * channels + k) * inner + i)];
          sq += v * v;
        }
        const size_t at = static_cast<size_t>((n * channels + c) * inner + i);
        yv[at] = xv[at] / std::pow(bias + alpha / static_cast<double>(size) * sq, beta);
      }
    }
  }
  return write_output(ctx, 0, x.dtype(), x.dims(), yv);
}

// (X - mean) / (sqrt(var) + 1e-9) with mean and var over `axes` (default 0, 2, 3).
Status mvn_kernel(RefKernelContext& ctx) {
  if (!ctx.has_input(0)) return ctx.error("expects input X");
  const Tensor& x = *ctx.input(0);
  if (!dtype_is_float(x.dtype())) return ctx.unsupported(std::string("dtype ") + dtype_name(x.dtype()));
  std::vector<int64_t> axes = ctx.node().attr_ints("axes", {0, 2, 3});
  std::vector<bool> reduced(static_cast<size_t>(x.rank()), false);
  for (int64_t a : axes) {
    TESSERA_ASSIGN_OR_RETURN(int axis, ref::normalize_axis(a, x.rank()));
    reduced[static_cast<size_t>(axis)] = true;
  }
  // Statistics live on the kept dims; reduced dims have stride 0 in the statistics tensor.
  std::vector<int64_t> kept = x.dims();
  for (size_t d = 0; d < kept.size(); ++d) {
    if (reduced[d]) kept[d] = 1;
  }
  const std::vector<std::vector<int64_t>> strides = {ref::broadcast_strides(kept, x.dims())};
  std::vector<double> xv = ref::to_vector_as<double>(x), yv(xv.size());
  const size_t stats = static_cast<size_t>(shape_numel(kept));
  std::vector<double> sum(stats, 0), sq(stats, 0);
  std::vector<int64_t> count(stats, 0);
  ref::for_each_broadcast(x.dims(), strides, [&](int64_t i, const std::vector<int64_t>& off) {
    sum[static_cast<size_t>(off[0])] += xv[static_cast<size_t>(i)];
    ++count[static_cast<size_t>(off[0])];
  });
  for (size_t s = 0; s < stats; ++s) sum[s] = count[s] ? sum[s] / static_cast<double>(count[s]) : 0;
  ref::for_each_broadcast(x.dims(), strides, [&](int64_t i, const std::vector<int64_t>& off) {
    const double d = xv[static_cast<size_t>(i)] - sum[static_cast<size_t>(off[0])];
    sq[static_cast<size_t>(off[0])] += d * d;
  });
  ref::for_each_broadcast(x.dims(), strides, [&](int64_t i, const std::vector<int64_t>& off) {
    const size_t s = static_cast<size_t>(off[0]);
    const double var = count[s] ? sq[s] / static_cast<double>(count[s]) : 0;
    yv[static_cast<size_t>(i)] = (xv[static_cast<size_t>(i)] - sum[s]) / (std::sqrt(var) + 1e-9);
  });
  return write_output(ctx, 0, x.dtype(), x.dims(), yv);
}

}  // namespace

void register_nn_norm_kernels(RefKernelTable& t) {
  t.add("BatchNormalization", batch_norm_kernel);
  t.add("InstanceNormalization", instance_norm_kernel);
  t.add("LayerNormalization", layer_norm_kernel);
  t.add("LRN", lrn_kernel);
  t.add("MeanVarianceNormalization", mvn_kernel);
}

}  // namespace tessera
