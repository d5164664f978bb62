// quant_matmul's AVX2 kernels (with FMA and F16C): register tiles of up to 2 activation rows x 4
// weight rows, one 32-block per ymm. Q4_0: vpmaddubsw of the unsigned nibbles with the int8
// activations, the -8 offset subtracted as 8 * sum(a) in 16-bit; Q8_0: vpmaddubsw(|w|, sign(a, w))
// (no saturation: |w| <= 128, |a| <= 127). Float weights: vcvtph2ps (F16), a shift (BF16), FMA.
// Q4_0C / Q8_0C (the 16-row panels models use): up to 4 activation rows x 8 weight rows per ymm,
// activations broadcast (see column_tile).
// Everything after the target pragma runs only after quant_matmul_isa_runs(Isa::kAvx2).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backends/native/quant_matmul_internal.h"
#include "backends/native/quant_matmul_panels.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace tessera::native::qmm {
namespace {

using quant::QType;
// The tile loops over R / J must unroll for the accumulators to live in registers.
#define QMM_UNROLL _Pragma("GCC unroll 8")

constexpr int kR = 2, kJ = 4;

inline void store_out(const Problem& p, int64_t t, int64_t j, float s) {
  if (p.bias) s += p.bias[j];
  if (p.residual) s += p.residual[t * p.ld_residual + j];
  p.y[t * p.ldy + j] = s;
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
}

// --- float weights ---

template <QType T>
inline __m256 wload(const uint8_t* row, int64_t i) {
  if constexpr (T == QType::kF32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + i);
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i));
    if constexpr (T == QType::kF16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}

template <QType T>
inline float wscalar(const uint8_t* row, int64_t i) {
  if constexpr (T == QType::kF32) {
    return reinterpret_cast<const float*>(row)[i];
  } else if constexpr (T == QType::kF16) {
    return _cvtsh_ss(load_u16(row + 2 * i));
  } else {
    const uint32_t b = uint32_t{load_u16(row + 2 * i)} << 16;
    float f;
    std::memcpy(&f, &b, 4);
    return f;
  }
}

template <QType T, int R, int J>
void ftile(const Problem& p, const uint8_t* w0, int64_t t0, int64_t j0) {
  const uint8_t* wr[J];
  QMM_UNROLL for (int j = 0; j < J; ++j) wr[j] = w0 + j * p.w_row_bytes;
  const float* xr[R];
  QMM_UNROLL for (int r = 0; r < R; ++r) xr[r] = p.x + (t0 + r) * p.ldx;
  // U independent accumulators per output, so that at least four FMA chains are in flight: one
  // chain (a decode tile, R = J = 1) waits out the FMA latency on every step (F16 decode-sized
  // products ran 8-12% slower that way on a Zen 3).
  constexpr int U = R * J >= 4 ? 1 : (R * J == 1 ? 4 : 2);
  __m256 acc[U][R][J];
  QMM_UNROLL for (int u = 0; u < U; ++u) {
    QMM_UNROLL for (int r = 0; r < R; ++r) {
      QMM_UNROLL for (int j = 0; j < J; ++j) acc[u][r][j] = _mm256_setzero_ps();
    }
  }
  auto step = [&](int u, int64_t i) {
    __m256 xv[R];
    QMM_UNROLL for (int r = 0; r < R; ++r) xv[r] = _mm256_loadu_ps(xr[r] + i);
    QMM_UNROLL for (int j = 0; j < J; ++j) {
      const __m256 wv = wload<T>(wr[j], i);
      QMM_UNROLL for (int r = 0; r < R; ++r) acc[u][r][j] = _mm256_fmadd_ps(xv[r], wv, acc[u][r][j]);
    }
  };
  int64_t i = 0;
  for (; i + 8 * U <= p.k; i += 8 * U) {
    QMM_UNROLL for (int u = 0; u < U; ++u) step(u, i + 8 * u);
  }
  for (; i + 8 <= p.k; i += 8) step(0, i);
  QMM_UNROLL for (int u = 1; u < U; ++u) {
    QMM_UNROLL for (int r = 0; r < R; ++r) {
      QMM_UNROLL for (int j = 0; j < J; ++j) acc[0][r][j] = _mm256_add_ps(acc[0][r][j], acc[u][r][j]);
    }
  }
  QMM_UNROLL for (int r = 0; r < R; ++r) {
    QMM_UNROLL for (int j = 0; j < J; ++j) {
      float s = hsum(acc[0][r][j]);
      for (int64_t e = i; e < p.k; ++e) s += xr[r][e] * wscalar<T>(wr[j], e);
      store_out(p, t0 + r, j0 + j, s);
    }
  }
}

// --- Q8_0 / Q4_0 weights x quantized activations ---

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
  __m256 acc[R][J];
  QMM_UNROLL for (int r = 0; r < R; ++r) {
    QMM_UNROLL for (int j = 0; j < J; ++j) acc[r][j] = _mm256_setzero_ps();
  }
  const __m256i ones16 = _mm256_set1_epi16(1);
  for (int64_t b = 0; b < nb; ++b) {
    __m256i a[R], start[R];
    float da[R];
    QMM_UNROLL for (int r = 0; r < R; ++r) {
      a[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[r] + b * kActBlock));
      da[r] = xd[r][b];
      if constexpr (T == QType::kQ4_0) start[r] = _mm256_maddubs_epi16(_mm256_set1_epi8(8), a[r]);
    }
    QMM_UNROLL for (int j = 0; j < J; ++j) {
      __m256i dot16[R];
      float dw;
      if constexpr (T == QType::kQ4_0) {
        const uint8_t* p0 = wr[j] + b * int64_t{sizeof(quant::BlockQ4_0)};
        dw = _cvtsh_ss(load_u16(p0));
        const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p0 + 2));
        const __m128i m = _mm_set1_epi8(0x0F);
        const __m256i q = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(x, 4), m),
                                           _mm_and_si128(x, m));
        QMM_UNROLL for (int r = 0; r < R; ++r) {
          dot16[r] = _mm256_sub_epi16(_mm256_maddubs_epi16(q, a[r]), start[r]);
        }
      } else {
        const uint8_t* p0 = wr[j] + b * int64_t{sizeof(quant::BlockQ8_0)};
        dw = _cvtsh_ss(load_u16(p0));
        const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p0 + 2));
        const __m256i wabs = _mm256_abs_epi8(w);
        QMM_UNROLL for (int r = 0; r < R; ++r) {
          dot16[r] = _mm256_maddubs_epi16(wabs, _mm256_sign_epi8(a[r], w));
        }
      }
      QMM_UNROLL for (int r = 0; r < R; ++r) {
        const __m256 dot = _mm256_cvtepi32_ps(_mm256_madd_epi16(dot16[r], ones16));
        acc[r][j] = _mm256_fmadd_ps(dot, _mm256_set1_ps(da[r] * dw), acc[r][j]);
      }
    }
  }
  QMM_UNROLL for (int r = 0; r < R; ++r) {
    QMM_UNROLL for (int j = 0; j < J; ++j) store_out(p, t0 + r, j0 + j, hsum(acc[r][j]));
  }
}

// --- Q4_0C / Q8_0C weights: 16-row column panels (quant::PanelQuantsQ4_0, PanelQuantsQ8_0) ---
// A 64-byte panel load holds four quant bytes of each of 16 weight rows, one row per 32-bit lane:
// here two ymm halves of 8 rows. vpmaddubsw of a half with four activation bytes broadcast to
// every lane leaves in each lane two 16-bit sums of two products of that lane's row; one
// vpmaddwd with ones at the end of the block makes them the row's int32 dot, and one convert,
// multiply and FMA scale 8 rows at once. The per-row tiles (qtile) spend those three, a
// vpmaddwd and the nibble unpacking per row and block.
//  - Q4_0C: the nibbles (0..15) are the unsigned operand, activations in [-127, 127]: a 16-bit
//    sum of two products is at most 3810 in size, so the eight of a block add up in 16 bits
//    (<= 30480) before the one vpmaddwd; the -8 offset is the int32 start value -8 x sum(a) of
//    the regrouped activations (column_starts).
//  - Q8_0C (quants stored as q + 128): the top bit flipped back gives q, and vpmaddubsw(|q|,
//    sign(a, q)) the products (|q| <= 128: a pair sums to at most 32512, so every one is widened
//    to 32 bits at once).

inline int32_t hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
  return _mm_cvtsi128_si32(s);
}

inline __m256i broadcast4(const int8_t* a) {
  int32_t v;
  std::memcpy(&v, a, 4);
  return _mm256_set1_epi32(v);
}

// Per activation row and block: the int32 start value -8 x sum(a) of the block (Q4_0C only).
int64_t regrouped_row_bytes(const Problem& p) {
  if (p.type != QType::kQ4_0C) return 0;
  return (p.k / quant::kQK4_0 * int64_t{sizeof(int32_t)} + 63) / 64 * 64;
}

void column_starts(const Problem& p, int64_t r0, int64_t r1, uint8_t* xr, int64_t ldxr) {
  const int64_t blocks = p.k / quant::kQK4_0;
  const __m256i ones = _mm256_set1_epi8(1), minus8 = _mm256_set1_epi16(-8);
  for (int64_t r = r0; r < r1; ++r) {
    auto* starts = reinterpret_cast<int32_t*>(xr + r * ldxr);
    for (int64_t b = 0; b < blocks; ++b) {
      const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.xq + r * p.ldxq + b * quant::kQK4_0));
      starts[b] = hsum_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(ones, a), minus8));
    }
  }
}

// Activation rows [t0, t0 + R) x output features [j0, j0 + 16 P) (panels j0 / 16 ...), over the
// blocks [p.g_begin, p.g_end) of k (g_end <= 0: all), added to y when p.accumulate.
template <QType T, int R, int P>
void column_tile(const Problem& p, const uint8_t*, int64_t t0, int64_t j0) {
  constexpr bool kQ4 = T == QType::kQ4_0C;
  constexpr int64_t kQuantBytes = kPanelQuantBytes<T>;
  const int64_t blocks = p.k / quant::kQK4_0, panel0 = j0 / quant::kPanelRows;
  const int64_t b_begin = p.g_end > 0 ? p.g_begin : 0, b_end = p.g_end > 0 ? p.g_end : blocks;
  const __m256i ones16 = _mm256_set1_epi16(1);
  [[maybe_unused]] const __m256i nibble = _mm256_set1_epi8(0x0F);
  [[maybe_unused]] const __m256i top_bit = _mm256_set1_epi8(static_cast<char>(0x80));
  __m256 acc[R][2 * P];
  QMM_UNROLL for (int r = 0; r < R; ++r) {
    QMM_UNROLL for (int h = 0; h < 2 * P; ++h) acc[r][h] = _mm256_setzero_ps();
  }
  const int8_t* xq[R];
  const float* xd[R];
  [[maybe_unused]] const int32_t* starts[R];
  QMM_UNROLL for (int r = 0; r < R; ++r) {
    xq[r] = p.xq + (t0 + r) * p.ldxq;
    xd[r] = p.xd + (t0 + r) * p.ldxd;
    if constexpr (kQ4) starts[r] = reinterpret_cast<const int32_t*>(p.xr + (t0 + r) * p.ldxr);
  }
  for (int64_t b = b_begin; b < b_end; ++b) {
    const quant::PanelBlockOffsets at = quant::panel_block_offsets(panel0, p.n / quant::kPanelRows, b, blocks, kQuantBytes);
    constexpr int kLines = kQuantBytes / 64 + 1;  // the block's quant lines and its scales' line
    if (p.rows == 1) {
      // Decode walks a panel's blocks in order: one stream, fetched ahead.
      QMM_UNROLL for (int line = 0; line < kLines; ++line) {
        _mm_prefetch(reinterpret_cast<const char*>(p.w + at.quants + kSequentialAhead + 64 * line), _MM_HINT_T0);
      }
    } else if (t0 == 0) {
      // The first row tile brings the panels in, later ones find them in L2: it also fetches the
      // same block of the next tile's panels.
      QMM_UNROLL for (int q = 0; q < P; ++q) {
        QMM_UNROLL for (int line = 0; line < kLines; ++line) {
          _mm_prefetch(reinterpret_cast<const char*>(p.w + at.quants + (P + q) * at.panel_stride + 64 * line), _MM_HINT_T0);
        }
      }
    }
    QMM_UNROLL for (int q = 0; q < P; ++q) {
      const uint8_t* quants = p.w + at.quants + q * at.panel_stride;
      const uint8_t* scales = p.w + at.scales + q * at.panel_stride;
      QMM_UNROLL for (int h = 0; h < 2; ++h) {  // rows 8h .. 8h + 7 of the panel
        __m256i dot[R];
        if constexpr (kQ4) {
          QMM_UNROLL for (int m = 0; m < 4; ++m) {  // operands m and m + 4
            const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(quants + 64 * m + 32 * h));
            const __m256i lo = _mm256_and_si256(w, nibble);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(w, 4), nibble);
            QMM_UNROLL for (int r = 0; r < R; ++r) {
              const int8_t* a = xq[r] + b * quant::kQK4_0 + 4 * m;
              const __m256i d = _mm256_add_epi16(_mm256_maddubs_epi16(lo, broadcast4(a)),
                                                 _mm256_maddubs_epi16(hi, broadcast4(a + 16)));
              dot[r] = m == 0 ? d : _mm256_add_epi16(dot[r], d);
            }
          }
          QMM_UNROLL for (int r = 0; r < R; ++r) {
            dot[r] = _mm256_add_epi32(_mm256_madd_epi16(dot[r], ones16), _mm256_set1_epi32(starts[r][b]));
          }
        } else {
          QMM_UNROLL for (int u = 0; u < 8; ++u) {  // operand u: activations 4u .. 4u + 3
            const __m256i w = _mm256_xor_si256(
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(quants + 64 * u + 32 * h)), top_bit);
            const __m256i wabs = _mm256_abs_epi8(w);
            QMM_UNROLL for (int r = 0; r < R; ++r) {
              const __m256i a = _mm256_sign_epi8(broadcast4(xq[r] + b * quant::kQK4_0 + 4 * u), w);
              const __m256i d = _mm256_madd_epi16(_mm256_maddubs_epi16(wabs, a), ones16);
              dot[r] = u == 0 ? d : _mm256_add_epi32(dot[r], d);
            }
          }
        }
        const __m256 ws = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + 16 * h)));
        QMM_UNROLL for (int r = 0; r < R; ++r) {
          acc[r][2 * q + h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[r]), _mm256_mul_ps(_mm256_set1_ps(xd[r][b]), ws),
                                              acc[r][2 * q + h]);
        }
      }
    }
  }
  QMM_UNROLL for (int r = 0; r < R; ++r) {
    QMM_UNROLL for (int h = 0; h < 2 * P; ++h) {
      const int64_t j = j0 + 8 * h;
      __m256 s = acc[r][h];
      float* y = p.y + (t0 + r) * p.ldy + j;
      if (p.accumulate) {
        _mm256_storeu_ps(y, _mm256_add_ps(s, _mm256_loadu_ps(y)));
        continue;
      }
      if (p.bias) s = _mm256_add_ps(s, _mm256_loadu_ps(p.bias + j));
      if (p.residual) s = _mm256_add_ps(s, _mm256_loadu_ps(p.residual + (t0 + r) * p.ld_residual + j));
      _mm256_storeu_ps(y, s);
    }
  }
}

// Tiles of up to 4 activation rows x 1 panel (16 output features in two ymm accumulators per row).
constexpr int kColumnRows = 4;
#define QMM_COLUMN_TILES(T) \
  {{&column_tile<T, 1, 1>}, {&column_tile<T, 2, 1>}, {&column_tile<T, 3, 1>}, {&column_tile<T, 4, 1>}}
constexpr TileFn kQ4CTiles[kColumnRows][1] = QMM_COLUMN_TILES(QType::kQ4_0C);
constexpr TileFn kQ8CTiles[kColumnRows][1] = QMM_COLUMN_TILES(QType::kQ8_0C);
#undef QMM_COLUMN_TILES

#define QMM_ROW(F, T, R) {&F<T, R, 1>, &F<T, R, 2>, &F<T, R, 3>, &F<T, R, 4>}
#define QMM_TABLE(F, T) {QMM_ROW(F, T, 1), QMM_ROW(F, T, 2)}
constexpr TileFn kF32Tiles[kR][kJ] = QMM_TABLE(ftile, QType::kF32);
constexpr TileFn kF16Tiles[kR][kJ] = QMM_TABLE(ftile, QType::kF16);
constexpr TileFn kBF16Tiles[kR][kJ] = QMM_TABLE(ftile, QType::kBF16);
constexpr TileFn kQ8Tiles[kR][kJ] = QMM_TABLE(qtile, QType::kQ8_0);
constexpr TileFn kQ4Tiles[kR][kJ] = QMM_TABLE(qtile, QType::kQ4_0);
#undef QMM_TABLE
#undef QMM_ROW

void block(const Problem& p, int64_t j0, int64_t j1) {
  switch (p.type) {
    case QType::kF32: run_tiles<Isa::kAvx2>(p, kF32Tiles, j0, j1); return;
    case QType::kF16: run_tiles<Isa::kAvx2>(p, kF16Tiles, j0, j1); return;
    case QType::kBF16: run_tiles<Isa::kAvx2>(p, kBF16Tiles, j0, j1); return;
    case QType::kQ8_0: run_tiles<Isa::kAvx2>(p, kQ8Tiles, j0, j1); return;
    case QType::kQ4_0: run_tiles<Isa::kAvx2>(p, kQ4Tiles, j0, j1); return;
    case QType::kQ4_0C: run_column_tiles<Isa::kAvx2>(p, kQ4CTiles, j0, j1); return;
    case QType::kQ8_0C: run_column_tiles<Isa::kAvx2>(p, kQ8CTiles, j0, j1); return;
    case QType::kQ4_0R: case QType::kQ8_0R: run_unpacked_to_q8_0<Isa::kAvx2>(p, kQ8Tiles, j0, j1); return;
    case QType::kQ4_K: case QType::kQ6_K: run_dequantized<Isa::kAvx2>(p, kF32Tiles, j0, j1); return;
  }
}

void quantize_rows(const float* x, int64_t ldx, int64_t r0, int64_t r1, int64_t k, int8_t* xq,
                   int64_t ldxq, float* xd, int64_t ldxd) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * ldx;
    for (int64_t b = 0; b < k / kActBlock; ++b) {
      __m256 v[4];
      QMM_UNROLL for (int i = 0; i < 4; ++i) v[i] = _mm256_loadu_ps(xr + b * kActBlock + 8 * i);
      __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_and_ps(v[0], abs_mask), _mm256_and_ps(v[1], abs_mask)),
                               _mm256_max_ps(_mm256_and_ps(v[2], abs_mask), _mm256_and_ps(v[3], abs_mask)));
      __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
      m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
      m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
      const float d = _mm_cvtss_f32(m4) / 127.0f;
      const __m256 id = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
      __m256i q[4];
      QMM_UNROLL for (int i = 0; i < 4; ++i) q[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], id));
      const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]),
                                                _mm256_packs_epi32(q[2], q[3]));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(xq + r * ldxq + b * kActBlock),
                          _mm256_permutevar8x32_epi32(packed, order));
      xd[r * ldxd + b] = d;
    }
  }
}

const Kernels kAvx2 = {quantize_rows, block, regrouped_row_bytes, column_starts};

#undef QMM_UNROLL

}  // namespace

const Kernels& avx2_qmm_kernels() { return kAvx2; }

}  // namespace tessera::native::qmm

#pragma GCC pop_options
