// The native backend's kernels of the language-model ops (domain "tessera", ops/llm_ops.cc):
// Embedding, RMSNorm, QMatMul (quantized / half weights, quant_matmul.h), RoPE, SiluMul,
// PagedAttention. Each runs alone, for any row count.
#pragma once

#include "backends/backend.h"
#include "backends/native/isa.h"

namespace tessera::native {

bool is_llm_op(const Node& n);
Status check_llm_node(const Graph& g, int n);
Result<std::unique_ptr<Kernel>> compile_llm_kernel(const SubGraph& sg, const IsaKernels& isa);

}  // namespace tessera::native
