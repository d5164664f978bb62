// Reference kernels: Softmax, LogSoftmax, Hardmax, NegativeLogLikelihoodLoss,
// SoftmaxCrossEntropyLoss.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "backends/ref/reduction_kernels.h"

namespace tessera::ref {
namespace {

enum class SoftmaxKind { kSoftmax, kLogSoftmax, kHardmax };

// Softmax-like ops over rows of `s.length` elements spaced `s.inner` apart.
// Softmax and LogSoftmax subtract the row max first, so large inputs do not overflow.
template <typename T>
void softmax_rows(const RefKernelContext& ctx, SoftmaxKind kind, const T* x, const AxisSplit& s,
                  T* y) {
  const int64_t rows = s.outer * s.inner;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, s.length));
  ctx.parallel_for(rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t base = (r / s.inner) * s.length * s.inner + r % s.inner;
      auto at = [&](int64_t k) { return base + k * s.inner; };
      double max_value = -std::numeric_limits<double>::infinity();
      int64_t max_index = 0;
      for (int64_t k = 0; k < s.length; ++k) {
        const double v = static_cast<double>(x[at(k)]);
        if (k == 0 || v > max_value) {
          max_value = v;
          max_index = k;
        }
      }
      if (kind == SoftmaxKind::kHardmax) {
        for (int64_t k = 0; k < s.length; ++k) {
          y[at(k)] = element_from_double<T>(k == max_index ? 1.0 : 0.0);
        }
        continue;
      }
      // An all -inf row (or +inf max) would give inf - inf: shift by 0 then, as the naive
      // formula does.
      const double shift = std::isfinite(max_value) ? max_value : 0.0;
      double sum = 0;
      for (int64_t k = 0; k < s.length; ++k) sum += std::exp(static_cast<double>(x[at(k)]) - shift);
      const double log_sum = std::log(sum);
      for (int64_t k = 0; k < s.length; ++k) {
        const double shifted = static_cast<double>(x[at(k)]) - shift;
        const double v =
            kind == SoftmaxKind::kSoftmax ? std::exp(shifted) / sum : shifted - log_sum;
        y[at(k)] = element_from_double<T>(v);
      }
    }
  });
}

Status run_softmax_like(RefKernelContext& ctx, SoftmaxKind kind) {
  const Tensor* in = ctx.input(0);
  if (!in) return ctx.error("missing input");
  const Node& node = ctx.node();
  const int rank = in->rank();
  if (rank == 0) return ctx.error("input must have rank >= 1");
  AxisSplit s;
  if (node.opset >= 13) {
    TESSERA_ASSIGN_OR_RETURN(int axis, kernel_axis(ctx, node.attr_int("axis", -1), rank));
    s = split_at_axis(in->dims(), axis);
  } else {
    // Before opset 13 the input is coerced to 2-D [prod(dims[:axis]), prod(dims[axis:])].
    int64_t axis = node.attr_int("axis", 1);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis > rank) {
      return ctx.error("axis " + std::to_string(node.attr_int("axis", 1)) +
                       " out of range for rank " + std::to_string(rank));
    }
    s.length = 1;
    for (int d = 0; d < rank; ++d) (d < axis ? s.outer : s.length) *= in->dims()[d];
  }
  Tensor& out = ctx.output(0, in->dtype(), in->dims());
  bool known = visit_float_dtype(in->dtype(), [&](auto tag) {
    using T = decltype(tag);
    softmax_rows<T>(ctx, kind, in->data<T>(), s, out.data<T>());
  });
  if (!known) return ctx.unsupported(std::string("dtype ") + dtype_name(in->dtype()));
  return Status();
}

// ---------------------------------------------------------------------------------------------
// Losses. Both take (N, C, d1..dk) log-probabilities (NLL) or scores (SCE), a (N, d1..dk) integer
// target and an optional (C) weight.

struct LossShape {
  AxisSplit split;  // outer = N, length = C, inner = d1*..*dk
  std::vector<int64_t> target_dims;
};

Result<LossShape> check_loss_inputs(const RefKernelContext& ctx, const Tensor& input,
                                    const Tensor& target, const Tensor* weight) {
  if (input.rank() < 2) return ctx.error("input must have rank >= 2 (N, C, ...)");
  if (!dtype_is_integer(target.dtype())) return ctx.error("target must be an integer tensor");
  std::vector<int64_t> want = input.dims();
  want.erase(want.begin() + 1);
  if (target.dims() != want) {
    return ctx.error("target shape " + dims_to_string(target.dims()) + " does not match input " +
                     dims_to_string(input.dims()));
  }
  LossShape shape{split_at_axis(input.dims(), 1), want};
  if (weight) {
    if (weight->rank() != 1 || weight->dim(0) != shape.split.length) {
      return ctx.error("weight must have shape (C) = (" + std::to_string(shape.split.length) + ")");
    }
    if (weight->dtype() != input.dtype()) return ctx.error("weight dtype differs from input");
  }
  return shape;
}

// Writes the NLL loss of log-probabilities `log_prob` (as doubles) into output 0.
template <typename T>
Status nll_loss(RefKernelContext& ctx, const std::vector<double>& log_prob, const LossShape& shape,
                const Tensor& target, const Tensor* weight) {
  const Node& node = ctx.node();
  const std::string reduction = node.attr_string("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean") {
    return ctx.error("unknown reduction '" + reduction + "'");
  }
  std::optional<int64_t> ignore_index;
  if (node.has_attr("ignore_index")) ignore_index = node.attr_int("ignore_index", 0);
  const AxisSplit& s = shape.split;
  const int64_t count = s.outer * s.inner;
  std::vector<double> losses(count, 0.0);
  double loss_sum = 0, weight_sum = 0;
  for (int64_t n = 0; n < s.outer; ++n) {
    for (int64_t d = 0; d < s.inner; ++d) {
      const int64_t t_at = n * s.inner + d;
      const int64_t t = target.as_int64(t_at);
      if (ignore_index && t == *ignore_index) continue;
      if (t < 0 || t >= s.length) {
        return ctx.error("target value " + std::to_string(t) + " out of range [0, " +
                         std::to_string(s.length) + ")");
      }
      const double w = weight ? weight->as_double(t) : 1.0;
      losses[t_at] = -log_prob[(n * s.length + t) * s.inner + d] * w;
      loss_sum += losses[t_at];
      weight_sum += w;
    }
  }
  if (reduction == "none") {
    Tensor& out = ctx.output(0, DTypeOf<T>::value, shape.target_dims);
    T* y = out.data<T>();
    for (int64_t i = 0; i < count; ++i) y[i] = element_from_double<T>(losses[i]);
  } else {
    Tensor& out = ctx.output(0, DTypeOf<T>::value, {});
    // mean divides by the total weight of the counted elements (0/0 = NaN when all ignored).
    out.data<T>()[0] =
        element_from_double<T>(reduction == "sum" ? loss_sum : loss_sum / weight_sum);
  }
  return Status();
}

Status run_nll_loss(RefKernelContext& ctx) {
  const Tensor* input = ctx.input(0);
  const Tensor* target = ctx.input(1);
  const Tensor* weight = ctx.input(2);
  if (!input || !target) return ctx.error("needs input and target");
  TESSERA_ASSIGN_OR_RETURN(LossShape shape, check_loss_inputs(ctx, *input, *target, weight));
  Status status;
  bool known = visit_float_dtype(input->dtype(), [&](auto tag) {
    using T = decltype(tag);
    status = nll_loss<T>(ctx, input->to_double_vector(), shape, *target, weight);
  });
  if (!known) return ctx.unsupported(std::string("dtype ") + dtype_name(input->dtype()));
  return status;
}

Status run_softmax_cross_entropy_loss(RefKernelContext& ctx) {
  const Tensor* scores = ctx.input(0);
  const Tensor* labels = ctx.input(1);
  const Tensor* weight = ctx.input(2);
  if (!scores || !labels) return ctx.error("needs scores and labels");
  TESSERA_ASSIGN_OR_RETURN(LossShape shape, check_loss_inputs(ctx, *scores, *labels, weight));
  if (!dtype_is_float(scores->dtype())) {
    return ctx.unsupported(std::string("dtype ") + dtype_name(scores->dtype()));
  }
  // log_prob = LogSoftmax over the class axis, in double.
  Result<Tensor> as_double = scores->cast(DType::kFloat64);
  if (!as_double.ok()) return as_double.status().with_context(ctx.node().describe());
  Tensor log_prob_double(DType::kFloat64, scores->dims());
  softmax_rows<double>(ctx, SoftmaxKind::kLogSoftmax, as_double->data<double>(), shape.split,
                       log_prob_double.data<double>());
  const double* lp = log_prob_double.data<double>();
  std::vector<double> log_prob(lp, lp + log_prob_double.numel());
  Status status;
  visit_float_dtype(scores->dtype(), [&](auto tag) {
    using T = decltype(tag);
    status = nll_loss<T>(ctx, log_prob, shape, *labels, weight);
    if (status.ok() && ctx.wants_output(1)) {
      T* y = ctx.output(1, scores->dtype(), scores->dims()).template data<T>();
      for (size_t i = 0; i < log_prob.size(); ++i) y[i] = element_from_double<T>(log_prob[i]);
    }
  });
  return status;
}

}  // namespace

void register_reduction_softmax_kernels(RefKernelTable& t) {
  t.add("Softmax",
        [](RefKernelContext& ctx) { return run_softmax_like(ctx, SoftmaxKind::kSoftmax); });
  t.add("LogSoftmax",
        [](RefKernelContext& ctx) { return run_softmax_like(ctx, SoftmaxKind::kLogSoftmax); });
  t.add("Hardmax",
        [](RefKernelContext& ctx) { return run_softmax_like(ctx, SoftmaxKind::kHardmax); });
  t.add("NegativeLogLikelihoodLoss", run_nll_loss);
  t.add("SoftmaxCrossEntropyLoss", run_softmax_cross_entropy_loss);
}

}  // namespace tessera::ref
