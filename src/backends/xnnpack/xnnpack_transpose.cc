#include "backends/xnnpack/xnnpack_transpose.h"

#include <algorithm>

namespace tessera::xnnpack {
namespace {

struct TransposeJob {
  const float* src;
  float* dst;
  size_t rows, cols;
};

// One tile: rows [r0, r0 + nr) x cols [c0, c0 + nc) of batch b. Blocks of 8 x 8 keep both the
// reads and the writes within a few cache lines.
void transpose_tile(void* context, size_t b, size_t r0, size_t c0, size_t nr, size_t nc) {
  const auto& job = *static_cast<const TransposeJob*>(context);
  const float* src = job.src + b * job.rows * job.cols;
  float* dst = job.dst + b * job.rows * job.cols;
  constexpr size_t kBlock = 8;
  for (size_t rb = r0; rb < r0 + nr; rb += kBlock) {
    const size_t re = std::min(rb + kBlock, r0 + nr);
    for (size_t cb = c0; cb < c0 + nc; cb += kBlock) {
      const size_t ce = std::min(cb + kBlock, c0 + nc);
      for (size_t c = cb; c < ce; ++c)
        for (size_t r = rb; r < re; ++r) dst[c * job.rows + r] = src[r * job.cols + c];
    }
  }
}

}  // namespace

void transpose_batched(const float* src, float* dst, int64_t batch, int64_t rows, int64_t cols, pthreadpool_t pool) {
  TransposeJob job{src, dst, static_cast<size_t>(rows), static_cast<size_t>(cols)};
  // Tiles of about 16K elements; a short side is taken whole.
  const size_t tile_rows = std::min<size_t>(job.rows, 128);
  const size_t tile_cols = std::min<size_t>(job.cols, std::max<size_t>(128, 16384 / tile_rows));
  pthreadpool_parallelize_3d_tile_2d(pool, transpose_tile, &job, static_cast<size_t>(batch), job.rows, job.cols,
                                     tile_rows, tile_cols, 0);
}

}  // namespace tessera::xnnpack
