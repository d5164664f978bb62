// quant_matmul's AVX2 kernels (with FMA and F16C): register tiles of up to 2 activation rows x 4
// weight rows, one 32-block per ymm. Q4_0: vpmaddubsw of the unsigned nibbles with the int8
// activations, the -8 offset subtracted as 8 * sum(a) in 16-bit; Q8_0: vpmaddubsw(|w|, sign(a, w))
// (no saturation: |w| <= 128, |a| <= 127). Float weights: vcvtph2ps (F16), a shift (BF16), FMA.
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
  __m256 acc[R][J];
  QMM_UNROLL for (int r = 0; r < R; ++r) {
    QMM_UNROLL for (int j = 0; j < J; ++j) acc[r][j] = _mm256_setzero_ps();
  }
  int64_t i = 0;
  for (; i + 8 <= p.k; i += 8) {
    __m256 xv[R];
    QMM_UNROLL for (int r = 0; r < R; ++r) xv[r] = _mm256_loadu_ps(xr[r] + i);
    QMM_UNROLL for (int j = 0; j < J; ++j) {
      const __m256 wv = wload<T>(wr[j], i);
      QMM_UNROLL for (int r = 0; r < R; ++r) acc[r][j] = _mm256_fmadd_ps(xv[r], wv, acc[r][j]);
    }
  }
  QMM_UNROLL for (int r = 0; r < R; ++r) {
    QMM_UNROLL for (int j = 0; j < J; ++j) {
      float s = hsum(acc[r][j]);
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
    case QType::kQ4_0R: case QType::kQ8_0R: case QType::kQ4_0C: case QType::kQ8_0C:
      run_unpacked_to_q8_0<Isa::kAvx2>(p, kQ8Tiles, j0, j1); return;
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

const Kernels kAvx2 = {quantize_rows, block, nullptr, nullptr};

#undef QMM_UNROLL

}  // namespace

const Kernels& avx2_qmm_kernels() { return kAvx2; }

}  // namespace tessera::native::qmm

#pragma GCC pop_options
