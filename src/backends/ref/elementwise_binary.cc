// Binary and variadic kernels with numpy broadcasting, through the one broadcasting engine:
// arithmetic, Pow, Mod, comparisons, logic, BitShift, Max/Min/Sum/Mean, Where, Clip, PRelu.
#include <cmath>
#include <limits>
#include <string>

#include "backends/ref/elementwise_kernels.h"

namespace tessera::ref {
namespace {

// The dims to broadcast input B with. Before opset 7, binary ops broadcast only with the
// attribute broadcast=1, and then B's dims align with A's starting at `axis` (default: suffix).
Result<std::vector<int64_t>> second_operand_dims(const RefKernelContext& ctx, const Tensor& a,
                                                 const Tensor& b) {
  const Node& node = ctx.node();
  if (node.opset >= 7 || node.attr_int("broadcast", 0) == 0) return b.dims();
  int rank_a = a.rank(), rank_b = b.rank();
  if (rank_b > rank_a) return ctx.error("legacy broadcast: B has higher rank than A");
  int64_t axis = node.attr_int("axis", rank_a - rank_b);
  if (axis < 0) axis += rank_a;
  if (axis < 0 || axis + rank_b > rank_a) {
    return ctx.error("legacy broadcast axis " + std::to_string(node.attr_int("axis", 0)) +
                     " out of range");
  }
  std::vector<int64_t> dims(rank_a, 1);
  for (int i = 0; i < rank_b; ++i) {
    int64_t d = b.dims()[i];
    if (d != 1 && d != a.dims()[axis + i]) return ctx.error("legacy broadcast: shapes mismatch");
    dims[axis + i] = d;
  }
  return dims;
}

Status check_same_dtype(const RefKernelContext& ctx, const Tensor& a, const Tensor& b) {
  if (a.dtype() == b.dtype()) return Status();
  return ctx.error(std::string("input dtypes differ: ") + dtype_name(a.dtype()) + " and " +
                   dtype_name(b.dtype()));
}

// Output 0 = f(input 0, input 1) with broadcasting; both inputs of one dtype in Set. The output
// dtype is bool when BoolOut, else the input dtype.
template <unsigned Set, bool BoolOut, typename F>
Status binary_kernel(RefKernelContext& ctx, F f) {
  const Tensor* a = ctx.input(0);
  const Tensor* b = ctx.input(1);
  if (!a || !b) return ctx.error("expects two inputs");
  TESSERA_RETURN_IF_ERROR(check_same_dtype(ctx, *a, *b));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> b_dims, second_operand_dims(ctx, *a, *b));
  Status st;
  bool ok = visit_dtypes<Set>(a->dtype(), [&](auto tag) {
    using T = decltype(tag);
    using Out = std::conditional_t<BoolOut, bool, T>;
    st = broadcast_binary<T, T, Out>(ctx, *a, *b, b_dims, f);
  });
  if (!ok) return ctx.unsupported(std::string("input dtype ") + dtype_name(a->dtype()));
  return st;
}

template <unsigned Set, bool BoolOut, typename F>
void add_binary(RefKernelTable& t, const char* name, F f) {
  t.add(name, [f](RefKernelContext& ctx) { return binary_kernel<Set, BoolOut>(ctx, f); });
}

// Integer division and modulo by zero are errors (they are undefined behaviour in C++).
Status check_no_integer_zero(const RefKernelContext& ctx, const Tensor& divisor) {
  if (!dtype_is_integer(divisor.dtype())) return Status();
  for (int64_t i = 0, n = divisor.numel(); i < n; ++i) {
    if (divisor.as_int64(i) == 0) return ctx.error("integer division by zero");
  }
  return Status();
}

// NaN-propagating max / min (like numpy's maximum / minimum).
template <typename C>
C max_nan(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<C>::quiet_NaN();
  }
  return a < b ? b : a;
}
template <typename C>
C min_nan(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<C>::quiet_NaN();
  }
  return b < a ? b : a;
}

// base^exponent for integers, wrapping on overflow; negative exponents truncate 1/base^-e.
template <typename A, typename B>
A integer_pow(A base, B exponent) {
  if constexpr (std::is_signed_v<B>) {
    if (exponent < 0) {
      if (base == 1) return 1;
      if constexpr (std::is_signed_v<A>) {
        if (base == -1) return (exponent % 2 == 0) ? A(1) : A(-1);
      }
      return 0;
    }
  }
  A result = 1;
  A square = base;
  auto e = static_cast<std::make_unsigned_t<B>>(exponent);
  while (e != 0) {
    if (e & 1u) result = wrapping_mul(result, square);
    square = wrapping_mul(square, square);
    e >>= 1;
  }
  return result;
}

Status pow_kernel(RefKernelContext& ctx) {
  const Tensor* a = ctx.input(0);
  const Tensor* b = ctx.input(1);
  if (!a || !b) return ctx.error("expects two inputs");
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> b_dims, second_operand_dims(ctx, *a, *b));
  Status st;
  bool ok_exponent = true;
  bool ok = visit_dtypes<kSetNumeric>(a->dtype(), [&](auto base_tag) {
    using A = decltype(base_tag);
    ok_exponent = visit_dtypes<kSetNumeric>(b->dtype(), [&](auto exponent_tag) {
      using B = decltype(exponent_tag);
      st = broadcast_binary<A, B, A>(ctx, *a, *b, b_dims, [](auto x, auto y) {
        if constexpr (std::is_integral_v<decltype(x)> && std::is_integral_v<decltype(y)>) {
          return integer_pow(x, y);
        } else {
          return std::pow(static_cast<double>(x), static_cast<double>(y));
        }
      });
    });
  });
  if (!ok || !ok_exponent) {
    return ctx.unsupported(std::string("dtypes ") + dtype_name(a->dtype()) + " ^ " +
                           dtype_name(b->dtype()));
  }
  return st;
}

void register_arithmetic(RefKernelTable& t) {
  add_binary<kSetNumeric, false>(t, "Add", [](auto x, auto y) { return wrapping_add(x, y); });
  add_binary<kSetNumeric, false>(t, "Sub", [](auto x, auto y) { return wrapping_sub(x, y); });
  add_binary<kSetNumeric, false>(t, "Mul", [](auto x, auto y) { return wrapping_mul(x, y); });
  t.add("Div", [](RefKernelContext& ctx) {
    if (ctx.has_input(1)) TESSERA_RETURN_IF_ERROR(check_no_integer_zero(ctx, *ctx.input(1)));
    return binary_kernel<kSetNumeric, false>(ctx, [](auto x, auto y) {
      using C = decltype(x);
      if constexpr (std::is_integral_v<C> && std::is_signed_v<C>) {
        if (y == C(-1)) return wrapping_sub(C(0), x);  // INT_MIN / -1 wraps
      }
      return static_cast<C>(x / y);  // integers truncate toward zero, like C
    });
  });
  t.add("Mod", [](RefKernelContext& ctx) {
    if (ctx.has_input(1)) TESSERA_RETURN_IF_ERROR(check_no_integer_zero(ctx, *ctx.input(1)));
    int64_t fmod = ctx.node().attr_int("fmod", 0);
    if (fmod != 0 && fmod != 1) return ctx.error("fmod must be 0 or 1");
    if (fmod == 1) {
      return binary_kernel<kSetNumeric, false>(ctx, [](auto x, auto y) { return mod_trunc(x, y); });
    }
    return binary_kernel<kSetNumeric, false>(ctx, [](auto x, auto y) { return mod_floor(x, y); });
  });
  t.add("Pow", pow_kernel);
  t.add("BitShift", [](RefKernelContext& ctx) {
    std::string direction = ctx.node().attr_string("direction", "");
    if (direction != "LEFT" && direction != "RIGHT") {
      return ctx.error("direction must be LEFT or RIGHT, got '" + direction + "'");
    }
    bool left = direction == "LEFT";
    return binary_kernel<kSetUnsigned, false>(ctx, [left](auto x, auto y) {
      using C = decltype(x);
      if (y >= C(sizeof(C) * 8)) return C(0);
      auto wide = static_cast<uint64_t>(x);
      return static_cast<C>(left ? wide << y : wide >> y);
    });
  });
}

void register_comparison_and_logic(RefKernelTable& t) {
  add_binary<kSetAll, true>(t, "Equal", [](auto x, auto y) { return x == y; });
  add_binary<kSetNumeric, true>(t, "Less", [](auto x, auto y) { return x < y; });
  add_binary<kSetNumeric, true>(t, "Greater", [](auto x, auto y) { return x > y; });
  add_binary<kSetNumeric, true>(t, "LessOrEqual", [](auto x, auto y) { return x <= y; });
  add_binary<kSetNumeric, true>(t, "GreaterOrEqual", [](auto x, auto y) { return x >= y; });
  add_binary<kSetBool, true>(t, "And", [](bool x, bool y) { return x && y; });
  add_binary<kSetBool, true>(t, "Or", [](bool x, bool y) { return x || y; });
  add_binary<kSetBool, true>(t, "Xor", [](bool x, bool y) { return x != y; });
}

// Output 0 = finish(fold(...fold(in0, in1)..., inN-1), N) with all inputs broadcast together.
template <unsigned Set, typename Fold, typename Finish>
Status variadic_kernel(RefKernelContext& ctx, Fold fold, Finish finish) {
  int n = ctx.num_inputs();
  if (n < 1) return ctx.error("expects at least one input");
  std::vector<std::vector<int64_t>> shapes;
  for (int k = 0; k < n; ++k) {
    if (!ctx.has_input(k)) return ctx.error("input " + std::to_string(k) + " is missing");
    TESSERA_RETURN_IF_ERROR(check_same_dtype(ctx, *ctx.input(0), *ctx.input(k)));
    shapes.push_back(ctx.input(k)->dims());
  }
  auto plan = plan_broadcast(shapes);
  if (!plan.ok()) return ctx.error(plan.status().message());
  DType dtype = ctx.input(0)->dtype();
  bool ok = visit_dtypes<Set>(dtype, [&](auto tag) {
    using T = decltype(tag);
    std::vector<const T*> in;
    for (int k = 0; k < n; ++k) in.push_back(ctx.input(k)->template data<T>());
    T* out = ctx.output(0, dtype, plan->out_dims).template data<T>();
    run_broadcast(ctx, *plan, [&](int64_t i, const int64_t* off) {
      auto acc = to_compute(in[0][off[0]]);
      for (int k = 1; k < n; ++k) acc = fold(acc, to_compute(in[k][off[k]]));
      out[i] = from_compute<T>(finish(acc, n));
    });
  });
  if (!ok) return ctx.unsupported(std::string("input dtype ") + dtype_name(dtype));
  return Status();
}

void register_variadic(RefKernelTable& t) {
  auto keep = [](auto acc, int) { return acc; };
  t.add("Max", [keep](RefKernelContext& ctx) {
    return variadic_kernel<kSetNumeric>(
        ctx, [](auto a, auto b) { return max_nan(a, b); }, keep);
  });
  t.add("Min", [keep](RefKernelContext& ctx) {
    return variadic_kernel<kSetNumeric>(
        ctx, [](auto a, auto b) { return min_nan(a, b); }, keep);
  });
  t.add("Sum", [keep](RefKernelContext& ctx) {
    return variadic_kernel<kSetNumeric>(
        ctx, [](auto a, auto b) { return wrapping_add(a, b); }, keep);
  });
  t.add("Mean", [](RefKernelContext& ctx) {
    return variadic_kernel<kSetFloat>(
        ctx, [](auto a, auto b) { return a + b; },
        [](auto acc, int n) { return acc / static_cast<decltype(acc)>(n); });
  });
}

Status where_kernel(RefKernelContext& ctx) {
  const Tensor* cond = ctx.input(0);
  const Tensor* x = ctx.input(1);
  const Tensor* y = ctx.input(2);
  if (!cond || !x || !y) return ctx.error("expects three inputs");
  if (cond->dtype() != DType::kBool) return ctx.error("condition must be bool");
  TESSERA_RETURN_IF_ERROR(check_same_dtype(ctx, *x, *y));
  auto plan = plan_broadcast({cond->dims(), x->dims(), y->dims()});
  if (!plan.ok()) return ctx.error(plan.status().message());
  const bool* pc = cond->data<bool>();
  Tensor& out = ctx.output(0, x->dtype(), plan->out_dims);
  if (x->dtype() == DType::kString) {
    const auto& xs = x->strings();
    const auto& ys = y->strings();
    auto& os = out.strings();
    // Strings: serial, since string assignment may allocate.
    for_each_broadcast(plan->out_dims,
                       {broadcast_strides(cond->dims(), plan->out_dims),
                        broadcast_strides(x->dims(), plan->out_dims),
                        broadcast_strides(y->dims(), plan->out_dims)},
                       [&](int64_t i, const std::vector<int64_t>& off) {
                         os[i] = pc[off[0]] ? xs[off[1]] : ys[off[2]];
                       });
    return Status();
  }
  bool ok = visit_dtypes<kSetAll>(x->dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = x->data<T>();
    const T* py = y->data<T>();
    T* po = out.data<T>();
    run_broadcast(ctx, *plan, [&](int64_t i, const int64_t* off) {
      po[i] = pc[off[0]] ? px[off[1]] : py[off[2]];
    });
  });
  if (!ok) return ctx.unsupported(std::string("input dtype ") + dtype_name(x->dtype()));
  return Status();
}

// Clip: bounds are attributes before opset 11, optional scalar inputs from opset 11.
Status clip_kernel(RefKernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  if (!x) return ctx.error("missing input 0");
  const Node& node = ctx.node();
  const bool bounds_are_inputs = node.opset >= 11;
  for (int k = 1; k <= 2 && bounds_are_inputs; ++k) {
    const Tensor* bound = ctx.input(k);
    if (!bound) continue;
    if (bound->dtype() != x->dtype()) return ctx.error("min/max dtype differs from the input's");
    if (bound->numel() != 1) return ctx.error("min/max must be scalars");
  }
  bool ok = visit_dtypes<kSetNumeric>(x->dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    C lo = std::numeric_limits<C>::lowest();
    C hi = std::numeric_limits<C>::max();
    if (bounds_are_inputs) {
      if (ctx.has_input(1)) lo = to_compute(ctx.input(1)->template data<T>()[0]);
      if (ctx.has_input(2)) hi = to_compute(ctx.input(2)->template data<T>()[0]);
    } else {
      if (node.has_attr("min")) lo = static_cast<C>(node.attr_float("min", 0.0f));
      if (node.has_attr("max")) hi = static_cast<C>(node.attr_float("max", 0.0f));
    }
    Tensor& y = ctx.output(0, x->dtype(), x->dims());
    // max then min: when lo > hi every element becomes hi, as the spec says. NaN stays NaN.
    map_elements<T, T>(ctx, *x, y, [lo, hi](T v) {
      return from_compute<T>(std::min(std::max(to_compute(v), lo), hi));
    });
  });
  if (!ok) return ctx.unsupported(std::string("input dtype ") + dtype_name(x->dtype()));
  return Status();
}

// PRelu: the slope broadcasts to X's shape (unidirectionally).
Status prelu_kernel(RefKernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  const Tensor* slope = ctx.input(1);
  if (!x || !slope) return ctx.error("expects two inputs");
  TESSERA_RETURN_IF_ERROR(check_same_dtype(ctx, *x, *slope));
  std::vector<int64_t> slope_dims = slope->dims();
  // Before opset 7 a 1-D slope of X.dim(1) elements is per channel (PyTorch's exports):
  // it becomes [C, 1, ..., 1].
  if (ctx.node().opset < 7 && slope->rank() == 1 && x->rank() >= 2 && slope->numel() > 1 &&
      slope->dims()[0] == x->dims()[1]) {
    slope_dims.assign(x->rank() - 1, 1);
    slope_dims[0] = slope->dims()[0];
  }
  auto plan = plan_broadcast({x->dims(), slope_dims});
  if (!plan.ok() || plan->out_dims != x->dims()) {
    return ctx.error("slope " + dims_to_string(slope_dims) + " does not broadcast to X " +
                     dims_to_string(x->dims()));
  }
  Status st;
  bool ok = visit_dtypes<kSetNumeric>(x->dtype(), [&](auto tag) {
    using T = decltype(tag);
    st = broadcast_binary<T, T, T>(ctx, *x, *slope, slope_dims, [](auto v, auto s) {
      using C = decltype(v);
      return v < C(0) ? wrapping_mul(v, s) : v;
    });
  });
  if (!ok) return ctx.unsupported(std::string("input dtype ") + dtype_name(x->dtype()));
  return st;
}

}  // namespace

void register_elementwise_binary_kernels(RefKernelTable& t) {
  register_arithmetic(t);
  register_comparison_and_logic(t);
  register_variadic(t);
  t.add("Where", where_kernel);
  t.add("Clip", clip_kernel);
  t.add("PRelu", prelu_kernel);
}

}  // namespace tessera::ref
