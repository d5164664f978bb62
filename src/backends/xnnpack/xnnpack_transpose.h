// The layout conversions at a compiled subgraph's boundary (NCHW outside, NHWC inside), run on the
// kernel's pthreadpool (tessera's threads) so that their cost is measured with the kernel.
#pragma once

#include <pthreadpool.h>

#include <cstdint>

namespace tessera::xnnpack {

// dst[b][c][r] = src[b][r][c] for b < batch, r < rows, c < cols. With (rows, cols) = (C, H*W) it
// turns NCHW into NHWC; with (H*W, C), NHWC into NCHW. pool may be null (the caller's thread).
void transpose_batched(const float* src, float* dst, int64_t batch, int64_t rows, int64_t cols,
                       pthreadpool_t pool);

}  // namespace tessera::xnnpack
