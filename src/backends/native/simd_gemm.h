// The SGEMM micro-kernel over an ISA policy S: an M x (NV * W) block of C held in M * NV vector
// registers, updated by one rank-1 product per k (NV loads of B, M broadcasts of A, M * NV FMAs).
//
// Only templates, included by the ISA files after their target pragma (see simd_math.h).
#pragma once

namespace tessera::native::simd {

// C[M x n] (+)= A[M x kc] * B[kc x NV*W], B packed [k][NV*W] and 64-byte aligned, A read
// through kALd: A(i, k) = a[k * kALd + i] when kALd > 0 (packed [k][kALd], kALd >= M), else
// a[i * lda + k] (rows of a channels-last activation read in place, no packing). n <= NV*W
// columns of C are written (masked at the edge).
// C starts from `start` (GemmStart): itself (accumulate), zero, or a bias per column (a vector
// of n floats) or per row (M floats): a bias in the accumulators costs no pass over C.
template <class S, int kALd, int M, int NV>
void gemm_block(int64_t kc, const float* a, int64_t lda, const float* b, float* c, int64_t ldc, int n,
                GemmStart start) {
  using V = typename S::V;
  constexpr int W = S::W;
  constexpr int NR = NV * W;
  // With `accumulate`, C is read into the accumulators before the products rather than added to
  // them after: a masked load of C right behind the masked store of the row before it, in the
  // same cache line (few columns), waited for that store each time (8 columns: 3x slower).
  V acc[M][NV];
#pragma GCC unroll 32
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) {
      const int cols = n - j * W;
      const float* p = c + i * ldc + j * W;
      if (cols <= 0 || start.kind == GemmStart::kZero) {
        acc[i][j] = S::zero();
      } else if (start.kind == GemmStart::kRowBias) {
        acc[i][j] = S::set1(start.bias[i]);
      } else {
        const float* q = start.kind == GemmStart::kC ? p : start.bias + j * W;
        acc[i][j] = cols >= W ? S::load(q) : S::load_n(q, cols);
      }
    }
  for (int64_t k = 0; k < kc; ++k) {
    V bv[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) bv[j] = S::load_aligned(b + j * W);
    if (start.prefetch_b != 0) {
#pragma GCC unroll 4
      for (int j = 0; j < NR; j += 16) __builtin_prefetch(b + start.prefetch_b + j, 0, 3);
    }
#pragma GCC unroll 32
    for (int i = 0; i < M; ++i) {
      const V av = S::set1(kALd > 0 ? a[i] : a[i * lda]);
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) acc[i][j] = S::fma(av, bv[j], acc[i][j]);
    }
    a += kALd > 0 ? kALd : 1;
    b += NR;
  }
  if (n == NR) {
#pragma GCC unroll 32
    for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) {
        S::store(c + i * ldc + j * W, acc[i][j]);
      }
    return;
  }
  // Unrolled like the loops above, so that the accumulators stay in registers.
#pragma GCC unroll 32
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) {
      const int cols = n - j * W;
      if (cols <= 0) continue;
      float* p = c + i * ldc + j * W;
      if (cols >= W) {
        S::store(p, acc[i][j]);
      } else {
        S::store_n(p, acc[i][j], cols);
      }
    }
}

// The packed form (IsaKernels::gemm_micro) and the in-place rows form (gemm_micro_rows).
template <class S, int kALd, int M, int NV>
void gemm_micro(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int n, GemmStart start) {
  gemm_block<S, kALd, M, NV>(kc, a, 0, b, c, ldc, n, start);
}
template <class S, int M, int NV>
void gemm_micro_rows(int64_t kc, const float* a, int64_t lda, const float* b, float* c, int64_t ldc, int n,
                     GemmStart start) {
  gemm_block<S, 0, M, NV>(kc, a, lda, b, c, ldc, n, start);
}

}  // namespace tessera::native::simd
