// Vectorized float math over an ISA policy S (see isa_avx512.cc for the interface): exp, expm1,
// log, tanh, sigmoid, erf, pow. Accurate to a few ulp (about 1e-7 relative; native_test checks
// them against std::). Cephes-style range reduction plus polynomials.
//
// Only templates here (and in the other simd_*.h): each ISA file includes this after its
// `#pragma GCC target`, so every instantiation is compiled for that ISA, and instantiations over
// an ISA type with internal linkage never collide across files. A non-template inline function
// would be one symbol for all ISA files, compiled for whichever ISA the linker keeps. Include no
// standard header from here.
#pragma once

namespace tessera::native::simd {

// Horner: c[0] * x^(n-1) + ... + c[n-1].
template <class S, int N>
typename S::V polynomial(typename S::V x, const float (&c)[N]) {
  typename S::V p = S::set1(c[0]);
  for (int i = 1; i < N; ++i) p = S::fma(p, x, S::set1(c[i]));
  return p;
}

// e^x: x = n ln2 + r with |r| <= ln2 / 2, e^r by a degree-7 polynomial, then times 2^n.
template <class S>
typename S::V exp(typename S::V x) {
  using V = typename S::V;
  static constexpr float kP[] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                 4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
  // Clamped so that n stays within what ldexp takes; S::max/min(bound, x) keep NaN.
  x = S::max(S::set1(-104.0f), S::min(S::set1(88.8f), x));
  const V n = S::round(S::mul(x, S::set1(1.44269504088896341f)));
  V r = S::fma(n, S::set1(-0.693359375f), x);
  r = S::fma(n, S::set1(2.12194440e-4f), r);
  const V p = polynomial<S>(r, kP);
  const V y = S::add(S::fma(p, S::mul(r, r), r), S::set1(1.0f));
  return S::ldexp(y, n);
}

// e^x - 1, accurate near 0 (Elu's negative side).
template <class S>
typename S::V expm1(typename S::V x) {
  using V = typename S::V;
  // Taylor to x^10 / 10! for |x| < 0.5 (error below 3e-10 relative there).
  static constexpr float kT[] = {1.0f / 3628800, 1.0f / 362880, 1.0f / 40320, 1.0f / 5040,
                                 1.0f / 720,     1.0f / 120,    1.0f / 24,    1.0f / 6,
                                 0.5f,           1.0f};
  const V small = S::mul(polynomial<S>(x, kT), x);
  const V large = S::sub(exp<S>(x), S::set1(1.0f));
  return S::select(S::lt(S::abs(x), S::set1(0.5f)), small, large);
}

// ln x: x = m 2^e with m in [sqrt(1/2), sqrt(2)), ln(1 + f) by a polynomial, plus e ln2.
template <class S>
typename S::V log(typename S::V x) {
  using V = typename S::V;
  static constexpr float kP[] = {7.0376836292e-2f,  -1.1514610310e-1f, 1.1676998740e-1f,
                                 -1.2420140846e-1f, 1.4249322787e-1f,  -1.6668057665e-1f,
                                 2.0000714765e-1f,  -2.4999993993e-1f, 3.3333331174e-1f};
  V m, e;
  S::frexp(x, m, e);  // m in [0.5, 1)
  const auto low = S::lt(m, S::set1(0.707106781186547524f));
  e = S::select(low, S::sub(e, S::set1(1.0f)), e);
  const V f = S::sub(S::select(low, S::add(m, m), m), S::set1(1.0f));
  const V z = S::mul(f, f);
  V y = S::mul(S::mul(polynomial<S>(f, kP), f), z);
  y = S::fma(e, S::set1(-2.12194440e-4f), y);
  y = S::fma(z, S::set1(-0.5f), y);
  V r = S::add(f, y);
  r = S::fma(e, S::set1(0.693359375f), r);
  const V zero = S::zero();
  r = S::select(S::mor(S::lt(x, zero), S::isnan(x)), S::set1(__builtin_nanf("")), r);
  r = S::select(S::eq(x, zero), S::set1(-__builtin_inff()), r);
  return S::select(S::eq(x, S::set1(__builtin_inff())), x, r);
}

// tanh: an odd polynomial for |x| < 0.625, else 1 - 2 / (e^{2|x|} + 1) with x's sign.
template <class S>
typename S::V tanh(typename S::V x) {
  using V = typename S::V;
  static constexpr float kP[] = {-5.70498872745e-3f, 2.06390887954e-2f, -5.37397155531e-2f,
                                 1.33314422036e-1f, -3.33332819422e-1f};
  const V ax = S::abs(x);
  const V z = S::mul(x, x);
  const V small = S::fma(S::mul(polynomial<S>(z, kP), z), x, x);
  const V t = exp<S>(S::add(ax, ax));
  const V one = S::set1(1.0f);
  const V large = S::sub(one, S::div(S::set1(2.0f), S::add(t, one)));
  return S::select(S::lt(ax, S::set1(0.625f)), small, S::copysign(large, x));
}

// 1 / (1 + e^-x), as e^x / (1 + e^x) for negative x so that it never overflows (like ref).
template <class S>
typename S::V sigmoid(typename S::V x) {
  using V = typename S::V;
  const V one = S::set1(1.0f);
  const V e = exp<S>(S::neg(S::abs(x)));
  const V num = S::select(S::le(S::zero(), x), one, e);
  return S::div(num, S::add(one, e));
}

// erf: its Taylor series for |x| < 1 (to x^23, error < 2e-9), Abramowitz-Stegun 7.1.26 beyond
// (absolute error < 1.5e-7, where erf > 0.84).
template <class S>
typename S::V erf(typename S::V x) {
  using V = typename S::V;
  // 2/sqrt(pi) * (-1)^n / (n! (2n + 1)) for n = 11 down to 0.
  static constexpr float k = 1.1283791670955126f;
  static constexpr float kT[] = {-k / (39916800.0f * 23),
                                 k / (3628800.0f * 21),
                                 -k / (362880.0f * 19),
                                 k / (40320.0f * 17),
                                 -k / (5040.0f * 15),
                                 k / (720.0f * 13),
                                 -k / (120.0f * 11),
                                 k / (24.0f * 9),
                                 -k / (6.0f * 7),
                                 k / (2.0f * 5),
                                 -k / 3,
                                 k};
  static constexpr float kA[] = {1.061405429f,  -1.453152027f, 1.421413741f,
                                 -0.284496736f, 0.254829592f,  0.0f};
  const V ax = S::abs(x);
  const V z = S::mul(x, x);
  const V small = S::mul(polynomial<S>(z, kT), x);
  const V one = S::set1(1.0f);
  const V t = S::div(one, S::fma(S::set1(0.3275911f), ax, one));
  const V tail = S::mul(polynomial<S>(t, kA), exp<S>(S::neg(z)));
  const V large = S::copysign(S::sub(one, tail), x);
  return S::select(S::lt(ax, one), small, large);
}

// a^b for float a, b with the C library's special cases for negative and zero bases.
template <class S>
typename S::V pow(typename S::V a, typename S::V b) {
  using V = typename S::V;
  const V one = S::set1(1.0f);
  V r = exp<S>(S::mul(b, log<S>(S::abs(a))));
  const V half = S::mul(b, S::set1(0.5f));
  const auto integral = S::eq(S::round(b), b);
  const auto odd = S::mand(integral, S::neq(S::round(half), half));
  // A negative base (or -0) with an odd exponent flips the sign; a non-integral one gives NaN.
  r = S::select(odd, S::copysign(r, a), r);
  r = S::select(S::mandnot(integral, S::lt(a, S::zero())), S::set1(__builtin_nanf("")), r);
  return S::select(S::mor(S::eq(b, S::zero()), S::eq(a, one)), one, r);
}

}  // namespace tessera::native::simd
