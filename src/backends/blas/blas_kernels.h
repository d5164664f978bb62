// The blas backend's kernels (OpenBLAS through CBLAS): MatMul and Gemm as sgemm calls, Conv as
// im2col + sgemm per image and group.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/backend.h"
#include "backends/kernel_io.h"

namespace tessera::blas {

Status check_matmul_node(const Graph& g, int n);  // MatMul or Gemm
Status check_conv_node(const Graph& g, int n);
Result<std::unique_ptr<Kernel>> compile_matmul(const SubGraph& sg, int threads);  // MatMul or Gemm
Result<std::unique_ptr<Kernel>> compile_conv(const SubGraph& sg, int threads);

// C = alpha * op(A) * op(B) + beta * C (row-major), split over the pool's threads; OpenBLAS runs
// single-threaded inside (blas_gemm.cc says why).
void parallel_sgemm(ThreadPool* pool, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                    const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace tessera::blas
