// The reference nn kernels, split by area; register_nn_kernels (nn_kernels.cc) calls each part.
// Also small helpers the parts share: typed input conversion and quantization arithmetic.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "backends/ref/ref_kernel.h"
#include "backends/ref/ref_util.h"

namespace tessera {

void register_nn_matmul_kernels(RefKernelTable& t);  // nn_matmul.cc
void register_nn_conv_kernels(RefKernelTable& t);    // nn_conv.cc
void register_nn_pool_kernels(RefKernelTable& t);    // nn_pool.cc
void register_nn_norm_kernels(RefKernelTable& t);    // nn_norm.cc
void register_nn_quant_kernels(RefKernelTable& t);   // nn_quant.cc

namespace ref {

// All elements of `t` converted to A (any numeric dtype).
template <typename A>
std::vector<A> to_vector_as(const Tensor& t) {
  std::vector<A> v(static_cast<size_t>(t.numel()));
  visit_numeric_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = t.data<T>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<A>(static_cast<compute_t<T>>(p[i]));
  });
  return v;
}

// Writes values (of compute type A) into `out` of element type T.
template <typename T, typename A>
void store_as(const std::vector<A>& values, Tensor& out) {
  T* p = out.data<T>();
  for (size_t i = 0; i < values.size(); ++i) p[i] = static_cast<T>(static_cast<compute_t<T>>(values[i]));
}

// Round half to even, then saturate into the range of the integer type Q.
template <typename Q>
Q saturate_round(double v) {
  double r = std::nearbyint(v);  // default rounding mode: half to even
  constexpr double lo = static_cast<double>(std::numeric_limits<Q>::min());
  constexpr double hi = static_cast<double>(std::numeric_limits<Q>::max());
  if (!(r >= lo)) r = lo;  // NaN goes to lo
  if (r > hi) r = hi;
  return static_cast<Q>(r);
}

// Calls f(Q{}) for the 8-bit quantized types (int8, uint8); false otherwise.
template <typename F>
bool visit_quant_dtype(DType t, F&& f) {
  switch (t) {
    case DType::kInt8: f(int8_t{}); return true;
    case DType::kUint8: f(uint8_t{}); return true;
    default: return false;
  }
}

// Per-tensor (scalar or 1-element) or per-channel (1-D of `channels`) parameter check.
inline bool is_scalar_or_vector_of(const Tensor& t, int64_t channels) {
  if (t.numel() == 1 && t.rank() <= 1) return true;
  return t.rank() == 1 && t.dim(0) == channels;
}

}  // namespace ref
}  // namespace tessera
