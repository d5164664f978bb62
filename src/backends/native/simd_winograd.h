// The input and output transforms of a Winograd F(2x2, 3x3) convolution over an ISA policy S,
// vectorized over the tiles of one tile row (see conv_winograd.cc for the whole algorithm).
//
// Tile t of a tile row reads the 4 x 4 padded input d at columns 2t .. 2t + 3 of 4 consecutive
// padded rows; its transform is V = B^T d B, with
//   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1].
// The even and odd columns of two vectors of a row (S::unzip) are columns 2t and 2t + 1 of W
// consecutive tiles; the same 2 floats further, columns 2t + 2 and 2t + 3. The zero padding
// left and right of the image comes from masked loads, above and below from zero vectors.
// The output tile is Y = A^T M A + bias with A^T = [1 1 1 0; 0 1 -1 -1]; the two columns of W
// tiles are interleaved (S::zip) into 2W contiguous output pixels of each of the two rows.
//
// Only templates, included by the ISA files after their target pragma and simd_deconv.h (its
// prefetch_float), see simd_math.h.
#pragma once

#include <cstdint>

#include "backends/native/isa.h"

namespace tessera::native::simd {

// W tiles whose first columns are column o of the source rows (null: a row of zeros): V = B^T d B
// stored to out[xi * xi_stride], the first n <= W tiles. Unless kEdge, the tiles read only
// columns inside the rows: o >= 0 and o + 2W + 2 <= width.
template <class S, bool kEdge>
[[gnu::always_inline]] inline void winograd_input_vector(const WinogradInputArgs& a,
                                                         const float* const rows[4], int64_t o,
                                                         int n, float* out) {
  using V = typename S::V;
  constexpr int W = S::W;
  // The 4 loads of a row: columns o, o + W (the even and odd columns 2t, 2t + 1 of W tiles) and
  // the same 2 further (2t + 2, 2t + 3). kEdge: lanes [lo, hi) of each are in the row, the others
  // zero and their memory not read (the address computed as an integer: o may be negative).
  const int64_t at[4] = {o, o + W, o + 2, o + 2 + W};
  int lo[4] = {0, 0, 0, 0}, hi[4] = {W, W, W, W};
  if constexpr (kEdge) {
    for (int k = 0; k < 4; ++k) {
      lo[k] = static_cast<int>(at[k] < 0 ? (-at[k] < W ? -at[k] : W) : 0);
      const int64_t left = a.width - at[k];
      hi[k] = static_cast<int>(left < 0 ? 0 : left < W ? left : W);
    }
  }
  const auto load = [&](int r, int k) -> V {
    if constexpr (kEdge) {
      const float* p = reinterpret_cast<const float*>(
          reinterpret_cast<uintptr_t>(rows[r]) + static_cast<uintptr_t>(at[k]) * sizeof(float));
      return lo[k] == 0 && hi[k] == W ? S::load(p) : S::load_range(p, lo[k], hi[k]);
    } else {
      return S::load(rows[r] + at[k]);
    }
  };
  V d[4][4];  // columns 2t, 2t + 1, 2t + 2, 2t + 3 of the 4 rows, for W tiles t
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r) {
    if (!rows[r]) {
      d[r][0] = d[r][1] = d[r][2] = d[r][3] = S::zero();
      continue;
    }
    S::unzip(load(r, 0), load(r, 1), d[r][0], d[r][1]);
    S::unzip(load(r, 2), load(r, 3), d[r][2], d[r][3]);
  }
  V b[4][4];  // B^T d: b[i][col] = sum over rows r of B^T[i][r] * d[r][col]
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    b[0][c] = S::sub(d[0][c], d[2][c]);
    b[1][c] = S::add(d[1][c], d[2][c]);
    b[2][c] = S::sub(d[2][c], d[1][c]);
    b[3][c] = S::sub(d[1][c], d[3][c]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {  // (B^T d) B: the same combination of columns
    const V row[4] = {S::sub(b[i][0], b[i][2]), S::add(b[i][1], b[i][2]), S::sub(b[i][2], b[i][1]),
                      S::sub(b[i][1], b[i][3])};
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      float* to = out + (4 * i + j) * a.xi_stride;
      if (n == W) {
        S::store(to, row[j]);
      } else {
        S::store_n(to, row[j], n);
      }
    }
  }
}

// One tile row of every input channel (see WinogradInputArgs): the vectors of tiles that reach
// into the left or right padding load masked, the others plainly. Each channel first prefetches
// the columns its tiles read in the rows of the channel kAhead further: its rows are short
// stretches (a few cache lines) of planes far apart, which the hardware prefetchers do not see
// coming.
template <class S>
void winograd_input_tile_row(const WinogradInputArgs& a) {
  constexpr int W = S::W;
  constexpr int64_t kAhead = 2, kLine = 64 / sizeof(float);
  const int64_t first = a.col0 < 0 ? 0 : a.col0, end_col = a.col0 + 2 * a.tiles + 2;
  const int64_t last = end_col < a.width ? end_col : a.width;
  for (int64_t c = 0; c < a.channels; ++c) {
    const float* plane = a.in + c * a.plane_stride;
    const float* rows[4];
    for (int r = 0; r < 4; ++r) {
      const int64_t ih = a.row0 + r;
      rows[r] = ih >= 0 && ih < a.height ? plane + ih * a.width : nullptr;
      if (W > 1 && rows[r]) {
        for (int64_t i = first; i < last; i += kLine)
          prefetch_float<0>(rows[r], kAhead * a.plane_stride + i);
        prefetch_float<0>(rows[r], kAhead * a.plane_stride + last - 1);
      }
    }
    float* out = a.v + c * a.channel_stride;
    int64_t t = 0;
    const auto n = [&] { return a.tiles - t < W ? static_cast<int>(a.tiles - t) : W; };
    for (; t < a.tiles && a.col0 + 2 * t < 0; t += W)
      winograd_input_vector<S, true>(a, rows, a.col0 + 2 * t, n(), out + t);
    for (; t < a.tiles && a.col0 + 2 * t + 2 * W + 2 <= a.width; t += W)
      winograd_input_vector<S, false>(a, rows, a.col0 + 2 * t, n(), out + t);
    for (; t < a.tiles; t += W)
      winograd_input_vector<S, true>(a, rows, a.col0 + 2 * t, n(), out + t);
  }
}

// m: M[xi] of tile t at m[xi * xi_stride + t], readable up to tiles rounded up to W. Writes
// output pixels [0, width) of rows y0 and (when not null) y1, width <= 2 * tiles.
template <class S>
void winograd_output_tile_row(const float* m, int64_t xi_stride, int64_t tiles, float bias,
                              float* y0, float* y1, int64_t width) {
  using V = typename S::V;
  constexpr int W = S::W;
  const V b = S::set1(bias);
  for (int64_t t = 0; t < tiles; t += W) {
    V a[2][4];  // A^T M
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const V m0 = S::load(m + j * xi_stride + t), m1 = S::load(m + (4 + j) * xi_stride + t),
              m2 = S::load(m + (8 + j) * xi_stride + t), m3 = S::load(m + (12 + j) * xi_stride + t);
      a[0][j] = S::add(S::add(m0, m1), m2);
      a[1][j] = S::sub(S::sub(m1, m2), m3);
    }
    const int64_t cols = width - 2 * t;
#pragma GCC unroll 2
    for (int i = 0; i < 2; ++i) {
      float* y = i == 0 ? y0 : y1;
      if (!y) break;
      const V left = S::add(S::add(S::add(a[i][0], a[i][1]), a[i][2]), b);
      const V right = S::add(S::sub(S::sub(a[i][1], a[i][2]), a[i][3]), b);
      V lo, hi;
      S::zip(left, right, lo, hi);
      float* o = y + 2 * t;
      if (cols >= 2 * W) {
        S::store(o, lo);
        S::store(o + W, hi);
      } else if (cols > W) {
        S::store(o, lo);
        S::store_n(o + W, hi, static_cast<int>(cols - W));
      } else {
        S::store_n(o, lo, static_cast<int>(cols));
      }
    }
  }
}

}  // namespace tessera::native::simd
