#include "backends/xnnpack/xnnpack_transpose.h"

#include <algorithm>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace tessera::xnnpack {
namespace {

struct TransposeJob {
  const float* src;
  float* dst;
  size_t rows, cols;
};

// dst[c * rows + r] = src[r * cols + c] over a 4 x 4 block at (r, c).
inline void transpose4x4(const float* src, float* dst, size_t r, size_t c, size_t rows,
                         size_t cols) {
#if defined(__SSE2__)
  __m128 a = _mm_loadu_ps(src + r * cols + c), b = _mm_loadu_ps(src + (r + 1) * cols + c);
  __m128 x = _mm_loadu_ps(src + (r + 2) * cols + c), y = _mm_loadu_ps(src + (r + 3) * cols + c);
  _MM_TRANSPOSE4_PS(a, b, x, y);
  _mm_storeu_ps(dst + c * rows + r, a);
  _mm_storeu_ps(dst + (c + 1) * rows + r, b);
  _mm_storeu_ps(dst + (c + 2) * rows + r, x);
  _mm_storeu_ps(dst + (c + 3) * rows + r, y);
#else
  for (size_t i = 0; i < 4; ++i)
    for (size_t j = 0; j < 4; ++j) dst[(c + j) * rows + r + i] = src[(r + i) * cols + c + j];
#endif
}

// One tile: rows [r0, r0 + nr) x cols [c0, c0 + nc) of batch b, in 4 x 4 blocks (scalar edges).
void transpose_tile(void* context, size_t b, size_t r0, size_t c0, size_t nr, size_t nc) {
  const auto& job = *static_cast<const TransposeJob*>(context);
  const size_t rows = job.rows, cols = job.cols;
  const float* src = job.src + b * rows * cols;
  float* dst = job.dst + b * rows * cols;
  const size_t r4 = r0 + nr / 4 * 4, c4 = c0 + nc / 4 * 4;
  // The longer of the two strides goes to the inner loop's 4 rows: writing 4 long destination
  // rows front to back (rows > cols) or reading 4 long source rows front to back.
  if (rows > cols) {
    for (size_t c = c0; c < c4; c += 4)
      for (size_t r = r0; r < r4; r += 4) transpose4x4(src, dst, r, c, rows, cols);
  } else {
    for (size_t r = r0; r < r4; r += 4)
      for (size_t c = c0; c < c4; c += 4) transpose4x4(src, dst, r, c, rows, cols);
  }
  for (size_t r = r0; r < r0 + nr; ++r)  // the edges
    for (size_t c = (r < r4 ? c4 : c0); c < c0 + nc; ++c) dst[c * rows + r] = src[r * cols + c];
}

}  // namespace

void transpose_batched(const float* src, float* dst, int64_t batch, int64_t rows, int64_t cols,
                       pthreadpool_t pool) {
  TransposeJob job{src, dst, static_cast<size_t>(rows), static_cast<size_t>(cols)};
  // Tiles of 128 x 128 (64 KiB in, 64 KiB out: within L2).
  const size_t tile_rows = std::min<size_t>(job.rows, 128);
  const size_t tile_cols = std::min<size_t>(job.cols, 128);
  pthreadpool_parallelize_3d_tile_2d(pool, transpose_tile, &job, static_cast<size_t>(batch),
                                     job.rows, job.cols, tile_rows, tile_cols, 0);
}

}  // namespace tessera::xnnpack
