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

}  // namespace tessera::blas
