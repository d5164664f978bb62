// Row kernels of the language-model ops over an ISA policy S: attention over paged K/V blocks
// (scores, weighted sums of values), RMS normalization, SiLU(gate) * up, GELU.
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

// Attention over one KV head's blocks, for nq query heads at once (the heads of a GQA group;
// kAttentionHeads per pass share every load of K and V).
constexpr int kAttentionHeads = 4;

// scores[h * lds + p] = scale * (q_h . k_p) for h < nq (q_h at q + h * ldq) and positions p < len,
// key p in block kt[p / bs] stored transposed: kt[b][d * bs + j] is element d of key b * bs + j.
template <class S, int NH>
void attention_scores_heads(const float* q, int64_t ldq, int64_t hd, const float* const* kt, int64_t bs,
                            int64_t len, float scale, float* scores, int64_t lds) {
  using V = typename S::V;
  constexpr int W = S::W;
  const V vscale = S::set1(scale);
  for (int64_t p0 = 0, b = 0; p0 < len; p0 += bs, ++b) {
    const int64_t n = len - p0 < bs ? len - p0 : bs;
    for (int64_t j0 = 0; j0 < n; j0 += W) {
      const int m = static_cast<int>(n - j0 < W ? n - j0 : W);
      const bool whole = j0 + W <= bs;  // W lanes lie inside the block (lanes >= m are unused)
      const float* col = kt[b] + j0;
      // Two chains per head (even and odd d) hide the FMA latency.
      V acc[NH][2];
      for (int h = 0; h < NH; ++h) acc[h][0] = acc[h][1] = S::zero();
      int64_t d = 0;
      for (; d + 2 <= hd; d += 2) {
        const V k0 = whole ? S::load(col + d * bs) : S::load_n(col + d * bs, m);
        const V k1 = whole ? S::load(col + (d + 1) * bs) : S::load_n(col + (d + 1) * bs, m);
        for (int h = 0; h < NH; ++h) {
          acc[h][0] = S::fma(S::set1(q[h * ldq + d]), k0, acc[h][0]);
          acc[h][1] = S::fma(S::set1(q[h * ldq + d + 1]), k1, acc[h][1]);
        }
      }
      if (d < hd) {
        const V k0 = whole ? S::load(col + d * bs) : S::load_n(col + d * bs, m);
        for (int h = 0; h < NH; ++h) acc[h][0] = S::fma(S::set1(q[h * ldq + d]), k0, acc[h][0]);
      }
      for (int h = 0; h < NH; ++h) {
        S::store_n(scores + h * lds + p0 + j0, S::mul(S::add(acc[h][0], acc[h][1]), vscale), m);
      }
    }
  }
}

template <class S>
void attention_scores(const float* q, int64_t ldq, int64_t nq, int64_t hd, const float* const* kt, int64_t bs,
                      int64_t len, float scale, float* scores, int64_t lds) {
  int64_t h = 0;
  for (; h + kAttentionHeads <= nq; h += kAttentionHeads) {
    attention_scores_heads<S, kAttentionHeads>(q + h * ldq, ldq, hd, kt, bs, len, scale, scores + h * lds, lds);
  }
  for (; h < nq; ++h) attention_scores_heads<S, 1>(q + h * ldq, ldq, hd, kt, bs, len, scale, scores + h * lds, lds);
}

// out_h = sum over p < len of w[h * lds + p] * v_p for h < nq (out_h at out + h * ldo), value p in
// block vb[p / bs] stored by rows: vb[b][j * hd + d].
template <class S, int NH>
void attention_values_heads(const float* w, int64_t lds, int64_t len, const float* const* vb, int64_t bs,
                            int64_t hd, float* out, int64_t ldo) {
  using V = typename S::V;
  constexpr int W = S::W;
  for (int64_t c = 0; c < hd; c += W) {
    const int m = static_cast<int>(hd - c < W ? hd - c : W);
    // Two chains per head (even and odd positions) hide the FMA latency.
    V acc[NH][2];
    for (int h = 0; h < NH; ++h) acc[h][0] = acc[h][1] = S::zero();
    for (int64_t p0 = 0, b = 0; p0 < len; p0 += bs, ++b) {
      const int64_t n = len - p0 < bs ? len - p0 : bs;
      const float* col = vb[b] + c;
      const float* wp = w + p0;
      int64_t j = 0;
      for (; j + 2 <= n; j += 2) {
        const V v0 = m == W ? S::load(col + j * hd) : S::load_n(col + j * hd, m);
        const V v1 = m == W ? S::load(col + (j + 1) * hd) : S::load_n(col + (j + 1) * hd, m);
        for (int h = 0; h < NH; ++h) {
          acc[h][0] = S::fma(S::set1(wp[h * lds + j]), v0, acc[h][0]);
          acc[h][1] = S::fma(S::set1(wp[h * lds + j + 1]), v1, acc[h][1]);
        }
      }
      if (j < n) {
        const V v0 = m == W ? S::load(col + j * hd) : S::load_n(col + j * hd, m);
        for (int h = 0; h < NH; ++h) acc[h][0] = S::fma(S::set1(wp[h * lds + j]), v0, acc[h][0]);
      }
    }
    for (int h = 0; h < NH; ++h) S::store_n(out + h * ldo + c, S::add(acc[h][0], acc[h][1]), m);
  }
}

template <class S>
void attention_values(const float* w, int64_t lds, int64_t nq, int64_t len, const float* const* vb, int64_t bs,
                      int64_t hd, float* out, int64_t ldo) {
  int64_t h = 0;
  for (; h + kAttentionHeads <= nq; h += kAttentionHeads) {
    attention_values_heads<S, kAttentionHeads>(w + h * lds, lds, len, vb, bs, hd, out + h * ldo, ldo);
  }
  for (; h < nq; ++h) attention_values_heads<S, 1>(w + h * lds, lds, len, vb, bs, hd, out + h * ldo, ldo);
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
