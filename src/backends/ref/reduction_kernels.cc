// Reference kernels: Reduce*, ArgMax/ArgMin, CumSum, TopK. Registers the whole reduction family.
#include "backends/ref/reduction_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

namespace tessera {
namespace {

using ref::AxisSplit;
using ref::element_from_double;
using ref::is_nan_value;
using ref::kIsFloatElement;
using ref::split_at_axis;

// ---------------------------------------------------------------------------------------------
// Reduce*

enum class ReduceOp { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

// What a reduction does: the output dims and, per input axis, the stride into the output
// (0 on reduced axes), so that input element i accumulates into output offset sum(idx*stride).
struct ReducePlan {
  bool noop = false;              // empty axes with noop_with_empty_axes: output = input
  std::vector<int64_t> out_dims;  // keepdims applied
  std::vector<int64_t> out_strides;
  int64_t count = 1;  // input elements per output element
};

Result<ReducePlan> plan_reduce(const RefKernelContext& ctx, const Tensor& in) {
  const Node& node = ctx.node();
  const bool axes_from_input =
      node.opset >= 18 || (node.op_type == "ReduceSum" && node.opset >= 13);
  const bool keepdims = node.attr_int("keepdims", 1) != 0;
  const int rank = in.rank();
  ReducePlan plan;
  std::vector<int64_t> axes;
  if (axes_from_input) {
    if (ctx.has_input(1)) {
      const Tensor& t = *ctx.input(1);
      if (!dtype_is_integer(t.dtype())) return ctx.error("axes must be an integer tensor");
      axes = t.to_int64_vector();
    }
    if (axes.empty() && node.attr_int("noop_with_empty_axes", 0) != 0) {
      plan.noop = true;
      plan.out_dims = in.dims();
      return plan;
    }
  } else {
    if (ctx.has_input(1)) return ctx.error("axes input needs ReduceSum opset >= 13 or opset 18");
    axes = node.attr_ints("axes");
  }
  std::vector<bool> reduced(rank, axes.empty());
  for (int64_t a : axes) {
    int64_t axis = a < 0 ? a + rank : a;
    if (axis < 0 || axis >= rank) {
      return ctx.error("axis " + std::to_string(a) + " out of range for rank " +
                       std::to_string(rank));
    }
    if (reduced[axis]) return ctx.error("axis " + std::to_string(a) + " repeated");
    reduced[axis] = true;
  }
  std::vector<int64_t> kept_dims(rank);  // output dims as if keepdims were set
  for (int d = 0; d < rank; ++d) {
    kept_dims[d] = reduced[d] ? 1 : in.dims()[d];
    if (reduced[d]) plan.count *= in.dims()[d];
    if (!reduced[d] || keepdims) plan.out_dims.push_back(kept_dims[d]);
  }
  plan.out_strides = ref::row_major_strides(kept_dims);
  for (int d = 0; d < rank; ++d) {
    if (reduced[d]) plan.out_strides[d] = 0;
  }
  return plan;
}

// Calls fn(input_offset, output_offset) for every input element.
template <typename F>
void for_each_reduced(const Tensor& in, const ReducePlan& plan, F&& fn) {
  ref::for_each_broadcast(in.dims(), {plan.out_strides},
                          [&](int64_t i, const std::vector<int64_t>& off) { fn(i, off[0]); });
}

// Float element types: accumulate in double.
template <typename T>
void reduce_float(ReduceOp op, const Tensor& in, const ReducePlan& plan, Tensor& out) {
  const T* x = in.data<T>();
  T* y = out.data<T>();
  const int64_t n_out = out.numel();
  const double inf = std::numeric_limits<double>::infinity();
  double init = 0;
  if (op == ReduceOp::kProd) init = 1;
  if (op == ReduceOp::kMax || op == ReduceOp::kLogSumExp) init = -inf;
  if (op == ReduceOp::kMin) init = inf;
  std::vector<double> acc(n_out, init);
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kMean:
    case ReduceOp::kLogSum:
      for_each_reduced(in, plan,
                       [&](int64_t i, int64_t o) { acc[o] += static_cast<double>(x[i]); });
      break;
    case ReduceOp::kProd:
      for_each_reduced(in, plan,
                       [&](int64_t i, int64_t o) { acc[o] *= static_cast<double>(x[i]); });
      break;
    case ReduceOp::kL1:
      for_each_reduced(
          in, plan, [&](int64_t i, int64_t o) { acc[o] += std::fabs(static_cast<double>(x[i])); });
      break;
    case ReduceOp::kL2:
    case ReduceOp::kSumSquare:
      for_each_reduced(in, plan, [&](int64_t i, int64_t o) {
        double v = static_cast<double>(x[i]);
        acc[o] += v * v;
      });
      break;
    case ReduceOp::kMax:
    case ReduceOp::kMin:
    case ReduceOp::kLogSumExp: {
      // NaN propagates: once a NaN is taken, no comparison replaces it.
      const bool is_min = op == ReduceOp::kMin;
      for_each_reduced(in, plan, [&](int64_t i, int64_t o) {
        double v = static_cast<double>(x[i]);
        if (std::isnan(v) || (is_min ? v < acc[o] : v > acc[o])) acc[o] = v;
      });
      if (op != ReduceOp::kLogSumExp) break;
      // log(sum(exp(x - max))) + max, stable for large inputs.
      std::vector<double> sums(n_out, 0);
      for_each_reduced(in, plan, [&](int64_t i, int64_t o) {
        if (std::isfinite(acc[o])) sums[o] += std::exp(static_cast<double>(x[i]) - acc[o]);
      });
      for (int64_t o = 0; o < n_out; ++o) {
        if (std::isfinite(acc[o])) acc[o] += std::log(sums[o]);
      }
      break;
    }
  }
  for (int64_t o = 0; o < n_out; ++o) {
    double v = acc[o];
    if (op == ReduceOp::kMean) v /= static_cast<double>(plan.count);  // 0/0 = NaN when empty
    if (op == ReduceOp::kL2) v = std::sqrt(v);
    if (op == ReduceOp::kLogSum) v = std::log(v);
    y[o] = element_from_double<T>(v);
  }
}

// Integer element types: sums and products wrap around in 64 bits (never undefined behaviour);
// max/min compare exactly; L2 and the logarithms go through double and truncate.
template <typename T>
void reduce_integer(ReduceOp op, const Tensor& in, const ReducePlan& plan, Tensor& out) {
  const T* x = in.data<T>();
  T* y = out.data<T>();
  const int64_t n_out = out.numel();
  if (op == ReduceOp::kMax || op == ReduceOp::kMin) {
    const bool is_min = op == ReduceOp::kMin;
    std::vector<T> acc(n_out,
                       is_min ? std::numeric_limits<T>::max() : std::numeric_limits<T>::lowest());
    for_each_reduced(in, plan, [&](int64_t i, int64_t o) {
      if (is_min ? x[i] < acc[o] : x[i] > acc[o]) acc[o] = x[i];
    });
    std::copy(acc.begin(), acc.end(), y);
    return;
  }
  if (op == ReduceOp::kL2 || op == ReduceOp::kLogSum || op == ReduceOp::kLogSumExp) {
    Tensor as_double(DType::kFloat64, out.dims());
    Result<Tensor> in_double = in.cast(DType::kFloat64);
    TESSERA_CHECK(in_double.ok(), "integer to double cast");
    reduce_float<double>(op, *in_double, plan, as_double);
    const double* v = as_double.data<double>();
    for (int64_t o = 0; o < n_out; ++o) y[o] = element_from_double<T>(v[o]);
    return;
  }
  // Two's complement arithmetic in uint64 gives the wrapped result for every width.
  const uint64_t init = op == ReduceOp::kProd ? 1 : 0;
  std::vector<uint64_t> acc(n_out, init);
  for_each_reduced(in, plan, [&](int64_t i, int64_t o) {
    uint64_t v = static_cast<uint64_t>(x[i]);
    switch (op) {
      case ReduceOp::kProd: acc[o] *= v; break;
      case ReduceOp::kSumSquare: acc[o] += v * v; break;
      case ReduceOp::kL1:
        if constexpr (std::is_signed_v<T>) {
          if (x[i] < 0) v = uint64_t(0) - v;
        }
        acc[o] += v;
        break;
      default: acc[o] += v; break;  // kSum, kMean
    }
  });
  for (int64_t o = 0; o < n_out; ++o) {
    if (op == ReduceOp::kMean) {
      if (plan.count == 0) {
        y[o] = T(0);
      } else if constexpr (std::is_signed_v<T>) {
        y[o] = static_cast<T>(static_cast<int64_t>(acc[o]) / plan.count);
      } else {
        y[o] = static_cast<T>(acc[o] / static_cast<uint64_t>(plan.count));
      }
    } else {
      y[o] = static_cast<T>(acc[o]);
    }
  }
}

Status run_reduce(RefKernelContext& ctx, ReduceOp op) {
  const Tensor* in = ctx.input(0);
  if (!in) return ctx.error("missing input");
  TESSERA_ASSIGN_OR_RETURN(ReducePlan plan, plan_reduce(ctx, *in));
  if (in->dtype() == DType::kBool || in->dtype() == DType::kString) {
    return ctx.unsupported(std::string("dtype ") + dtype_name(in->dtype()));
  }
  Tensor& out = ctx.output(0, in->dtype(), plan.out_dims);
  if (plan.noop) {
    if (in->nbytes() > 0) std::memcpy(out.raw_data(), in->raw_data(), in->nbytes());
    return Status();
  }
  bool known = visit_numeric_dtype(in->dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (kIsFloatElement<T>) {
      reduce_float<T>(op, *in, plan, out);
    } else if constexpr (!std::is_same_v<T, bool>) {
      reduce_integer<T>(op, *in, plan, out);
    }
  });
  if (!known) return ctx.unsupported(std::string("dtype ") + dtype_name(in->dtype()));
  return Status();
}

// ---------------------------------------------------------------------------------------------
// ArgMax / ArgMin

template <typename T>
void arg_reduce(const T* x, const AxisSplit& s, bool is_max, bool select_last, int64_t* y) {
  using C = ref::compute_t<T>;
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t i = 0; i < s.inner; ++i) {
      const T* row = x + o * s.length * s.inner + i;
      int64_t best_index = 0;
      C best = static_cast<C>(row[0]);
      for (int64_t k = 1; k < s.length; ++k) {
        C v = static_cast<C>(row[k * s.inner]);
        bool take;
        // A NaN wins (like numpy), the first one unless select_last_index.
        if (is_nan_value(v)) {
          take = !is_nan_value(best) || select_last;
        } else if (is_nan_value(best)) {
          take = false;
        } else if (is_max) {
          take = select_last ? v >= best : v > best;
        } else {
          take = select_last ? v <= best : v < best;
        }
        if (take) {
          best = v;
          best_index = k;
        }
      }
      y[o * s.inner + i] = best_index;
    }
  }
}

Status run_arg_reduce(RefKernelContext& ctx, bool is_max) {
  const Tensor* in = ctx.input(0);
  if (!in) return ctx.error("missing input");
  const Node& node = ctx.node();
  if (in->rank() == 0) return ctx.error("input must have rank >= 1");
  TESSERA_ASSIGN_OR_RETURN(int axis, ref::kernel_axis(ctx, node.attr_int("axis", 0), in->rank()));
  const bool keepdims = node.attr_int("keepdims", 1) != 0;
  const bool select_last = node.attr_int("select_last_index", 0) != 0;
  const AxisSplit s = split_at_axis(in->dims(), axis);
  if (s.length == 0) return ctx.error("cannot take an arg-reduction over an empty axis");
  std::vector<int64_t> dims = in->dims();
  if (keepdims) {
    dims[axis] = 1;
  } else {
    dims.erase(dims.begin() + axis);
  }
  Tensor& out = ctx.output(0, DType::kInt64, dims);
  bool known = visit_numeric_dtype(in->dtype(), [&](auto tag) {
    using T = decltype(tag);
    arg_reduce<T>(in->data<T>(), s, is_max, select_last, out.data<int64_t>());
  });
  if (!known) return ctx.unsupported(std::string("dtype ") + dtype_name(in->dtype()));
  return Status();
}

// ---------------------------------------------------------------------------------------------
// CumSum

template <typename T>
void cum_sum(const T* x, const AxisSplit& s, bool exclusive, bool reverse, T* y) {
  using Acc = std::conditional_t<kIsFloatElement<T>, double, uint64_t>;  // ints wrap
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t i = 0; i < s.inner; ++i) {
      const int64_t base = o * s.length * s.inner + i;
      Acc acc = 0;
      for (int64_t step = 0; step < s.length; ++step) {
        const int64_t k = reverse ? s.length - 1 - step : step;
        const int64_t at = base + k * s.inner;
        const Acc v = static_cast<Acc>(x[at]);
        if (!exclusive) acc += v;
        if constexpr (kIsFloatElement<T>) {
          y[at] = element_from_double<T>(acc);
        } else {
          y[at] = static_cast<T>(acc);
        }
        if (exclusive) acc += v;
      }
    }
  }
}

Status run_cum_sum(RefKernelContext& ctx) {
  const Tensor* in = ctx.input(0);
  const Tensor* axis_tensor = ctx.input(1);
  if (!in || !axis_tensor) return ctx.error("CumSum needs inputs x and axis");
  if (!dtype_is_integer(axis_tensor->dtype()) || axis_tensor->numel() != 1) {
    return ctx.error("axis must be one integer");
  }
  if (in->rank() == 0) return ctx.error("input must have rank >= 1");
  TESSERA_ASSIGN_OR_RETURN(int axis, ref::kernel_axis(ctx, axis_tensor->as_int64(0), in->rank()));
  const bool exclusive = ctx.node().attr_int("exclusive", 0) != 0;
  const bool reverse = ctx.node().attr_int("reverse", 0) != 0;
  if (in->dtype() == DType::kBool) return ctx.unsupported("dtype bool");
  Tensor& out = ctx.output(0, in->dtype(), in->dims());
  const AxisSplit s = split_at_axis(in->dims(), axis);
  bool known = visit_numeric_dtype(in->dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      cum_sum<T>(in->data<T>(), s, exclusive, reverse, out.data<T>());
    }
  });
  if (!known) return ctx.unsupported(std::string("dtype ") + dtype_name(in->dtype()));
  return Status();
}

// ---------------------------------------------------------------------------------------------
// TopK

template <typename T>
void top_k(const T* x, const AxisSplit& s, int64_t k, bool largest, T* values, int64_t* indices) {
  using C = ref::compute_t<T>;
  // Strict weak order on values with NaN above everything.
  auto less = [](C a, C b) { return !is_nan_value(a) && (is_nan_value(b) || a < b); };
  std::vector<int64_t> order(s.length);
  std::vector<C> row(s.length);
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t i = 0; i < s.inner; ++i) {
      const int64_t base = o * s.length * s.inner + i;
      for (int64_t j = 0; j < s.length; ++j) row[j] = static_cast<C>(x[base + j * s.inner]);
      std::iota(order.begin(), order.end(), int64_t{0});
      // Ties keep the lower index first, as ONNX specifies.
      auto before = [&](int64_t a, int64_t b) {
        const bool a_first = largest ? less(row[b], row[a]) : less(row[a], row[b]);
        const bool b_first = largest ? less(row[a], row[b]) : less(row[b], row[a]);
        return a_first || (!b_first && a < b);
      };
      std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
      const int64_t out_base = o * k * s.inner + i;
      for (int64_t j = 0; j < k; ++j) {
        values[out_base + j * s.inner] = x[base + order[j] * s.inner];
        indices[out_base + j * s.inner] = order[j];
      }
    }
  }
}

Status run_top_k(RefKernelContext& ctx) {
  const Tensor* in = ctx.input(0);
  if (!in) return ctx.error("missing input");
  const Node& node = ctx.node();
  int64_t k = 0;
  if (node.opset < 10) {
    if (!node.has_attr("k")) return ctx.error("attribute k missing");
    k = node.attr_int("k", 0);
  } else {
    const Tensor* k_tensor = ctx.input(1);
    if (!k_tensor) return ctx.error("input K missing");
    if (!dtype_is_integer(k_tensor->dtype()) || k_tensor->numel() != 1) {
      return ctx.error("K must be one integer");
    }
    k = k_tensor->as_int64(0);
  }
  if (in->rank() == 0) return ctx.error("input must have rank >= 1");
  TESSERA_ASSIGN_OR_RETURN(int axis, ref::kernel_axis(ctx, node.attr_int("axis", -1), in->rank()));
  const AxisSplit s = split_at_axis(in->dims(), axis);
  if (k < 0 || k > s.length) {
    return ctx.error("k " + std::to_string(k) + " out of range for axis size " +
                     std::to_string(s.length));
  }
  const bool largest = node.opset < 11 || node.attr_int("largest", 1) != 0;
  // sorted=0 allows any order; the sorted order is one of them.
  if (in->dtype() == DType::kBool || in->dtype() == DType::kString) {
    return ctx.unsupported(std::string("dtype ") + dtype_name(in->dtype()));
  }
  std::vector<int64_t> dims = in->dims();
  dims[axis] = k;
  Tensor& values = ctx.output(0, in->dtype(), dims);
  Tensor& indices = ctx.output(1, DType::kInt64, dims);
  bool known = visit_numeric_dtype(in->dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      top_k<T>(in->data<T>(), s, k, largest, values.data<T>(), indices.data<int64_t>());
    }
  });
  if (!known) return ctx.unsupported(std::string("dtype ") + dtype_name(in->dtype()));
  return Status();
}

}  // namespace

void register_reduction_kernels(RefKernelTable& t) {
  const std::pair<const char*, ReduceOp> reduces[] = {
      {"ReduceSum", ReduceOp::kSum},
      {"ReduceMean", ReduceOp::kMean},
      {"ReduceMax", ReduceOp::kMax},
      {"ReduceMin", ReduceOp::kMin},
      {"ReduceProd", ReduceOp::kProd},
      {"ReduceL1", ReduceOp::kL1},
      {"ReduceL2", ReduceOp::kL2},
      {"ReduceLogSum", ReduceOp::kLogSum},
      {"ReduceLogSumExp", ReduceOp::kLogSumExp},
      {"ReduceSumSquare", ReduceOp::kSumSquare},
  };
  for (const auto& [name, op] : reduces) {
    const ReduceOp reduce_op = op;
    t.add(name, [reduce_op](RefKernelContext& ctx) { return run_reduce(ctx, reduce_op); });
  }
  t.add("ArgMax", [](RefKernelContext& ctx) { return run_arg_reduce(ctx, true); });
  t.add("ArgMin", [](RefKernelContext& ctx) { return run_arg_reduce(ctx, false); });
  t.add("CumSum", run_cum_sum);
  t.add("TopK", run_top_k);
  ref::register_reduction_softmax_kernels(t);
  ref::register_reduction_linalg_kernels(t);
}

}  // namespace tessera
