// Small helpers shared by the reference kernels: axes, broadcasting, strides, dtype dispatch.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "ir/dtype.h"
#include "ir/status.h"
#include "ir/tensor.h"

namespace tessera::ref {

// Maps a possibly negative axis into [0, rank); error if out of range.
Result<int> normalize_axis(int64_t axis, int rank);

// Row-major strides (in elements) of dims.
std::vector<int64_t> row_major_strides(const std::vector<int64_t>& dims);

// Numpy broadcasting of two or more shapes.
Result<std::vector<int64_t>> broadcast_shapes(const std::vector<std::vector<int64_t>>& shapes);

// Strides of `in` laid over `out` (right-aligned; 0 where `in` broadcasts). `in` must broadcast to `out`.
std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& in, const std::vector<int64_t>& out);

// Calls fn(out_index, in_offsets) for every element of `out` in row-major order, where
// in_offsets[k] is the element offset into input k given its broadcast strides.
template <typename F>
void for_each_broadcast(const std::vector<int64_t>& out, const std::vector<std::vector<int64_t>>& strides, F&& fn) {
  const int rank = static_cast<int>(out.size());
  const size_t nin = strides.size();
  int64_t total = shape_numel(out);
  if (total == 0) return;
  std::vector<int64_t> idx(rank, 0);
  std::vector<int64_t> off(nin, 0);
  for (int64_t i = 0; i < total; ++i) {
    fn(i, off);
    for (int d = rank - 1; d >= 0; --d) {
      ++idx[d];
      for (size_t k = 0; k < nin; ++k) off[k] += strides[k][d];
      if (idx[d] < out[d]) break;
      for (size_t k = 0; k < nin; ++k) off[k] -= strides[k][d] * out[d];
      idx[d] = 0;
    }
  }
}

// Visits every multi-index of `dims` in row-major order: fn(flat_index, index).
template <typename F>
void for_each_index(const std::vector<int64_t>& dims, F&& fn) {
  int64_t total = shape_numel(dims);
  std::vector<int64_t> index(dims.size(), 0);
  for (int64_t i = 0; i < total; ++i) {
    fn(i, index);
    for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
      if (++index[d] < dims[d]) break;
      index[d] = 0;
    }
  }
}

// Compute type for arithmetic on T: float for the 16-bit float types, T otherwise.
template <typename T>
using compute_t = std::conditional_t<std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>, float, T>;

// Calls f(T{}) for float types only (float32, float64, float16, bfloat16); false otherwise.
template <typename F>
bool visit_float_dtype(DType t, F&& f) {
  switch (t) {
    case DType::kFloat32: f(float{}); return true;
    case DType::kFloat64: f(double{}); return true;
    case DType::kFloat16: f(Float16{}); return true;
    case DType::kBFloat16: f(BFloat16{}); return true;
    default: return false;
  }
}

}  // namespace tessera::ref
