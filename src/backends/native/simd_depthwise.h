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

}  // namespace tessera::native::simd
