// The blas backend's kernels (OpenBLAS through CBLAS): MatMul and Gemm as sgemm calls, Conv as
// im2col + sgemm per image and group.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/backend.h"

namespace tessera::blas {

// A value a kernel reads: kernel input `slot`, or a constant; dims as compiled.
struct Operand {
  int slot = -1;
  const Tensor* constant = nullptr;
  std::vector<int64_t> dims;
};
Result<Operand> operand_of(const SubGraph& sg, int v);
// The float32 data of an operand, checking dtype and dims against what was compiled.
Result<const float*> data_of(const Operand& o, const std::vector<const Tensor*>& inputs);
// Float32, static, non-empty.
Status check_float_value(const Graph& g, int v);

Status check_matmul_node(const Graph& g, int n);  // MatMul or Gemm
Status check_conv_node(const Graph& g, int n);
Result<std::unique_ptr<Kernel>> compile_matmul(const SubGraph& sg, int threads);  // MatMul or Gemm
Result<std::unique_ptr<Kernel>> compile_conv(const SubGraph& sg, int threads);

}  // namespace tessera::blas
