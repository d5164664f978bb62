// quant_matmul's AVX-512 kernels (F, DQ, BW, VL, VNNI): register tiles of up to 4 activation rows
// x 4 weight rows. Q8_0 / Q4_0 take two 32-blocks per zmm and multiply with vpdpbusd (unsigned x
// signed bytes, so: Q4_0 nibbles are the unsigned side, the -8 offset folded into the accumulator's
// start value as -8 * sum(a); Q8_0 activations are made unsigned with +128 and the weights' 128 *
// sum(w) subtracted). Float weights: vcvtph2ps (F16), a 16-bit shift (BF16), fp32 FMA.
// Everything after the target pragma runs only after quant_matmul_isa_runs(Isa::kAvx512).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backends/native/quant_matmul_internal.h"
#include "backends/native/quant_matmul_panels.h"

#pragma GCC push_options
#pragma GCC target("avx512f,avx512dq,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace tessera::native::qmm {
namespace {

using quant::QType;
// The tile loops over R / J must unroll for the accumulators to live in registers.
#define QMM_UNROLL _Pragma("GCC unroll 8")
// One register tile: rows [t0, t0 + R) x output features [j0, j0 + J); w0 is weight row j0 and
// weight rows lie p.w_row_bytes apart.

constexpr int kR = 4, kJ = 4;
// Weight rows per panel: a panel's tiles run over all activation rows before the next panel, so
// the panel stays in L2 while the activation tiles (L1) sweep over it.

inline void store_out(const Problem& p, int64_t t, int64_t j, float s) {
  if (p.bias) s += p.bias[j];
  if (p.residual) s += p.residual[t * p.ld_residual + j];
  p.y[t * p.ldy + j] = s;
}

template <int R, int J>
inline void finish(const Problem& p, __m512 (&acc)[R][J], int64_t t0, int64_t j0) {
  QMM_UNROLL for (int r = 0; r < R; ++r) {
    QMM_UNROLL for (int j = 0; j < J; ++j) store_out(p, t0 + r, j0 + j, _mm512_reduce_add_ps(acc[r][j]));
  }
}

// --- float weights ---

template <QType T>
inline __m512 convert_half(__m256i h) {
  if constexpr (T == QType::kF16) {
    return _mm512_cvtph_ps(h);
  } else {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

template <QType T>
inline __m512 wload(const uint8_t* row, int64_t i) {
  if constexpr (T == QType::kF32) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + i);
  } else {
    return convert_half<T>(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * i)));
  }
}

template <QType T>
inline __m512 wload_n(const uint8_t* row, int64_t i, __mmask16 m) {
  if constexpr (T == QType::kF32) {
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + i);
  } else {
    return convert_half<T>(_mm256_maskz_loadu_epi16(m, row + 2 * i));
  }
}

template <QType T, int R, int J>
void ftile(const Problem& p, const uint8_t* w0, int64_t t0, int64_t j0) {
  const uint8_t* wr[J];
  QMM_UNROLL for (int j = 0; j < J; ++j) wr[j] = w0 + j * p.w_row_bytes;
  const float* xr[R];
  QMM_UNROLL for (int r = 0; r < R; ++r) xr[r] = p.x + (t0 + r) * p.ldx;
  __m512 acc[R][J];
  QMM_UNROLL for (int r = 0; r < R; ++r) {
    QMM_UNROLL for (int j = 0; j < J; ++j) acc[r][j] = _mm512_setzero_ps();
  }
  constexpr int64_t kElementBytes = T == QType::kF32 ? 4 : 2;
  int64_t i = 0;
  if constexpr (R == 1 && J == 1) {
    // Decode's single-row tile: four accumulators, so that the FMA latency does not bound the
    // stream (one chain would allow 16 weights per 4 cycles).
    __m512 more[3] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    // The weights: each 4 KiB page touched once, kPageAhead bytes ahead (as in column_decode; in
    // a harness of F16 2048 x k products over 300 MB, 10-15% faster than every line 4 KiB ahead).
    for (; i + 64 <= p.k; i += 64) {
      touch_page_ahead(wr[0] + i * kElementBytes, 64 * kElementBytes);
      acc[0][0] = _mm512_fmadd_ps(_mm512_loadu_ps(xr[0] + i), wload<T>(wr[0], i), acc[0][0]);
      QMM_UNROLL for (int u = 1; u < 4; ++u) {
        more[u - 1] = _mm512_fmadd_ps(_mm512_loadu_ps(xr[0] + i + 16 * u), wload<T>(wr[0], i + 16 * u), more[u - 1]);
      }
    }
    acc[0][0] = _mm512_add_ps(_mm512_add_ps(acc[0][0], more[0]), _mm512_add_ps(more[1], more[2]));
  }
  for (; i + 16 <= p.k; i += 16) {
    __m512 xv[R];
    QMM_UNROLL for (int r = 0; r < R; ++r) xv[r] = _mm512_loadu_ps(xr[r] + i);
    // The same blocks of the next tile's rows (see qtile).
    QMM_UNROLL for (int j = 0; j < J; ++j) {
      _mm_prefetch(reinterpret_cast<const char*>(wr[j] + J * p.w_row_bytes + i * kElementBytes), _MM_HINT_T0);
    }
    QMM_UNROLL for (int j = 0; j < J; ++j) {
      const __m512 wv = wload<T>(wr[j], i);
      QMM_UNROLL for (int r = 0; r < R; ++r) acc[r][j] = _mm512_fmadd_ps(xv[r], wv, acc[r][j]);
    }
  }
  if (i < p.k) {
    const __mmask16 m = static_cast<__mmask16>((1u << (p.k - i)) - 1);
    __m512 xv[R];
    QMM_UNROLL for (int r = 0; r < R; ++r) xv[r] = _mm512_maskz_loadu_ps(m, xr[r] + i);
    QMM_UNROLL for (int j = 0; j < J; ++j) {
      const __m512 wv = wload_n<T>(wr[j], i, m);
      QMM_UNROLL for (int r = 0; r < R; ++r) acc[r][j] = _mm512_fmadd_ps(xv[r], wv, acc[r][j]);
    }
  }
  finish<R, J>(p, acc, t0, j0);
}

// --- Q8_0 / Q4_0 weights x quantized activations ---

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
}

// Blocks b and (when Two) b + 1 of a weight row: quants in zmm bytes 0-31 / 32-63 (Q4_0 as
// unsigned nibbles 0..15, in element order), fp32 scales in lanes 0-7 / 8-15 (0 for a missing
// second block).
template <QType T, bool Two>
inline void wq_load(const uint8_t* row, int64_t b, __m512i& q, __m512& d) {
  uint16_t h1 = 0;
  if constexpr (T == QType::kQ8_0) {
    const uint8_t* p0 = row + b * int64_t{sizeof(quant::BlockQ8_0)};
    const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p0 + 2));
    if constexpr (Two) {
      h1 = load_u16(p0 + 34);
      q = _mm512_inserti64x4(_mm512_castsi256_si512(lo),
                             _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p0 + 36)), 1);
    } else {
      q = _mm512_zextsi256_si512(lo);
    }
    d = _mm512_cvtph_ps(_mm256_set_m128i(_mm_set1_epi16(static_cast<short>(h1)),
                                         _mm_set1_epi16(static_cast<short>(load_u16(p0)))));
  } else {
    const uint8_t* p0 = row + b * int64_t{sizeof(quant::BlockQ4_0)};
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p0 + 2));
    __m128i hi = _mm_setzero_si128();
    if constexpr (Two) {
      h1 = load_u16(p0 + 18);
      hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p0 + 20));
    }
    // 128-bit lanes: block b's bytes twice, then block b + 1's twice; the second copy of each
    // shifted by 4, so that after the mask the lanes hold low nibbles (elements 0-15) then high
    // nibbles (elements 16-31).
    __m512i z = _mm512_permutexvar_epi64(_mm512_set_epi64(3, 2, 3, 2, 1, 0, 1, 0),
                                         _mm512_castsi256_si512(_mm256_set_m128i(hi, lo)));
    z = _mm512_srlv_epi64(z, _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0));
    q = _mm512_and_si512(z, _mm512_set1_epi8(0x0F));
    d = _mm512_cvtph_ps(_mm256_set_m128i(_mm_set1_epi16(static_cast<short>(h1)),
                                         _mm_set1_epi16(static_cast<short>(load_u16(p0)))));
  }
}

template <QType T, int R, int J>
void qtile(const Problem& p, const uint8_t* w0, int64_t t0, int64_t j0) {
  const int64_t nb = p.k / kActBlock;
  const uint8_t* wr[J];
  QMM_UNROLL for (int j = 0; j < J; ++j) wr[j] = w0 + j * p.w_row_bytes;
  const int8_t* xq[R];
  const float* xd[R];
  QMM_UNROLL for (int r = 0; r < R; ++r) {
    xq[r] = p.xq + (t0 + r) * p.ldxq;
    xd[r] = p.xd + (t0 + r) * p.ldxd;
  }
  __m512 acc[R][J];
  QMM_UNROLL for (int r = 0; r < R; ++r) {
    QMM_UNROLL for (int j = 0; j < J; ++j) acc[r][j] = _mm512_setzero_ps();
  }
  const __m512i zero = _mm512_setzero_si512();
  const __m512i scale_index = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);

  constexpr int64_t kBlockBytes = T == QType::kQ8_0 ? sizeof(quant::BlockQ8_0) : sizeof(quant::BlockQ4_0);
  auto step = [&]<bool Two>(int64_t b) {
    __m512i wq[J], wc[J];
    __m512 wd[J];
    // Weight rows stream from memory once: while this tile's rows are read, fetch the same
    // blocks of the next tile's rows (rows are contiguous, so that is the memory that follows).
    QMM_UNROLL for (int j = 0; j < J; ++j) {
      _mm_prefetch(reinterpret_cast<const char*>(wr[j] + J * p.w_row_bytes + b * kBlockBytes), _MM_HINT_T0);
    }
    QMM_UNROLL for (int j = 0; j < J; ++j) wq_load<T, Two>(wr[j], b, wq[j], wd[j]);
    if constexpr (T == QType::kQ8_0) {
      // -128 * (partial sums of w), the start value that undoes the activations' +128.
      QMM_UNROLL for (int j = 0; j < J; ++j) {
        wc[j] = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, _mm512_set1_epi8(-128), wq[j]));
      }
    }
    QMM_UNROLL for (int r = 0; r < R; ++r) {
      const __m512i a =
          Two ? _mm512_loadu_si512(xq[r] + b * kActBlock)
              : _mm512_zextsi256_si512(
                    _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[r] + b * kActBlock)));
      const __m128 d2 =
          Two ? _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(xd[r] + b)))
              : _mm_load_ss(xd[r] + b);
      const __m512 da = _mm512_permutexvar_ps(scale_index, _mm512_castps128_ps512(d2));
      if constexpr (T == QType::kQ4_0) {
        const __m512i start =
            _mm512_dpbusd_epi32(zero, _mm512_set1_epi8(8), _mm512_sub_epi8(zero, a));
        QMM_UNROLL for (int j = 0; j < J; ++j) {
          const __m512i dot = _mm512_dpbusd_epi32(start, wq[j], a);
          acc[r][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(da, wd[j]), acc[r][j]);
        }
      } else {
        const __m512i au = _mm512_xor_si512(a, _mm512_set1_epi8(-128));
        QMM_UNROLL for (int j = 0; j < J; ++j) {
          const __m512i dot = _mm512_dpbusd_epi32(wc[j], au, wq[j]);
          acc[r][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(da, wd[j]), acc[r][j]);
        }
      }
    }
  };
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) step.template operator()<true>(b);
  if (b < nb) step.template operator()<false>(b);
  finish<R, J>(p, acc, t0, j0);
}

// Q4_0R / Q8_0R weights (BlockQ4_0x4 / BlockQ8_0x4 groups of four blocks): one 64-byte load
// holds the quants of four blocks (Q4_0R: both halves as nibbles; Q8_0R: one half, as q + 128),
// their four scales sit together. The activations come regrouped to match (regroup_activation_rows),
// so a tile's inner loop only unpacks each weight group once and then spends five instructions
// per activation row x weight row.
constexpr int64_t kRegroupedGroupBytes = 256;  // regrouped activations of one 128-value group

// Per group of row r: the first 16 values of each of its four blocks (64 bytes), the last 16 (64
// bytes), -8 x the sum of each 4 activations (16 int32: the start that makes the unsigned
// nibbles q - 8; shifted left by 4 it undoes Q8_0R's + 128), and block i's scale in lanes
// 4i..4i+3 (16 floats).
void regroup_activation_rows(const Problem& p, int64_t r0, int64_t r1, uint8_t* xr, int64_t ldxr) {
  const int64_t groups = p.k / (4 * quant::kQK4_0);
  const __m512i zero = _mm512_setzero_si512(), eight = _mm512_set1_epi8(8);
  // 64-bit units of two 64-byte activation loads (blocks 0-1, 2-3): first halves, last halves.
  const __m512i first_halves = _mm512_set_epi64(13, 12, 9, 8, 5, 4, 1, 0);
  const __m512i last_halves = _mm512_set_epi64(15, 14, 11, 10, 7, 6, 3, 2);
  const __m512i per_lane = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
  for (int64_t r = r0; r < r1; ++r) {
    const int8_t* xq = p.xq + r * p.ldxq;
    const float* xd = p.xd + r * p.ldxd;
    for (int64_t g = 0; g < groups; ++g) {
      uint8_t* out = xr + r * ldxr + g * kRegroupedGroupBytes;
      const __m512i a0 = _mm512_loadu_si512(xq + g * 128);
      const __m512i a1 = _mm512_loadu_si512(xq + g * 128 + 64);
      const __m512i alo = _mm512_permutex2var_epi64(a0, first_halves, a1);
      const __m512i ahi = _mm512_permutex2var_epi64(a0, last_halves, a1);
      const __m512i start = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, eight, _mm512_sub_epi8(zero, alo)), eight,
                                                _mm512_sub_epi8(zero, ahi));
      _mm512_store_si512(out, alo);
      _mm512_store_si512(out + 64, ahi);
      _mm512_store_si512(out + 128, start);
      _mm512_store_ps(out + 192, _mm512_permutexvar_ps(per_lane, _mm512_castps128_ps512(_mm_loadu_ps(xd + g * 4))));
    }
  }
}

template <QType T, int R, int J>
void grouped_tile(const Problem& p, const uint8_t* w0, int64_t t0, int64_t j0) {
  static_assert(T == QType::kQ4_0R || T == QType::kQ8_0R);
  constexpr bool kQ4 = T == QType::kQ4_0R;
  constexpr int64_t kGroupBytes = kQ4 ? sizeof(quant::BlockQ4_0x4) : sizeof(quant::BlockQ8_0x4);
  const int64_t groups = p.k / (4 * quant::kQK4_0);
  const uint8_t* wr[J];
  QMM_UNROLL for (int j = 0; j < J; ++j) wr[j] = w0 + j * p.w_row_bytes;
  const uint8_t* xr[R];
  QMM_UNROLL for (int r = 0; r < R; ++r) xr[r] = p.xr + (t0 + r) * p.ldxr;
  __m512 acc[R][J];
  QMM_UNROLL for (int r = 0; r < R; ++r) {
    QMM_UNROLL for (int j = 0; j < J; ++j) acc[r][j] = _mm512_setzero_ps();
  }
  [[maybe_unused]] const __m512i nibble = _mm512_set1_epi8(0x0F);
  // Block i's scale to the four int32 sums of 128-bit lane i.
  const __m512i per_lane = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
  const int64_t g_end = p.g_end > 0 ? p.g_end : groups;
  for (int64_t g = p.g_begin; g < g_end; ++g) {
    __m512i lo[J], hi[J];
    __m512 ws[J];
    QMM_UNROLL for (int j = 0; j < J; ++j) {
      const uint8_t* grp = wr[j] + g * kGroupBytes;
      // Single-row tiles stream the weights in order (see run_tiles): fetch a fixed
      // distance ahead, every line of the group (its first and last byte); wider tiles read J
      // rows at once: fetch the same group of the next tile's rows.
      const int64_t ahead = J == 1 ? kSequentialAhead : J * p.w_row_bytes;
      _mm_prefetch(reinterpret_cast<const char*>(grp + ahead), _MM_HINT_T0);
      if (J == 1) _mm_prefetch(reinterpret_cast<const char*>(grp + ahead + kGroupBytes - 1), _MM_HINT_T0);
      if constexpr (kQ4) {
        const __m512i q = _mm512_loadu_si512(grp + 8);
        lo[j] = _mm512_and_si512(q, nibble);
        hi[j] = _mm512_and_si512(_mm512_srli_epi16(q, 4), nibble);
      } else {
        _mm_prefetch(reinterpret_cast<const char*>(grp + ahead + 128), _MM_HINT_T0);
        lo[j] = _mm512_loadu_si512(grp + 8);
        hi[j] = _mm512_loadu_si512(grp + 72);
      }
      ws[j] = _mm512_permutexvar_ps(per_lane, _mm512_castps128_ps512(_mm_cvtph_ps(
                                                  _mm_loadl_epi64(reinterpret_cast<const __m128i*>(grp)))));
    }
    QMM_UNROLL for (int r = 0; r < R; ++r) {
      const uint8_t* a = xr[r] + g * kRegroupedGroupBytes;
      const __m512i alo = _mm512_load_si512(a), ahi = _mm512_load_si512(a + 64);
      const __m512i start8 = _mm512_load_si512(a + 128);
      const __m512i start = kQ4 ? start8 : _mm512_slli_epi32(start8, 4);
      const __m512 da = _mm512_load_ps(a + 192);
      QMM_UNROLL for (int j = 0; j < J; ++j) {
        const __m512i dot = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(start, lo[j], alo), hi[j], ahi);
        acc[r][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(da, ws[j]), acc[r][j]);
      }
    }
  }
  if (!p.accumulate) return finish<R, J>(p, acc, t0, j0);
  QMM_UNROLL for (int r = 0; r < R; ++r) {
    QMM_UNROLL for (int j = 0; j < J; ++j) p.y[(t0 + r) * p.ldy + j0 + j] += _mm512_reduce_add_ps(acc[r][j]);
  }
}

// --- Q4_0C / Q8_0C weights: 16-row column panels (quant::PanelQuantsQ4_0, PanelQuantsQ8_0) ---
// One 64-byte load holds four quant bytes of each of 16 weight rows, one row per 32-bit lane
// (Q4_0C: as nibbles, low then high); vpdpbusd multiplies it with four activation bytes
// broadcast to every lane. Operand u = 0..7 of a 32-block pairs with activations 4u..4u+3. A
// block of P panels and one activation row costs 8 vpdpbusd per panel and then one convert,
// multiply and FMA for all 16 rows (the Q4_0R tiles spend those three per row and four blocks,
// which is what bound them with several activation rows). Per activation row and block, the
// regrouped activations hold the int32 start value -c x (sum of the block's quants) that makes the
// unsigned weights q - c (c = 8 for Q4_0's nibbles, 128 for Q8_0C's q + 128).

void column_starts(const Problem& p, int64_t r0, int64_t r1, uint8_t* xr, int64_t ldxr) {
  const int64_t blocks = p.k / quant::kQK4_0;
  const __m512i minus_c = _mm512_set1_epi16(p.type == QType::kQ4_0C ? -8 : -128);
  for (int64_t r = r0; r < r1; ++r) {
    auto* starts = reinterpret_cast<int32_t*>(xr + r * ldxr);
    for (int64_t b = 0; b < blocks; ++b) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.xq + r * p.ldxq + b * quant::kQK4_0));
      starts[b] = _mm512_reduce_add_epi32(_mm512_madd_epi16(_mm512_cvtepi8_epi16(q), minus_c));
    }
  }
}

// Activation rows [t0, t0 + R) x output features [j0, j0 + 16 P) (panels j0 / 16 ...), over the
// blocks [p.g_begin, p.g_end) of k (g_end <= 0: all), added to y when p.accumulate. (The panel
// layout places every block: the TileFn's weight pointer is unused.)
template <QType T, int R, int P>
void column_tile(const Problem& p, const uint8_t*, int64_t t0, int64_t j0) {
  constexpr int64_t kQuantBytes = kPanelQuantBytes<T>;
  const int64_t blocks = p.k / quant::kQK4_0, panel0 = j0 / quant::kPanelRows;
  const int64_t b_begin = p.g_end > 0 ? p.g_begin : 0, b_end = p.g_end > 0 ? p.g_end : blocks;
  [[maybe_unused]] const __m512i nibble = _mm512_set1_epi8(0x0F);
  __m512 acc[R][P];
  QMM_UNROLL for (int r = 0; r < R; ++r) {
    QMM_UNROLL for (int q = 0; q < P; ++q) acc[r][q] = _mm512_setzero_ps();
  }
  const int8_t* xq[R];
  const float* xd[R];
  const int32_t* starts[R];
  QMM_UNROLL for (int r = 0; r < R; ++r) {
    xq[r] = p.xq + (t0 + r) * p.ldxq;
    xd[r] = p.xd + (t0 + r) * p.ldxd;
    starts[r] = reinterpret_cast<const int32_t*>(p.xr + (t0 + r) * p.ldxr);
  }
  for (int64_t b = b_begin; b < b_end; ++b) {
    const quant::PanelBlockOffsets at = quant::panel_block_offsets(panel0, p.n / quant::kPanelRows, b, blocks, kQuantBytes);
    const uint8_t* quants[P];
    const uint8_t* scales[P];
    QMM_UNROLL for (int q = 0; q < P; ++q) {
      quants[q] = p.w + at.quants + q * at.panel_stride;
      scales[q] = p.w + at.scales + q * at.panel_stride;
    }
    // The block's quant lines and (every line count rounds up) its share of the scales' line.
    constexpr int kLines = kQuantBytes / 64 + 1;
    if (p.rows == 1) {
      // One row (an odd number of blocks: column_decode's fallback) walks the panel's blocks in
      // order: one stream per thread, fetched a fixed distance ahead.
      QMM_UNROLL for (int line = 0; line < kLines; ++line) {
        _mm_prefetch(reinterpret_cast<const char*>(quants[0] + kSequentialAhead + 64 * line), _MM_HINT_T0);
      }
    } else if (t0 == 0) {
      // The first row tile brings the panels in from memory, later ones find them in L2: it also
      // fetches the same block of the next tile's panels.
      QMM_UNROLL for (int q = 0; q < P; ++q) {
        QMM_UNROLL for (int line = 0; line < kLines; ++line) {
          _mm_prefetch(reinterpret_cast<const char*>(quants[q] + P * at.panel_stride + 64 * line), _MM_HINT_T0);
        }
      }
    }
    __m512i dot[R][P];
    QMM_UNROLL for (int r = 0; r < R; ++r) {
      const __m512i start = _mm512_set1_epi32(starts[r][b]);
      QMM_UNROLL for (int q = 0; q < P; ++q) dot[r][q] = start;
    }
    QMM_UNROLL for (int m = 0; m < 4; ++m) {
      __m512i lo[P], hi[P];  // operands m and m + 4
      QMM_UNROLL for (int q = 0; q < P; ++q) {
        if constexpr (T == QType::kQ4_0C) {
          const __m512i w = _mm512_loadu_si512(quants[q] + 64 * m);
          lo[q] = _mm512_and_si512(w, nibble);
          hi[q] = _mm512_and_si512(_mm512_srli_epi16(w, 4), nibble);
        } else {
          lo[q] = _mm512_loadu_si512(quants[q] + 64 * m);
          hi[q] = _mm512_loadu_si512(quants[q] + 64 * (m + 4));
        }
      }
      QMM_UNROLL for (int r = 0; r < R; ++r) {
        int32_t a_lo, a_hi;  // activations 4m..4m+3 and 16 + 4m..16 + 4m + 3
        std::memcpy(&a_lo, xq[r] + b * quant::kQK4_0 + 4 * m, 4);
        std::memcpy(&a_hi, xq[r] + b * quant::kQK4_0 + 16 + 4 * m, 4);
        const __m512i bl = _mm512_set1_epi32(a_lo), bh = _mm512_set1_epi32(a_hi);
        QMM_UNROLL for (int q = 0; q < P; ++q) {
          dot[r][q] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(dot[r][q], lo[q], bl), hi[q], bh);
        }
      }
    }
    QMM_UNROLL for (int q = 0; q < P; ++q) {
      const __m512 ws = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales[q])));
      QMM_UNROLL for (int r = 0; r < R; ++r) {
        acc[r][q] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[r][q]), _mm512_mul_ps(_mm512_set1_ps(xd[r][b]), ws), acc[r][q]);
      }
    }
  }
  QMM_UNROLL for (int r = 0; r < R; ++r) {
    QMM_UNROLL for (int q = 0; q < P; ++q) {
      const int64_t j = j0 + 16 * q;
      __m512 s = acc[r][q];
      float* y = p.y + (t0 + r) * p.ldy + j;
      if (p.accumulate) {
        _mm512_storeu_ps(y, _mm512_add_ps(s, _mm512_loadu_ps(y)));
        continue;
      }
      if (p.bias) s = _mm512_add_ps(s, _mm512_loadu_ps(p.bias + j));
      if (p.residual) s = _mm512_add_ps(s, _mm512_loadu_ps(p.residual + (t0 + r) * p.ld_residual + j));
      _mm512_storeu_ps(y, s);
    }
  }
}

// Decode (one activation row) over one panel and the blocks [g_begin, g_end) of one segment of k
// (quant::panel_segment_blocks; run_column_tiles sets the range): the segment's blocks lie one
// after another in pairs (the quants of blocks 2g and 2g + 1, then their scales; 64-byte aligned
// in a model's tensors), so this walks them with one pointer. Four independent vpdpbusd chains per
// pair (each block's operands 0-3 and 4-7 apart); Q4_0C's high nibbles are taken in place
// (w & 0xF0, so 16 x q) and the chain shifted right by 4 at the end (exact: every product is a
// multiple of 16), one instruction fewer per load than shift-and-mask.
// Prefetches, measured in a harness (2048 x k products over 300 MB of weights, each variant on and
// off in turns, one thread or two) and in whole TinyLlama q4_0 decode steps:
//  - the weights once per 4 KiB page, kPageAhead bytes ahead: the hardware prefetchers do not
//    cross a page, so each page's stream had started anew with a demand miss. 25-35% more
//    bandwidth (a plain read loop gains as much: 57-64 to 74-82 GB/s with two threads); decode
//    80 to 103 tokens/s. Every line with prefetcht0 (1-9 KiB ahead) was slower: each holds an L1
//    miss buffer that the hardware prefetchers use better (7% slower for Q4_0C, 15% for Q8_0C).
//  - the activations, kActivationAhead blocks ahead: a panel's weight stream (18-27 KiB) evicts
//    them from L1, and a block's dot chains then waited on their loads. 15-28% with two threads
//    at k = 2048 and 5632 (4-5% with one); decode ~2.5%.
// Anything else (an odd number of blocks, several rows) runs column_tile<T, 1, 1>.
constexpr int64_t kActivationAhead = 16;  // blocks
// acc + vpdpbusd(u8, the four bytes at s8x4 in every lane), the broadcast folded into the
// instruction's memory operand ({1to16}), which GCC does not do for _mm512_set1_epi32: one uop
// fewer per weight line; decode keeps fewer uops in flight per line, so more lines in flight.
// (In the harness above: 2-15% more bandwidth at k = 2048-5632 with two threads; whole TinyLlama
// decode about 1%.)
inline __m512i dpbusd_broadcast(__m512i acc, __m512i u8, const int8_t* s8x4) {
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(u8), "m"(*reinterpret_cast<const int32_t*>(s8x4)));
  return acc;
}

template <QType T>
void column_decode(const Problem& p, const uint8_t* w0, int64_t t0, int64_t j0) {
  constexpr bool kQ4 = T == QType::kQ4_0C;
  constexpr int64_t kQuantBytes = kPanelQuantBytes<T>;
  constexpr int64_t kPairBytes = 2 * (kQuantBytes + int64_t{sizeof(quant::PanelScales)});
  static_assert(kPairBytes % 64 == 0);
  if (p.rows != 1 || p.g_end <= 0 || p.g_begin % 2 != 0 || p.g_end % 2 != 0) return column_tile<T, 1, 1>(p, w0, t0, j0);
  const int64_t blocks = p.k / quant::kQK4_0;
  const uint8_t* w =
      p.w + quant::panel_block_offsets(j0 / quant::kPanelRows, p.n / quant::kPanelRows, p.g_begin, blocks, kQuantBytes).quants;
  const auto* starts = reinterpret_cast<const int32_t*>(p.xr);
  const __m512i low_nibbles = _mm512_set1_epi8(0x0F), high_nibbles = _mm512_set1_epi8(static_cast<char>(0xF0));
  __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  for (int64_t b = p.g_begin; b < p.g_end; b += 2, w += kPairBytes) {
    const __m512i scales = _mm512_loadu_si512(w + 2 * kQuantBytes);
    // This panel's (or, near its end, the next panel's) activations kActivationAhead blocks on.
    const int64_t ahead = b + kActivationAhead < p.g_end ? b + kActivationAhead : b + kActivationAhead - (p.g_end - p.g_begin);
    _mm_prefetch(reinterpret_cast<const char*>(p.xq + ahead * quant::kQK4_0), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(starts + ahead), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(p.xd + ahead), _MM_HINT_T0);
    touch_page_ahead(w, kPairBytes);  // see above
    QMM_UNROLL for (int i = 0; i < 2; ++i) {
      const uint8_t* quants = w + i * kQuantBytes;
      const int8_t* a = p.xq + (b + i) * quant::kQK4_0;
      __m512i lo = _mm512_set1_epi32(starts[b + i]), hi = _mm512_setzero_si512();
      QMM_UNROLL for (int m = 0; m < 4; ++m) {
        // Activations 4m..4m+3 and 16 + 4m..16 + 4m + 3, broadcast by the vpdpbusd itself.
        if constexpr (kQ4) {
          const __m512i q = _mm512_loadu_si512(quants + 64 * m);
          lo = dpbusd_broadcast(lo, _mm512_and_si512(q, low_nibbles), a + 4 * m);
          hi = dpbusd_broadcast(hi, _mm512_and_si512(q, high_nibbles), a + 16 + 4 * m);
        } else {
          lo = dpbusd_broadcast(lo, _mm512_loadu_si512(quants + 64 * m), a + 4 * m);
          hi = dpbusd_broadcast(hi, _mm512_loadu_si512(quants + 64 * (m + 4)), a + 16 + 4 * m);
        }
      }
      const __m512i dot = _mm512_add_epi32(lo, kQ4 ? _mm512_srai_epi32(hi, 4) : hi);
      const __m512 ws = _mm512_cvtph_ps(i == 0 ? _mm512_castsi512_si256(scales) : _mm512_extracti64x4_epi64(scales, 1));
      acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(_mm512_set1_ps(p.xd[b + i]), ws), acc[i]);
    }
  }
  __m512 s = _mm512_add_ps(acc[0], acc[1]);
  float* y = p.y + j0;
  if (p.accumulate) return _mm512_storeu_ps(y, _mm512_add_ps(s, _mm512_loadu_ps(y)));
  if (p.bias) s = _mm512_add_ps(s, _mm512_loadu_ps(p.bias + j0));
  if (p.residual) s = _mm512_add_ps(s, _mm512_loadu_ps(p.residual + j0));
  _mm512_storeu_ps(y, s);
}

#define QMM_COLUMN_TILES(T)                                                                        \
  {{&column_decode<T>, &column_tile<T, 1, 2>}, {&column_tile<T, 2, 1>, &column_tile<T, 2, 2>}, \
   {&column_tile<T, 3, 1>, &column_tile<T, 3, 2>}, {&column_tile<T, 4, 1>, &column_tile<T, 4, 2>}}
constexpr TileFn kQ4CTiles[kR][2] = QMM_COLUMN_TILES(QType::kQ4_0C);
constexpr TileFn kQ8CTiles[kR][2] = QMM_COLUMN_TILES(QType::kQ8_0C);
#undef QMM_COLUMN_TILES

#define QMM_ROW(F, T, R) {&F<T, R, 1>, &F<T, R, 2>, &F<T, R, 3>, &F<T, R, 4>}
#define QMM_TABLE(F, T) {QMM_ROW(F, T, 1), QMM_ROW(F, T, 2), QMM_ROW(F, T, 3), QMM_ROW(F, T, 4)}
constexpr TileFn kF32Tiles[kR][kJ] = QMM_TABLE(ftile, QType::kF32);
constexpr TileFn kF16Tiles[kR][kJ] = QMM_TABLE(ftile, QType::kF16);
constexpr TileFn kBF16Tiles[kR][kJ] = QMM_TABLE(ftile, QType::kBF16);
constexpr TileFn kQ8Tiles[kR][kJ] = QMM_TABLE(qtile, QType::kQ8_0);
constexpr TileFn kQ4Tiles[kR][kJ] = QMM_TABLE(qtile, QType::kQ4_0);
constexpr TileFn kQ4RTiles[kR][kJ] = QMM_TABLE(grouped_tile, QType::kQ4_0R);
constexpr TileFn kQ8RTiles[kR][kJ] = QMM_TABLE(grouped_tile, QType::kQ8_0R);
#undef QMM_TABLE
#undef QMM_ROW


// Q4_0 with many activation rows runs on the Q8_0 tiles after unpacking each panel
// (run_unpacked_to_q8_0); decode (few rows) stays on the Q4 tiles, which read half the bytes.
// Q4_0R and Q8_0R always run their own tiles: with the activations regrouped they cost fewer
// instructions per multiply-add than the Q8_0 tiles.
constexpr int64_t kQ4AsQ8MinRows = 16;

int64_t regrouped_row_bytes(const Problem& p) {
  if (quant::is_panel_type(p.type)) return (p.k / quant::kQK4_0 * int64_t{sizeof(int32_t)} + 63) / 64 * 64;
  const bool grouped = p.type == QType::kQ4_0R || p.type == QType::kQ8_0R;
  return grouped ? p.k / (4 * quant::kQK4_0) * kRegroupedGroupBytes : 0;
}

void regroup_rows(const Problem& p, int64_t r0, int64_t r1, uint8_t* xr, int64_t ldxr) {
  if (quant::is_panel_type(p.type)) return column_starts(p, r0, r1, xr, ldxr);
  regroup_activation_rows(p, r0, r1, xr, ldxr);
}

// With several activation rows and a long k, a tile's regrouped activations (256 bytes per row and
// group) and weight rows would not fit in L1 together: each panel then runs over k in passes of
// kGroupsPerPass groups, the later ones adding to y.
constexpr int64_t kGroupsPerPass = 16;

void run_grouped_tiles(const Problem& p, const TileFn (&fns)[kR][kJ], int64_t j0, int64_t j1) {
  const int64_t groups = p.k / (4 * quant::kQK4_0);
  if (p.rows < 2 || groups <= kGroupsPerPass + kGroupsPerPass / 2) return run_tiles<Isa::kAvx512>(p, fns, j0, j1);
  for (int64_t jp = j0; jp < j1; jp += kPanel) {
    const int64_t je = std::min(j1, jp + kPanel);
    for (int64_t g = 0; g < groups; g += kGroupsPerPass) {
      Problem pass = p;
      pass.g_begin = g;
      pass.g_end = std::min(groups, g + kGroupsPerPass);
      pass.accumulate = g > 0;
      run_panel<Isa::kAvx512>(pass, fns, p.w + jp * p.w_row_bytes, jp, je);
    }
  }
}

void block(const Problem& p, int64_t j0, int64_t j1) {
  if (p.type == QType::kQ4_0 && p.rows >= kQ4AsQ8MinRows) {
    return run_unpacked_to_q8_0<Isa::kAvx512>(p, kQ8Tiles, j0, j1);
  }
  switch (p.type) {
    case QType::kF32: run_tiles<Isa::kAvx512>(p, kF32Tiles, j0, j1); return;
    case QType::kF16: run_tiles<Isa::kAvx512>(p, kF16Tiles, j0, j1); return;
    case QType::kBF16: run_tiles<Isa::kAvx512>(p, kBF16Tiles, j0, j1); return;
    case QType::kQ8_0: run_tiles<Isa::kAvx512>(p, kQ8Tiles, j0, j1); return;
    case QType::kQ4_0: run_tiles<Isa::kAvx512>(p, kQ4Tiles, j0, j1); return;
    case QType::kQ4_0R: run_grouped_tiles(p, kQ4RTiles, j0, j1); return;
    case QType::kQ8_0R: run_grouped_tiles(p, kQ8RTiles, j0, j1); return;
    case QType::kQ4_0C: run_column_tiles<Isa::kAvx512>(p, kQ4CTiles, j0, j1); return;
    case QType::kQ8_0C: run_column_tiles<Isa::kAvx512>(p, kQ8CTiles, j0, j1); return;
    case QType::kQ4_K: case QType::kQ6_K: run_dequantized<Isa::kAvx512>(p, kF32Tiles, j0, j1); return;
  }
}

void quantize_rows(const float* x, int64_t ldx, int64_t r0, int64_t r1, int64_t k, int8_t* xq,
                   int64_t ldxq, float* xd, int64_t ldxd) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * ldx;
    for (int64_t b = 0; b < k / kActBlock; ++b) {
      const __m512 v0 = _mm512_loadu_ps(xr + b * kActBlock);
      const __m512 v1 = _mm512_loadu_ps(xr + b * kActBlock + 16);
      const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
      const float d = amax / 127.0f;
      const __m512 id = _mm512_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
      int8_t* q = xq + r * ldxq + b * kActBlock;
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q),
                       _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v0, id))));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16),
                       _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v1, id))));
      xd[r * ldxd + b] = d;
    }
  }
}

const Kernels kAvx512 = {quantize_rows, block, regrouped_row_bytes, regroup_rows};

#undef QMM_UNROLL

}  // namespace

const Kernels& avx512_qmm_kernels() { return kAvx512; }

}  // namespace tessera::native::qmm

#pragma GCC diagnostic pop
#pragma GCC pop_options
