// Helpers shared by backends whose kernels read float32 values: where a value comes from at run
// time (a kernel input or a constant), checks, and the numpy MatMul batch layout.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/backend.h"

namespace tessera {

// A value a kernel reads: kernel input `slot`, or a constant; dims as compiled.
struct ValueSource {
  int slot = -1;
  const Tensor* constant = nullptr;
  std::vector<int64_t> dims;
};

Result<ValueSource> source_of(const SubGraph& sg, int v);
// The tensor of a source (kernel input or constant), checking dtype and dims against what was
// compiled.
Result<const Tensor*> resolve_tensor(const ValueSource& s, DType dtype, const std::vector<const Tensor*>& inputs);
// The float32 data of a source, checked the same way.
Result<const float*> resolve_float(const ValueSource& s, const std::vector<const Tensor*>& inputs);
// Float32, static, non-empty: what these kernels compile.
Status check_float_value(const Graph& g, int v);

// The numpy matmul layout of two operands: broadcast batch, then (m x k) * (k x n).
struct MatMulLayout {
  int64_t m = 1, k = 1, n = 1;
  std::vector<int64_t> a_offsets, b_offsets;  // per output batch: element offset of each matrix
};

// Per output batch, the element offsets of the A and B matrices (numpy broadcasting of batch dims).
Result<MatMulLayout> matmul_layout(std::vector<int64_t> a, std::vector<int64_t> b);

}  // namespace tessera
