// Unary math and activation kernels: out[i] = f(in[i]), through unary_kernel.
#include <cmath>

#include "backends/ref/elementwise_kernels.h"

namespace tessera::ref {
namespace {

// Registers op `name` as out = f(in) for the dtypes in Set.
template <unsigned Set, typename F>
void add_unary(RefKernelTable& t, const char* name, F f) {
  t.add(name, [f](RefKernelContext& ctx) { return unary_kernel<Set>(ctx, f); });
}

// Round half to even, independent of the floating-point rounding mode.
template <typename C>
C round_half_even(C v) {
  C r = std::floor(v);
  C diff = v - r;  // exact; NaN for +-inf and NaN, which then pass through unchanged
  if (diff > C(0.5) || (diff == C(0.5) && std::fmod(r, C(2)) != 0)) r += C(1);
  return r;
}

template <typename C>
C sigmoid(C x) {
  if (x >= 0) return C(1) / (C(1) + std::exp(-x));
  C e = std::exp(x);
  return e / (C(1) + e);
}

// log(1 + exp(x)) without overflow for large x.
template <typename C>
C softplus(C x) {
  return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}

void register_math(RefKernelTable& t) {
  add_unary<kSetNumeric>(t, "Abs", [](auto x) {
    using C = decltype(x);
    if constexpr (std::is_unsigned_v<C>) {
      return x;
    } else if constexpr (std::is_integral_v<C>) {
      return x < 0 ? wrapping_sub(C(0), x) : x;
    } else {
      return std::fabs(x);
    }
  });
  add_unary<kSetFloat | kSetSigned>(t, "Neg", [](auto x) {
    using C = decltype(x);
    if constexpr (std::is_integral_v<C>) {
      return wrapping_sub(C(0), x);
    } else {
      return -x;
    }
  });
  add_unary<kSetNumeric>(t, "Sign", [](auto x) {
    using C = decltype(x);
    if constexpr (std::is_floating_point_v<C>) {
      if (std::isnan(x)) return x;
    }
    return static_cast<C>(static_cast<int>(x > C(0)) - static_cast<int>(x < C(0)));
  });
  add_unary<kSetFloat>(t, "Exp", [](auto x) { return std::exp(x); });
  add_unary<kSetFloat>(t, "Log", [](auto x) { return std::log(x); });
  add_unary<kSetFloat>(t, "Sqrt", [](auto x) { return std::sqrt(x); });
  add_unary<kSetFloat>(t, "Reciprocal", [](auto x) { return decltype(x)(1) / x; });
  add_unary<kSetFloat>(t, "Floor", [](auto x) { return std::floor(x); });
  add_unary<kSetFloat>(t, "Ceil", [](auto x) { return std::ceil(x); });
  add_unary<kSetFloat>(t, "Round", [](auto x) { return round_half_even(x); });
  add_unary<kSetFloat>(t, "Sin", [](auto x) { return std::sin(x); });
  add_unary<kSetFloat>(t, "Cos", [](auto x) { return std::cos(x); });
  add_unary<kSetFloat>(t, "Tan", [](auto x) { return std::tan(x); });
  add_unary<kSetFloat>(t, "Asin", [](auto x) { return std::asin(x); });
  add_unary<kSetFloat>(t, "Acos", [](auto x) { return std::acos(x); });
  add_unary<kSetFloat>(t, "Atan", [](auto x) { return std::atan(x); });
  add_unary<kSetFloat>(t, "Sinh", [](auto x) { return std::sinh(x); });
  add_unary<kSetFloat>(t, "Cosh", [](auto x) { return std::cosh(x); });
  add_unary<kSetFloat>(t, "Asinh", [](auto x) { return std::asinh(x); });
  add_unary<kSetFloat>(t, "Acosh", [](auto x) { return std::acosh(x); });
  add_unary<kSetFloat>(t, "Atanh", [](auto x) { return std::atanh(x); });
  add_unary<kSetFloat>(t, "Erf", [](auto x) { return std::erf(x); });
  add_unary<kSetFloat>(t, "Tanh", [](auto x) { return std::tanh(x); });
  add_unary<kSetBool>(t, "Not", [](bool x) { return !x; });
}

void register_activations(RefKernelTable& t) {
  add_unary<kSetFloat>(t, "Sigmoid", [](auto x) { return sigmoid(x); });
  add_unary<kSetFloat | kSetSigned>(t, "Relu", [](auto x) {
    using C = decltype(x);
    return x < C(0) ? C(0) : x;  // NaN stays NaN
  });
  add_unary<kSetFloat>(t, "Softplus", [](auto x) { return softplus(x); });
  add_unary<kSetFloat>(t, "Softsign", [](auto x) { return x / (decltype(x)(1) + std::fabs(x)); });
  add_unary<kSetFloat>(t, "Mish", [](auto x) { return x * std::tanh(softplus(x)); });
  add_unary<kSetFloat>(t, "HardSwish", [](auto x) {
    using C = decltype(x);
    return x * std::max(C(0), std::min(C(1), x / C(6) + C(0.5)));
  });

  t.add("LeakyRelu", [](RefKernelContext& ctx) {
    float alpha = ctx.node().attr_float("alpha", 0.01f);
    return unary_kernel<kSetFloat>(ctx, [alpha](auto x) {
      using C = decltype(x);
      return x < C(0) ? C(alpha) * x : x;
    });
  });
  t.add("Elu", [](RefKernelContext& ctx) {
    float alpha = ctx.node().attr_float("alpha", 1.0f);
    return unary_kernel<kSetFloat>(ctx, [alpha](auto x) {
      using C = decltype(x);
      return x < C(0) ? C(alpha) * std::expm1(x) : x;
    });
  });
  t.add("Selu", [](RefKernelContext& ctx) {
    float alpha = ctx.node().attr_float("alpha", 1.67326319217681884765625f);
    float gamma = ctx.node().attr_float("gamma", 1.05070102214813232421875f);
    return unary_kernel<kSetFloat>(ctx, [alpha, gamma](auto x) {
      using C = decltype(x);
      return x > C(0) ? C(gamma) * x : C(gamma) * (C(alpha) * std::exp(x) - C(alpha));
    });
  });
  t.add("Celu", [](RefKernelContext& ctx) {
    float alpha = ctx.node().attr_float("alpha", 1.0f);
    if (alpha == 0.0f) return ctx.error("alpha must be non-zero");
    return unary_kernel<kSetFloat>(ctx, [alpha](auto x) {
      using C = decltype(x);
      return std::max(C(0), x) + std::min(C(0), C(alpha) * std::expm1(x / C(alpha)));
    });
  });
  t.add("HardSigmoid", [](RefKernelContext& ctx) {
    float alpha = ctx.node().attr_float("alpha", 0.2f);
    float beta = ctx.node().attr_float("beta", 0.5f);
    return unary_kernel<kSetFloat>(ctx, [alpha, beta](auto x) {
      using C = decltype(x);
      return std::max(C(0), std::min(C(1), C(alpha) * x + C(beta)));
    });
  });
  t.add("ThresholdedRelu", [](RefKernelContext& ctx) {
    float alpha = ctx.node().attr_float("alpha", 1.0f);
    return unary_kernel<kSetFloat>(ctx, [alpha](auto x) {
      using C = decltype(x);
      return x > C(alpha) ? x : C(0);
    });
  });
  t.add("Shrink", [](RefKernelContext& ctx) {
    double bias = ctx.node().attr_float("bias", 0.0f);
    double lambd = ctx.node().attr_float("lambd", 0.5f);
    return unary_kernel<kSetNumeric>(ctx, [bias, lambd](auto x) {
      using C = decltype(x);
      double v = static_cast<double>(x);
      double y = v < -lambd ? v + bias : (v > lambd ? v - bias : 0.0);
      return from_compute<C>(y);
    });
  });
}

}  // namespace

void register_elementwise_unary_kernels(RefKernelTable& t) {
  register_math(t);
  register_activations(t);
}

}  // namespace tessera::ref
