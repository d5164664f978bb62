// The native kernels compiled for AVX2 with FMA: the ISA policy (see isa_avx512.cc for the
// interface) and the kernel table. The whole file after the target pragma, avx2_kernels()
// included, runs only after cpu_supports(Isa::kAvx2) said yes.
#include <immintrin.h>

#include <cstdint>
#include <utility>

#include "backends/native/isa.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma")

namespace tessera::native {
namespace {

struct Avx2 {
  static constexpr int W = 8;
  using V = __m256;
  using M = __m256;  // all-ones lanes where true

  static __m256i first(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static V load_aligned(const float* p) { return _mm256_load_ps(p); }
  static V load_n(const float* p, int n) { return _mm256_maskload_ps(p, first(n)); }
  // Lanes [begin, end) from p[begin, end) (0 <= begin, end <= W), zeros elsewhere; the other
  // lanes' memory is not read.
  static V load_range(const float* p, int begin, int end) {
    return _mm256_maskload_ps(p, _mm256_andnot_si256(first(begin), first(end)));
  }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static void store_n(float* p, V v, int n) { _mm256_maskstore_ps(p, first(n), v); }
  static void stream(float* p, V v) { _mm256_stream_ps(p, v); }  // p 32-byte aligned
  static void fence() { _mm_sfence(); }

  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V div(V a, V b) { return _mm256_div_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V max(V a, V b) { return _mm256_max_ps(a, b); }  // a > b ? a : b
  static V min(V a, V b) { return _mm256_min_ps(a, b); }  // a < b ? a : b
  static V sqrt(V a) { return _mm256_sqrt_ps(a); }
  static V abs(V a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
  static V neg(V a) { return _mm256_xor_ps(a, _mm256_set1_ps(-0.0f)); }
  static V round(V a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static V copysign(V mag, V sign) {
    const V s = _mm256_set1_ps(-0.0f);
    return _mm256_or_ps(_mm256_andnot_ps(s, mag), _mm256_and_ps(s, sign));
  }

  static M lt(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
  static M le(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_LE_OQ); }
  static M eq(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_EQ_OQ); }
  static M neq(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_NEQ_OQ); }
  static M isnan(V a) { return _mm256_cmp_ps(a, a, _CMP_UNORD_Q); }
  static M mand(M a, M b) { return _mm256_and_ps(a, b); }
  static M mor(M a, M b) { return _mm256_or_ps(a, b); }
  static M mandnot(M a, M b) { return _mm256_andnot_ps(a, b); }  // !a && b
  static V select(M m, V t, V f) { return _mm256_blendv_ps(f, t, m); }

  // 2^k for integral k in [-126, 127], built in the exponent field.
  static V pow2(V k) {
    const __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127));
    return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
  }
  // y * 2^n for integral n in [-150, 130], in two halves so each factor is a normal float.
  static V ldexp(V y, V n) {
    const V half = _mm256_floor_ps(_mm256_mul_ps(n, _mm256_set1_ps(0.5f)));
    return _mm256_mul_ps(_mm256_mul_ps(y, pow2(half)), pow2(_mm256_sub_ps(n, half)));
  }
  // x = m * 2^e with m in [0.5, 1), for positive x; subnormals are scaled up first.
  static void frexp(V x, V& m, V& e) {
    const V tiny = _mm256_cmp_ps(x, _mm256_set1_ps(1.17549435e-38f), _CMP_LT_OQ);
    x = _mm256_blendv_ps(x, _mm256_mul_ps(x, _mm256_set1_ps(8388608.0f)), tiny);
    const __m256i bits = _mm256_castps_si256(x);
    const __m256i exponent = _mm256_sub_epi32(_mm256_srli_epi32(bits, 23), _mm256_set1_epi32(126));
    e = _mm256_sub_ps(_mm256_cvtepi32_ps(exponent), _mm256_and_ps(tiny, _mm256_set1_ps(23.0f)));
    const __m256i mant = _mm256_or_si256(_mm256_and_si256(bits, _mm256_set1_epi32(0x007fffff)),
                                         _mm256_set1_epi32(0x3f000000));
    m = _mm256_castsi256_ps(mant);
  }
  // lo = a0 b0 a1 b1 a2 b2 a3 b3, hi = a4 b4 .. a7 b7: two vectors interleaved.
  static void zip(V a, V b, V& lo, V& hi) {
    const V l = _mm256_unpacklo_ps(a, b), h = _mm256_unpackhi_ps(a, b);
    lo = _mm256_permute2f128_ps(l, h, 0x20);
    hi = _mm256_permute2f128_ps(l, h, 0x31);
  }
  // even = a0 a2 a4 a6 b0 b2 b4 b6, odd = a1 a3 .. b7: zip's inverse.
  static void unzip(V a, V b, V& even, V& odd) {
    // per 128-bit lane a0 a2 b0 b2 | a4 a6 b4 b6, then the 64-bit pairs in order 0 2 1 3
    const V e = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
    const V o = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
    even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), _MM_SHUFFLE(3, 1, 2, 0)));
    odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o), _MM_SHUFFLE(3, 1, 2, 0)));
  }
  static float hsum(V a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
};

}  // namespace
}  // namespace tessera::native

#include "backends/native/simd_math.h"
// (order matters: the interpreter and row kernels use the math templates)
#include "backends/native/simd_eltwise.h"
#include "backends/native/simd_conv.h"
#include "backends/native/simd_deconv.h"
#include "backends/native/simd_gemm.h"
#include "backends/native/simd_rows.h"
#include "backends/native/simd_llm.h"
#include "backends/native/simd_winograd.h"
#include "backends/native/simd_depthwise.h"
#include "backends/native/simd_table.h"

namespace tessera::native {

const IsaKernels& avx2_kernels() {
  // 6 x 16: 12 accumulators, 2 B vectors and a broadcast A value in the 16 ymm registers.
  // Conv: 6 channels x 16 pixels, 12 accumulators. ConvTranspose: 4 columns x 24 input pixels
  // (a multiple of 4 keeps KW = 4 groups whole), 12 accumulators.
  static const IsaKernels k = simd::with_deconv<Avx2, 4, 12>(
      simd::with_conv<Avx2, 6, 2>(simd::make_kernels<Avx2, 6, 2, 12>(Isa::kAvx2)));
  return k;
}

}  // namespace tessera::native

#pragma GCC pop_options
