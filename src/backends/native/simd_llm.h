// Row kernels of the language-model ops over an ISA policy S: dot products and axpy for
// attention, RMS normalization, SiLU(gate) * up, GELU.
//
// Only templates, included by the ISA files after their target pragma (see simd_math.h).
#pragma once

namespace tessera::native::simd {

template <class S>
float dot(const float* a, const float* b, int64_t n) {
  using V = typename S::V;
  constexpr int W = S::W;
  V acc[4] = {S::zero(), S::zero(), S::zero(), S::zero()};
  int64_t i = 0;
  for (; i + 4 * W <= n; i += 4 * W)
    for (int j = 0; j < 4; ++j) acc[j] = S::fma(S::load(a + i + j * W), S::load(b + i + j * W), acc[j]);
  for (; i + W <= n; i += W) acc[0] = S::fma(S::load(a + i), S::load(b + i), acc[0]);
  if (i < n) {
    const int r = static_cast<int>(n - i);
    acc[1] = S::fma(S::load_n(a + i, r), S::load_n(b + i, r), acc[1]);
  }
  return S::hsum(S::add(S::add(acc[0], acc[1]), S::add(acc[2], acc[3])));
}

// y += a * x
template <class S>
void axpy(float a, const float* x, float* y, int64_t n) {
  constexpr int W = S::W;
  const typename S::V va = S::set1(a);
  int64_t i = 0;
  for (; i + W <= n; i += W) S::store(y + i, S::fma(va, S::load(x + i), S::load(y + i)));
  if (i < n) {
    const int r = static_cast<int>(n - i);
    S::store_n(y + i, S::fma(va, S::load_n(x + i, r), S::load_n(y + i, r)), r);
  }
}

// y = x / sqrt(mean(x^2) + eps) * w
template <class S>
void rms_norm_row(const float* x, const float* w, int64_t n, float eps, float* y) {
  constexpr int W = S::W;
  const float ss = dot<S>(x, x, n);
  const typename S::V scale = S::set1(1.0f / __builtin_sqrtf(ss / static_cast<float>(n) + eps));
  int64_t i = 0;
  for (; i + W <= n; i += W) S::store(y + i, S::mul(S::mul(S::load(x + i), scale), S::load(w + i)));
  if (i < n) {
    const int r = static_cast<int>(n - i);
    S::store_n(y + i, S::mul(S::mul(S::load_n(x + i, r), scale), S::load_n(w + i, r)), r);
  }
}

// y = g / (1 + exp(-g)) * u
template <class S>
void silu_mul(const float* g, const float* u, int64_t n, float* y) {
  using V = typename S::V;
  constexpr int W = S::W;
  const V one = S::set1(1.0f);
  auto f = [&](V gv, V uv) { return S::mul(S::div(gv, S::add(one, exp<S>(S::neg(gv)))), uv); };
  int64_t i = 0;
  for (; i + W <= n; i += W) S::store(y + i, f(S::load(g + i), S::load(u + i)));
  if (i < n) {
    const int r = static_cast<int>(n - i);
    S::store_n(y + i, f(S::load_n(g + i, r), S::load_n(u + i, r)), r);
  }
}

// GPT-2's GELU, tanh approximation: y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
template <class S>
void gelu_tanh(const float* x, int64_t n, float* y) {
  using V = typename S::V;
  constexpr int W = S::W;
  const V half = S::set1(0.5f), one = S::set1(1.0f), c = S::set1(0.7978845608f), a = S::set1(0.044715f);
  auto f = [&](V v) {
    const V inner = S::mul(c, S::fma(S::mul(a, S::mul(v, v)), v, v));
    return S::mul(S::mul(half, v), S::add(one, tanh<S>(inner)));
  };
  int64_t i = 0;
  for (; i + W <= n; i += W) S::store(y + i, f(S::load(x + i)));
  if (i < n) {
    const int r = static_cast<int>(n - i);
    S::store_n(y + i, f(S::load_n(x + i, r)), r);
  }
}

}  // namespace tessera::native::simd
