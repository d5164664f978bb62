// The row kernel of a ConvTranspose whose kernel equals its stride, over an ISA policy S.
//
// Such a ConvTranspose writes every input pixel's KH x KW tile apart from the others:
// y[oc, h * KH + kh, w * KW + kw] = bias + sum_c x[c, h, w] * W[c, (oc, kh, kw)]. One call does
// one input row h. Its columns j = (oc, kh, kw) go in blocks of JC (at most the ISA's block JB);
// a tile holds JC columns x NV vectors of input pixels in JC * NV registers, starting from the
// bias: per input channel, NV loads of pixels and JC broadcast weights, JC * NV FMAs; then the
// clamp, if any (a Relu or Clip folded in). The KW columns of each (oc, kh) are interleaved
// (S::zip) into KW * NV vectors of contiguous output and stored to output row h * KH + kh; a KW
// other than 1, 2 and 4 is stored float by float. The last vector of a row reads and writes
// masked, so nothing past the row is touched. Software prefetches keep memory busy: the next
// tile's output lines, and the input 1 KiB ahead.
//
// Only templates, included by the ISA files after their target pragma and simd_eltwise.h (see
// simd_math.h).
#pragma once

#include <cstdint>

#include "backends/native/isa.h"

namespace tessera::native::simd {

// Where one tile works: columns [col0, col0 + jc) of the row, their weights ([channels][JB])
// and bias, and input pixels [p0, p0 + pixels).
struct DeconvTile {
  const float* weights;
  const float* bias;
  int64_t col0;
  int jc;
  int64_t p0, pixels;
};

// Prefetches the line of base[i] (for writing: kWrite), its address computed as an integer: i may
// be past the end of the array base is in (a prefetch never faults).
template <int kWrite>
inline void prefetch_float(const float* base, int64_t i) {
  const uintptr_t at =
      reinterpret_cast<uintptr_t>(base) + static_cast<uintptr_t>(i) * sizeof(float);
  __builtin_prefetch(reinterpret_cast<const void*>(at), kWrite, 3);
}

// KW == 1, 2 or 4 (0: any other KW). Computes JC columns (those past jc have zero weights and
// are not stored) x NV vectors of pixels; Masked: the last vector holds pixels - (NV - 1) * W
// pixels, else pixels == NV * W.
template <class S, int JB, int KW, int JC, int NV, bool Masked>
void deconv_tile(const DeconvRowArgs& a, const DeconvTile& t) {
  using V = typename S::V;
  constexpr int W = S::W;
  const int last = Masked ? static_cast<int>(t.pixels - (NV - 1) * W) : W;
  V acc[JC][NV];
#pragma GCC unroll 16
  for (int j = 0; j < JC; ++j) {
    const V b = S::set1(t.bias[j]);
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[j][v] = b;
  }
  // Prefetches (not for the scalar ISA, whose tile is one pixel): the output lines of the next
  // tile of the row, for writing, and in the row's first block the input 1 KiB ahead in each
  // channel (the next row's start near the end of this one). Without them the det head's
  // ConvTransposes take 15-20% longer, waiting on memory.
  constexpr int64_t kTile = NV * W, kLine = 64 / sizeof(float);
  const int64_t* offsets = a.column_offsets + t.col0;
  const int kw = KW > 0 ? KW : static_cast<int>(a.kw);
  if (W > 1 && t.p0 + kTile < a.width) {
    const int64_t next = t.p0 + kTile, end = next + kTile < a.width ? next + kTile : a.width;
    for (int j = 0; j < t.jc; j += kw)
      for (int64_t i = next * kw; i < end * kw; i += kLine)
        prefetch_float<1>(a.out, offsets[j] + i);
  }
  const bool fetch_input = W > 1 && t.col0 == 0;
  const float* in = a.in + t.p0;
  const float* w = t.weights;
  for (int64_t c = 0; c < a.channels; ++c, in += a.channel_stride, w += JB) {
    if (fetch_input) {
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) prefetch_float<0>(in, 256 + v * W);
    }
    V x[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      x[v] = Masked && v == NV - 1 ? S::load_n(in + v * W, last) : S::load(in + v * W);
#pragma GCC unroll 16
    for (int j = 0; j < JC; ++j) {
      const V wj = S::set1(w[j]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[j][v] = S::fma(wj, x[v], acc[j][v]);
    }
  }
  if (a.clamp) {
    const V lo = S::set1(a.lo), hi = S::set1(a.hi);
#pragma GCC unroll 16
    for (int j = 0; j < JC; ++j)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[j][v] = clip<S>(acc[j][v], lo, hi);
  }
  if constexpr (KW > 0 && JC % KW == 0) {
    // Groups (oc, kh) of KW columns, stored as KW * NV contiguous vectors (col0 and jc are
    // multiples of KW: JB is, and so is the number of columns).
#pragma GCC unroll 16
    for (int j = 0; j < JC; j += KW) {
      if (j >= t.jc) break;
      float* out = a.out + offsets[j] + t.p0 * KW;
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        V run[KW];
        if constexpr (KW == 1) {
          run[0] = acc[j][v];
        } else if constexpr (KW == 2) {
          S::zip(acc[j][v], acc[j + 1][v], run[0], run[1]);
        } else {
          static_assert(KW == 4);
          V lo02, hi02, lo13, hi13;
          S::zip(acc[j][v], acc[j + 2][v], lo02, hi02);
          S::zip(acc[j + 1][v], acc[j + 3][v], lo13, hi13);
          S::zip(lo02, lo13, run[0], run[1]);
          S::zip(hi02, hi13, run[2], run[3]);
        }
        float* o = out + v * KW * W;
        if (Masked && v == NV - 1) {
#pragma GCC unroll 4
          for (int q = 0; q < KW; ++q) {
            const int left = KW * last - q * W;
            if (left >= W) {
              S::store(o + q * W, run[q]);
            } else if (left > 0) {
              S::store_n(o + q * W, run[q], left);
            }
          }
        } else {
#pragma GCC unroll 4
          for (int q = 0; q < KW; ++q) S::store(o + q * W, run[q]);
        }
      }
    }
  } else {
    // Any other KW: float by float, each column's pixels KW apart.
    alignas(64) float buf[NV * W];
    for (int j = 0; j < t.jc; ++j) {
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) S::store(buf + v * W, acc[j][v]);
      float* out = a.out + offsets[j] + t.p0 * kw;
      for (int64_t p = 0; p < t.pixels; ++p) out[p * kw] = buf[p];
    }
  }
}

// The last pixels (< NV * W) of a row, with as few vectors as cover them.
template <class S, int JB, int KW, int JC, int NV>
void deconv_tile_end(const DeconvRowArgs& a, const DeconvTile& t) {
  if constexpr (NV > 1) {
    if (t.pixels <= (NV - 1) * S::W) return deconv_tile_end<S, JB, KW, JC, NV - 1>(a, t);
  }
  deconv_tile<S, JB, KW, JC, NV, true>(a, t);
}

// One column block over the whole row: JC columns in NV vectors of pixels, at most kAcc
// accumulators (and 4 vectors). With one float per vector (the scalar ISA), one pixel: GCC 12's
// SLP vectorizer turns two or three neighbouring pixel loads into one four-float load that
// reads past the end of x.
template <class S, int JB, int KW, int JC, int kAcc>
void deconv_block(const DeconvRowArgs& a, DeconvTile t) {
  constexpr int NV = S::W == 1 || kAcc / JC < 1 ? 1 : (kAcc / JC > 4 ? 4 : kAcc / JC);
  constexpr int64_t kTile = NV * S::W;
  for (t.p0 = 0; t.p0 + kTile <= a.width; t.p0 += kTile) {
    t.pixels = kTile;
    deconv_tile<S, JB, KW, JC, NV, false>(a, t);
  }
  if (t.p0 < a.width) {
    t.pixels = a.width - t.p0;
    deconv_tile_end<S, JB, KW, JC, NV>(a, t);
  }
}

// Every column block of the row. A narrower last block (fewer columns, as a 1-channel output
// has) is computed as the smallest of JB, 8, 4, 2, 1 columns that holds it, with more pixel
// vectors.
template <class S, int JB, int KW, int kAcc>
void deconv_row_kw(const DeconvRowArgs& a) {
  for (int64_t col0 = 0; col0 < a.columns; col0 += JB) {
    DeconvTile t{};
    t.jc = static_cast<int>(a.columns - col0 < JB ? a.columns - col0 : JB);
    t.weights = a.weights + col0 * a.channels;  // block col0 / JB of [channels][JB] each
    t.bias = a.bias + col0;
    t.col0 = col0;
    if (t.jc <= 1) {
      deconv_block<S, JB, KW, 1, kAcc>(a, t);
    } else if (t.jc <= 2 || JB <= 2) {
      deconv_block<S, JB, KW, (JB < 2 ? JB : 2), kAcc>(a, t);
    } else if (t.jc <= 4 || JB <= 4) {
      deconv_block<S, JB, KW, (JB < 4 ? JB : 4), kAcc>(a, t);
    } else if (t.jc <= 8 || JB <= 8) {
      deconv_block<S, JB, KW, (JB < 8 ? JB : 8), kAcc>(a, t);
    } else {
      deconv_block<S, JB, KW, JB, kAcc>(a, t);
    }
  }
}

// JB columns per block (a multiple of 4, so that blocks keep KW = 4 groups whole), kAcc
// accumulators for a full block.
template <class S, int JB, int kAcc>
void deconv_row(const DeconvRowArgs& a) {
  static_assert(JB % 4 == 0, "column blocks must keep KW = 1, 2 and 4 groups whole");
  switch (a.kw) {
    case 1: return deconv_row_kw<S, JB, 1, kAcc>(a);
    case 2: return deconv_row_kw<S, JB, 2, kAcc>(a);
    case 4: return deconv_row_kw<S, JB, 4, kAcc>(a);
    default: return deconv_row_kw<S, JB, 0, kAcc>(a);
  }
}

}  // namespace tessera::native::simd
