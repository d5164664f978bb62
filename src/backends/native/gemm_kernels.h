// MatMul / Gemm kernels of the native backend, alone or with an elementwise tail fused in.
#pragma once

#include <string>

#include "backends/backend.h"
#include "backends/native/isa.h"

namespace tessera::native {

bool is_gemm_op(const std::string& op_type);
// supports() for one MatMul / Gemm node: float32, static shapes, nothing empty.
Status check_gemm_node(const Graph& g, int n);
// One MatMul / Gemm node plus elementwise nodes of its output shape (the tail), and maybe one
// Softmax over rows that closes the group (its output the group's only output): a
// classifier head's MatMul + Add + Softmax in one kernel.
Status check_gemm_group(const SubGraph& sg);
Result<std::unique_ptr<Kernel>> compile_gemm_kernel(const SubGraph& sg, const IsaKernels& isa);

}  // namespace tessera::native
