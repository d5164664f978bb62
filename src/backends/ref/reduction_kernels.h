// Internals of the reduction kernel family, split over reduction_*.cc files:
//   reduction_kernels.cc  Reduce*, ArgMax/ArgMin, CumSum, TopK (and the family's register function)
//   reduction_softmax.cc  Softmax, LogSoftmax, Hardmax, NegativeLogLikelihoodLoss,
//                         SoftmaxCrossEntropyLoss
//   reduction_linalg.cc   Einsum, Det
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "backends/ref/ref_kernel.h"
#include "backends/ref/ref_util.h"

namespace tessera::ref {

void register_reduction_softmax_kernels(RefKernelTable& t);
void register_reduction_linalg_kernels(RefKernelTable& t);

template <typename T>
inline constexpr bool kIsFloatElement =
    std::is_floating_point_v<T> || std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;

// NaN test that is false for integer types.
template <typename V>
bool is_nan_value(V v) {
  if constexpr (std::is_floating_point_v<V>) {
    return std::isnan(v);
  } else {
    (void)v;
    return false;
  }
}

// Converts a double result into element type T. Float types round; integer types truncate toward
// zero, with NaN mapped to 0 and out-of-range values saturated (never undefined behaviour).
template <typename T>
T element_from_double(double v) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return T(static_cast<float>(v));
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else {
    if (std::isnan(v)) return T(0);
    constexpr double lo = static_cast<double>(std::numeric_limits<T>::lowest());
    constexpr double hi = static_cast<double>(std::numeric_limits<T>::max());
    if (v <= lo) return std::numeric_limits<T>::lowest();
    if (v >= hi) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  }
}

// normalize_axis with an error that names the node.
inline Result<int> kernel_axis(const RefKernelContext& ctx, int64_t axis, int rank) {
  Result<int> r = normalize_axis(axis, rank);
  if (!r.ok()) return r.status().with_context(ctx.node().describe());
  return r;
}

// Splits dims around `axis` into outer (before), length (at) and inner (after) element counts.
struct AxisSplit {
  int64_t outer = 1, length = 1, inner = 1;
};
inline AxisSplit split_at_axis(const std::vector<int64_t>& dims, int axis) {
  AxisSplit s;
  for (int d = 0; d < static_cast<int>(dims.size()); ++d) {
    if (d < axis) {
      s.outer *= dims[d];
    } else if (d == axis) {
      s.length = dims[d];
    } else {
      s.inner *= dims[d];
    }
  }
  return s;
}

}  // namespace tessera::ref
