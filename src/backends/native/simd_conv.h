// The direct convolution row kernel over an ISA policy S: OCB output channels x NV vectors of
// output pixels held in OCB * NV registers. Per (input channel, tap): NV loads of input pixels
// and OCB broadcast weights, OCB * NV FMAs. The input rows are zero-padded copies (see
// conv_kernels.cc), so the loop has no bounds checks; the last pixels of a row are stored masked.
//
// Only templates, included by the ISA files after their target pragma (see simd_math.h).
#pragma once

#include "backends/native/isa.h"

namespace tessera::native::simd {

// Pixels [p0, p0 + pixels) of the row, pixels <= NV * W.
template <class S, int OCB, int NV>
inline void conv_tile(const ConvRowArgs& a, int64_t p0, int64_t pixels) {
  using V = typename S::V;
  constexpr int W = S::W;
  V acc[OCB][NV];
#pragma GCC unroll 16
  for (int o = 0; o < OCB; ++o) {
    const V b = S::set1(a.bias[o]);
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) acc[o][j] = b;
  }
  const float* w = a.weights;
  const float* in = a.in + p0;
  for (int64_t c = 0; c < a.channels; ++c, in += a.channel_stride) {
    for (int64_t t = 0; t < a.taps; ++t, w += OCB) {
      const float* p = in + a.tap_offsets[t];
      V x[NV];
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) x[j] = S::load(p + j * W);
#pragma GCC unroll 16
      for (int o = 0; o < OCB; ++o) {
        const V b = S::set1(w[o]);
#pragma GCC unroll 4
        for (int j = 0; j < NV; ++j) acc[o][j] = S::fma(b, x[j], acc[o][j]);
      }
    }
  }
  float* out = a.out + p0;
#pragma GCC unroll 16
  for (int o = 0; o < OCB; ++o) {
    if (o >= a.oc_count) break;
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) {
      const int64_t cols = pixels - j * W;
      if (cols >= W) {
        S::store(out + o * a.out_stride + j * W, acc[o][j]);
      } else if (cols > 0) {
        S::store_n(out + o * a.out_stride + j * W, acc[o][j], static_cast<int>(cols));
      }
    }
  }
}

// The last `pixels` (< NV * W) of a row, with as few vectors as cover them.
template <class S, int OCB, int NV>
inline void conv_row_end(const ConvRowArgs& a, int64_t p0, int64_t pixels) {
  if constexpr (NV > 1) {
    if (pixels <= (NV - 1) * S::W) return conv_row_end<S, OCB, NV - 1>(a, p0, pixels);
  }
  conv_tile<S, OCB, NV>(a, p0, pixels);
}

template <class S, int OCB, int NV>
void conv_row(const ConvRowArgs& a) {
  constexpr int64_t kTile = NV * S::W;
  int64_t p = 0;
  for (; p + kTile <= a.width; p += kTile) conv_tile<S, OCB, NV>(a, p, kTile);
  if (p < a.width) conv_row_end<S, OCB, NV>(a, p, a.width - p);
}

}  // namespace tessera::native::simd
