// sgemm over tessera's threads: OpenBLAS itself runs single-threaded, each thread of the
// session's pool computes a block of C's columns (or rows). OpenBLAS's own worker threads spin
// for a long while after each call, taking a core from whatever runs next (another backend's
// kernel in a mixed plan); tessera's pool sleeps instead.
#include <cblas.h>

#include <algorithm>

#include "backends/blas/blas_kernels.h"

namespace tessera::blas {

void parallel_sgemm(ThreadPool* pool, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                    const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  openblas_set_num_threads(1);
  const int threads = pool ? pool->num_threads() : 1;
  // Below this much work a split costs more than it saves.
  const bool split = threads > 1 && m * n * k >= (int64_t{1} << 18);
  const auto ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
  auto block = [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    const float* ab = trans_a ? a + r0 : a + r0 * lda;
    const float* bb = trans_b ? b + c0 * ldb : b + c0;
    cblas_sgemm(CblasRowMajor, ta, tb, static_cast<blasint>(r1 - r0), static_cast<blasint>(c1 - c0),
                static_cast<blasint>(k), alpha, ab, static_cast<blasint>(lda), bb, static_cast<blasint>(ldb), beta,
                c + r0 * ldc + c0, static_cast<blasint>(ldc));
  };
  if (!split) return block(0, m, 0, n);
  if (n >= 16 * threads) {  // columns: blocks of whole 16-float vectors
    const int64_t units = (n + 15) / 16;
    pool->parallel_for(units, 1, [&](int64_t u0, int64_t u1) { block(0, m, u0 * 16, std::min(n, u1 * 16)); });
  } else {
    pool->parallel_for(m, 1, [&](int64_t r0, int64_t r1) { block(r0, r1, 0, n); });
  }
}

}  // namespace tessera::blas
