// One output row of a depthwise convolution over an ISA policy S (see DepthwiseRowArgs in isa.h).
//
// Blocks of kDepthwiseBlock consecutive stride-1 positions of the padded input row are summed in
// registers over every tap (a broadcast weight times a contiguous load); at stride 1 they are the
// outputs, at stride 2 the even positions of each pair of vectors (S::unzip) are. A depthwise
// convolution does 9 or 25 multiplies per output against the 100s of a dense one, so it is bound
// by memory, and computing the odd positions at stride 2 costs less than gathering.
//
// Only templates, included by the ISA files after their target pragma, see simd_math.h.
#pragma once

#include <algorithm>
#include <cstdint>

#include "backends/native/isa.h"

namespace tessera::native::simd {

template <class S>
void depthwise_row(const DepthwiseRowArgs& a) {
  using V = typename S::V;
  constexpr int W = S::W;
  constexpr int kNv = static_cast<int>(kDepthwiseBlock) / W;
  static_assert(kNv % 2 == 0, "stride 2 takes the vectors in pairs");
  const int64_t positions = (a.width - 1) * a.stride + 1;
  for (int64_t j = 0; j < positions; j += kDepthwiseBlock) {
    V acc[kNv];
#pragma GCC unroll 8
    for (int v = 0; v < kNv; ++v) acc[v] = S::set1(a.bias);
    for (int64_t r = 0; r < a.kh; ++r) {
      const float* row = a.rows[r];
      if (row == nullptr) continue;
      const float* w = a.weights + r * a.kw;
      for (int64_t k = 0; k < a.kw; ++k) {
        const V wk = S::set1(w[k]);
        const float* p = row + j + k * a.dilation;
#pragma GCC unroll 8
        for (int v = 0; v < kNv; ++v) acc[v] = S::fma(wk, S::load(p + v * W), acc[v]);
      }
    }
    if (a.stride == 1) {
#pragma GCC unroll 8
      for (int v = 0; v < kNv; ++v) {
        const int64_t o = j + v * W;
        if (o >= a.width) break;
        if (a.width - o >= W) {
          S::store(a.out + o, acc[v]);
        } else {
          S::store_n(a.out + o, acc[v], static_cast<int>(a.width - o));
        }
      }
      continue;
    }
#pragma GCC unroll 4
    for (int v = 0; v < kNv; v += 2) {
      const int64_t o = (j + v * W) / 2;
      if (o >= a.width) break;
      V even, odd;
      S::unzip(acc[v], acc[v + 1], even, odd);
      if (a.width - o >= W) {
        S::store(a.out + o, even);
      } else {
        S::store_n(a.out + o, even, static_cast<int>(a.width - o));
      }
    }
  }
}

// Channels-last (DepthwiseClArgs): per block of kPixels output pixels whose taps all lie inside
// the image's columns, per vector of channels, kPixels accumulators over every tap (one weight
// vector load for kPixels input loads); the pixels near the left and right edges one at a time,
// skipping the taps in the padding. Channels past the last whole vector are masked.
template <class S, int kPixels>
void depthwise_cl_pixels(const DepthwiseClArgs& a, const float* const* rows, const int64_t* row_taps, int nrows,
                         int64_t ow, int64_t k0, int64_t k1, float* out) {
  using V = typename S::V;
  constexpr int W = S::W;
  const int64_t c = a.c;
  const int64_t iw0 = ow * a.sw - a.pad_left;
  for (int64_t c0 = 0; c0 < c; c0 += W) {
    const int n = static_cast<int>(std::min<int64_t>(W, c - c0));
    const bool full = n == W;
    const V b = full ? S::load(a.bias + c0) : S::load_n(a.bias + c0, n);
    V acc[kPixels];
#pragma GCC unroll 8
    for (int p = 0; p < kPixels; ++p) acc[p] = b;
    for (int t = 0; t < nrows; ++t) {
      const float* wrow = a.weights + row_taps[t] * a.kw * c + c0;
      const float* xrow = rows[t] + c0;
      for (int64_t k = k0; k < k1; ++k) {
        const V wv = full ? S::load(wrow + k * c) : S::load_n(wrow + k * c, n);
        const float* px = xrow + (iw0 + k * a.dw) * c;
#pragma GCC unroll 8
        for (int p = 0; p < kPixels; ++p) {
          const float* q = px + p * a.sw * c;
          acc[p] = S::fma(wv, full ? S::load(q) : S::load_n(q, n), acc[p]);
        }
      }
    }
#pragma GCC unroll 8
    for (int p = 0; p < kPixels; ++p) {
      if (full) {
        S::store(out + p * c + c0, acc[p]);
      } else {
        S::store_n(out + p * c + c0, acc[p], n);
      }
    }
  }
}

template <class S>
void depthwise_cl_row(const DepthwiseClArgs& a) {
  constexpr int kPixels = 8;
  const float* rows[16];
  int64_t row_taps[16];
  int nrows = 0;
  for (int64_t r = 0; r < a.kh && nrows < 16; ++r) {
    const int64_t ih = a.oh * a.sh - a.pad_top + r * a.dh;
    if (ih < 0 || ih >= a.h) continue;
    rows[nrows] = a.x + ih * a.w * a.c;
    row_taps[nrows++] = r;
  }
  // Output pixels [lo, hi) read no padding column.
  const int64_t reach = (a.kw - 1) * a.dw;
  const int64_t lo = (a.pad_left + a.sw - 1) / a.sw;
  const int64_t hi = a.w - 1 + a.pad_left - reach < 0 ? 0 : (a.w - 1 + a.pad_left - reach) / a.sw + 1;
  int64_t ow = a.ow0;
  float* out = a.out;
  const int64_t inner_end = std::min(hi, a.ow1);
  while (ow < a.ow1) {
    // Inner pixels in blocks of 8, then 4 and 2 (a pixel alone is one chain of dependent FMAs,
    // several times slower per pixel: k5 rows of 80 pixels left 4 of them to it).
    if (ow >= lo && ow + kPixels <= inner_end) {
      depthwise_cl_pixels<S, kPixels>(a, rows, row_taps, nrows, ow, 0, a.kw, out);
      ow += kPixels, out += kPixels * a.c;
      continue;
    }
    if (ow >= lo && ow + 4 <= inner_end) {
      depthwise_cl_pixels<S, 4>(a, rows, row_taps, nrows, ow, 0, a.kw, out);
      ow += 4, out += 4 * a.c;
      continue;
    }
    if (ow >= lo && ow + 2 <= inner_end) {
      depthwise_cl_pixels<S, 2>(a, rows, row_taps, nrows, ow, 0, a.kw, out);
      ow += 2, out += 2 * a.c;
      continue;
    }
    // One pixel, its taps inside the image: k0 <= k < k1.
    const int64_t iw0 = ow * a.sw - a.pad_left;
    int64_t k0 = 0, k1 = a.kw;
    while (k0 < k1 && iw0 + k0 * a.dw < 0) ++k0;
    while (k1 > k0 && iw0 + (k1 - 1) * a.dw >= a.w) --k1;
    depthwise_cl_pixels<S, 1>(a, rows, row_taps, nrows, ow, k0, k1, out);
    ++ow, out += a.c;
  }
}

}  // namespace tessera::native::simd
