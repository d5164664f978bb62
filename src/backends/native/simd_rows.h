// Row kernels over an ISA policy S: sum / max reductions, softmax, layer normalization.
// Sums use several vector accumulators (shorter dependency chains, smaller rounding error).
//
// Only templates, included by the ISA files after their target pragma (see simd_math.h).
#pragma once

namespace tessera::native::simd {

// Max that keeps NaN once seen (either operand), like the reference's reduction.
template <class S>
typename S::V max_keep_nan(typename S::V acc, typename S::V v) {
  return S::select(S::isnan(v), v, S::max(v, acc));
}

template <class S>
float reduce_row(ReduceKind kind, const float* x, int64_t len) {
  using V = typename S::V;
  constexpr int W = S::W;
  int64_t i = 0;
  if (kind == ReduceKind::kSum) {
    // Blocks of 4096 summed in float vectors (16 to 64 lanes), the block sums in double: close
    // to the reference's double sum at float speed.
    double total = 0;
    while (i < len) {
      const int64_t end = len - i > 4096 ? i + 4096 : len;
      V acc[4] = {S::zero(), S::zero(), S::zero(), S::zero()};
      for (; i + 4 * W <= end; i += 4 * W)
        for (int j = 0; j < 4; ++j) acc[j] = S::add(acc[j], S::load(x + i + j * W));
      for (; i + W <= end; i += W) acc[0] = S::add(acc[0], S::load(x + i));
      if (i < end) {
        acc[1] = S::add(acc[1], S::load_n(x + i, static_cast<int>(end - i)));
        i = end;
      }
      total += S::hsum(S::add(S::add(acc[0], acc[1]), S::add(acc[2], acc[3])));
    }
    return static_cast<float>(total);
  }
  float m = -__builtin_inff();
  if (len >= W) {
    V acc[2] = {S::load(x), S::load(x)};
    for (; i + 2 * W <= len; i += 2 * W)
      for (int j = 0; j < 2; ++j) acc[j] = max_keep_nan<S>(acc[j], S::load(x + i + j * W));
    for (; i + W <= len; i += W) acc[0] = max_keep_nan<S>(acc[0], S::load(x + i));
    float lanes[2 * W];
    S::store(lanes, acc[0]);
    S::store(lanes + W, acc[1]);
    for (float v : lanes) m = (v != v || v > m) ? v : m;
    if (m != m) return m;
  }
  for (; i < len; ++i) {
    if (x[i] != x[i]) return x[i];
    m = x[i] > m ? x[i] : m;
  }
  return m;
}

template <class S>
void reduce_rows(ReduceKind kind, const float* x, int64_t rows, int64_t len, float* y) {
  for (int64_t r = 0; r < rows; ++r) y[r] = reduce_row<S>(kind, x + r * len, len);
}

// y[0, width) = reduce over len rows spaced stride apart; blocks of columns stay in registers
// down the rows.
template <class S>
void reduce_columns(ReduceKind kind, const float* x, int64_t len, int64_t stride, int64_t width,
                    float* y) {
  using V = typename S::V;
  constexpr int W = S::W;
  constexpr int kBlock = 4;  // vectors per column block
  const bool sum = kind == ReduceKind::kSum;
  int64_t c = 0;
  for (; c + kBlock * W <= width; c += kBlock * W) {
    V acc[kBlock];
    for (int j = 0; j < kBlock; ++j) acc[j] = S::load(x + c + j * W);
    for (int64_t r = 1; r < len; ++r) {
      const float* xr = x + r * stride + c;
      for (int j = 0; j < kBlock; ++j) {
        const V v = S::load(xr + j * W);
        acc[j] = sum ? S::add(acc[j], v) : max_keep_nan<S>(acc[j], v);
      }
    }
    for (int j = 0; j < kBlock; ++j) S::store(y + c + j * W, acc[j]);
  }
  for (; c < width; c += W) {
    const int n = width - c < W ? static_cast<int>(width - c) : W;
    V acc = S::load_n(x + c, n);
    for (int64_t r = 1; r < len; ++r) {
      const V v = S::load_n(x + r * stride + c, n);
      acc = sum ? S::add(acc, v) : max_keep_nan<S>(acc, v);
    }
    S::store_n(y + c, acc, n);
  }
}

template <class S>
void softmax_row(const float* x, int64_t len, float* y) {
  using V = typename S::V;
  constexpr int W = S::W;
  const float m = reduce_row<S>(ReduceKind::kMax, x, len);
  // An all -inf row (or a +inf max) would give inf - inf: shift by 0 then, like ref.
  const V shift = S::set1(m - m == 0 ? m : 0.0f);
  V acc = S::zero();
  int64_t i = 0;
  for (; i + W <= len; i += W) {
    const V e = exp<S>(S::sub(S::load(x + i), shift));
    S::store(y + i, e);
    acc = S::add(acc, e);
  }
  if (i < len) {
    const int r = static_cast<int>(len - i);
    const V e = exp<S>(S::sub(S::load_n(x + i, r), shift));
    S::store_n(y + i, e, r);
    acc = S::add(acc, S::load_n(y + i, r));
  }
  const V inv = S::set1(1.0f / S::hsum(acc));
  for (i = 0; i + W <= len; i += W) S::store(y + i, S::mul(S::load(y + i), inv));
  if (i < len) {
    const int r = static_cast<int>(len - i);
    S::store_n(y + i, S::mul(S::load_n(y + i, r), inv), r);
  }
}

// Softmax down columns (an axis with inner dims): column maxima and sums in scratch.
template <class S>
void softmax_columns(const float* x, int64_t len, int64_t stride, int64_t width, float* y,
                     float* scratch) {
  using V = typename S::V;
  constexpr int W = S::W;
  float* shift = scratch;
  float* sums = scratch + width;
  reduce_columns<S>(ReduceKind::kMax, x, len, stride, width, shift);
  for (int64_t c = 0; c < width; ++c) {
    shift[c] = shift[c] - shift[c] == 0 ? shift[c] : 0.0f;
    sums[c] = 0;
  }
  for (int64_t r = 0; r < len; ++r) {
    const float* xr = x + r * stride;
    float* yr = y + r * stride;
    for (int64_t c = 0; c < width; c += W) {
      const int n = width - c < W ? static_cast<int>(width - c) : W;
      const V e = exp<S>(S::sub(S::load_n(xr + c, n), S::load_n(shift + c, n)));
      S::store_n(yr + c, e, n);
      S::store_n(sums + c, S::add(S::load_n(sums + c, n), e), n);
    }
  }
  for (int64_t c = 0; c < width; ++c) sums[c] = 1.0f / sums[c];
  for (int64_t r = 0; r < len; ++r) {
    float* yr = y + r * stride;
    for (int64_t c = 0; c < width; c += W) {
      const int n = width - c < W ? static_cast<int>(width - c) : W;
      S::store_n(yr + c, S::mul(S::load_n(yr + c, n), S::load_n(sums + c, n)), n);
    }
  }
}

template <class S>
void layer_norm_row(const float* x, int64_t n, const float* scale, const float* bias, float eps,
                    float* y, float* mean_out, float* inv_out) {
  using V = typename S::V;
  constexpr int W = S::W;
  const float mean = n > 0 ? reduce_row<S>(ReduceKind::kSum, x, n) / static_cast<float>(n) : 0;
  const V m = S::set1(mean);
  V acc[2] = {S::zero(), S::zero()};
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    const V d = S::sub(S::load(x + i), m);
    acc[(i / W) & 1] = S::fma(d, d, acc[(i / W) & 1]);
  }
  if (i < n) {
    const int r = static_cast<int>(n - i);
    const V dd = S::sub(S::load_n(x + i, r), m);
    // Only the first r lanes count: store and reload through load_n to zero the rest.
    float t[W];
    S::store(t, dd);
    const V dz = S::load_n(t, r);
    acc[0] = S::fma(dz, dz, acc[0]);
  }
  const float var = n > 0 ? S::hsum(S::add(acc[0], acc[1])) / static_cast<float>(n) : 0;
  const float inv = 1.0f / __builtin_sqrtf(var + eps);
  const V is = S::set1(inv);
  for (i = 0; i < n; i += W) {
    const int r = n - i < W ? static_cast<int>(n - i) : W;
    V v = S::mul(S::mul(S::sub(S::load_n(x + i, r), m), is), S::load_n(scale + i, r));
    if (bias) v = S::add(v, S::load_n(bias + i, r));
    S::store_n(y + i, v, r);
  }
  if (mean_out) *mean_out = mean;
  if (inv_out) *inv_out = inv;
}

}  // namespace tessera::native::simd
