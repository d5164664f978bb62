// The native kernels compiled for AVX-512 (F, DQ, BW, VL) with FMA: the ISA policy the simd_*.h
// templates are written against, and the kernel table. The whole file after the target pragma,
// avx512_kernels() included, runs only after cpu_supports(Isa::kAvx512) said yes.
#include <immintrin.h>

#include <cstdint>
#include <utility>

#include "backends/native/isa.h"

#pragma GCC push_options
#pragma GCC target("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_ps(), which -Wmaybe-uninitialized
// flags once inlined (GCC bug 105593, fixed in 12.3): not a problem of this code.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace tessera::native {
namespace {

// The ISA policy: W floats per vector V, comparison results in masks M.
struct Avx512 {
  static constexpr int W = 16;
  using V = __m512;
  using M = __mmask16;

  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static M first(int n) { return static_cast<M>((1u << n) - 1); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static V load_aligned(const float* p) { return _mm512_load_ps(p); }
  static V load_n(const float* p, int n) { return _mm512_maskz_loadu_ps(first(n), p); }
  // Lanes [begin, end) from p[begin, end) (0 <= begin, end <= W), zeros elsewhere; the other
  // lanes' memory is not read.
  static V load_range(const float* p, int begin, int end) {
    return _mm512_maskz_loadu_ps(static_cast<M>(first(end) & ~first(begin)), p);
  }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static void store_n(float* p, V v, int n) { _mm512_mask_storeu_ps(p, first(n), v); }
  // Non-temporal store (p 64-byte aligned); fence() orders these before later stores.
  static void stream(float* p, V v) { _mm512_stream_ps(p, v); }
  static void fence() { _mm_sfence(); }

  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V div(V a, V b) { return _mm512_div_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V max(V a, V b) { return _mm512_max_ps(a, b); }  // a > b ? a : b
  static V min(V a, V b) { return _mm512_min_ps(a, b); }  // a < b ? a : b
  static V sqrt(V a) { return _mm512_sqrt_ps(a); }
  static V abs(V a) { return _mm512_abs_ps(a); }
  static V neg(V a) { return _mm512_xor_ps(a, _mm512_set1_ps(-0.0f)); }
  static V round(V a) {
    return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static V copysign(V mag, V sign) {
    const V s = _mm512_set1_ps(-0.0f);
    return _mm512_or_ps(_mm512_andnot_ps(s, mag), _mm512_and_ps(s, sign));
  }

  static M lt(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
  static M le(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_LE_OQ); }
  static M eq(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
  static M neq(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_NEQ_OQ); }
  static M isnan(V a) { return _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q); }
  static M mand(M a, M b) { return static_cast<M>(a & b); }
  static M mor(M a, M b) { return static_cast<M>(a | b); }
  static M mandnot(M a, M b) { return static_cast<M>(~a & b); }  // !a && b
  static V select(M m, V t, V f) { return _mm512_mask_blend_ps(m, f, t); }

  // y * 2^n for integral n; scalef rounds once, including into the subnormals.
  static V ldexp(V y, V n) { return _mm512_scalef_ps(y, n); }
  // x = m * 2^e with m in [0.5, 1), for positive x (subnormals included).
  static void frexp(V x, V& m, V& e) {
    m = _mm512_getmant_ps(x, _MM_MANT_NORM_p5_1, _MM_MANT_SIGN_zero);
    e = _mm512_add_ps(_mm512_getexp_ps(x), _mm512_set1_ps(1.0f));
  }
  // lo = a0 b0 a1 b1 .. a7 b7, hi = a8 b8 .. a15 b15: two vectors interleaved.
  static void zip(V a, V b, V& lo, V& hi) {
    const __m512i first = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i second =
        _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    lo = _mm512_permutex2var_ps(a, first, b);
    hi = _mm512_permutex2var_ps(a, second, b);
  }
  // even = a0 a2 .. a14 b0 b2 .. b14, odd = a1 a3 .. b15: zip's inverse.
  static void unzip(V a, V b, V& even, V& odd) {
    const __m512i evens =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odds =
        _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    even = _mm512_permutex2var_ps(a, evens, b);
    odd = _mm512_permutex2var_ps(a, odds, b);
  }
  static float hsum(V a) { return _mm512_reduce_add_ps(a); }
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

const IsaKernels& avx512_kernels() {
  // 14 x 32: 28 accumulators, 2 B vectors and a broadcast A value fill the 32 zmm registers.
  // Conv: 12 output channels x 32 pixels, 24 accumulators. ConvTranspose: 12 columns x 32 input
  // pixels (4 columns x 64 pixels for a 1-channel output), 24 accumulators.
  static const IsaKernels k = simd::with_deconv<Avx512, 12, 24>(
      simd::with_conv<Avx512, 12, 2>(simd::make_kernels<Avx512, 14, 2, 28>(Isa::kAvx512)));
  return k;
}

}  // namespace tessera::native

#pragma GCC pop_options
#pragma GCC diagnostic pop
