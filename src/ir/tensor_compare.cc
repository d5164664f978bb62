#include "ir/tensor_compare.h"

#include <cmath>
#include <limits>
#include <string>

namespace tessera {

namespace {

// Within tolerance: NaN matches NaN, an infinity only itself (|a - b| <= inf would pass it).
inline bool close_enough(double a, double b, double rtol, double atol) {
  return a == b || (std::isnan(a) && std::isnan(b)) ||
         (std::isfinite(b) && std::fabs(a - b) <= atol + rtol * std::fabs(b));
}

// The first element of float (or double) data outside the tolerance, or -1. Tensors of a model's
// intermediates run to millions of elements and every measured candidate checks its outputs.
template <typename T>
int64_t first_mismatch(const T* got, const T* want, int64_t n, double rtol, double atol) {
  for (int64_t i = 0; i < n; ++i)
    if (!close_enough(static_cast<double>(got[i]), static_cast<double>(want[i]), rtol, atol)) return i;
  return -1;
}

std::string mismatch_message(int64_t i, double a, double b) {
  return "element " + std::to_string(i) + " is " + std::to_string(a) + ", expected " + std::to_string(b);
}

}  // namespace

Status compare_tensors(const Tensor& got, const Tensor& want, double rtol, double atol) {
  if (got.is_container() && want.is_container() && got.dtype() == want.dtype()) {
    if (got.elements().size() != want.elements().size()) {
      return invalid_argument(std::string(dtype_name(got.dtype())) + " of " + std::to_string(got.elements().size()) +
                              " elements, expected " + std::to_string(want.elements().size()));
    }
    for (size_t k = 0; k < got.elements().size(); ++k) {
      Status st = compare_tensors(got.elements()[k], want.elements()[k], rtol, atol);
      if (!st.ok()) return st.with_context("element " + std::to_string(k));
    }
    return Status();
  }
  if (got.dtype() != want.dtype()) {
    return invalid_argument(std::string("dtype ") + dtype_name(got.dtype()) + ", expected " + dtype_name(want.dtype()));
  }
  if (got.dims() != want.dims()) {
    return invalid_argument("shape " + dims_to_string(got.dims()) + ", expected " + dims_to_string(want.dims()));
  }
  if (got.dtype() == DType::kString) {
    for (int64_t i = 0; i < got.numel(); ++i)
      if (got.strings()[i] != want.strings()[i]) return invalid_argument("string element " + std::to_string(i) + " differs");
    return Status();
  }
  const int64_t n = got.numel();
  if (got.dtype() == DType::kFloat32 || got.dtype() == DType::kFloat64) {
    const int64_t i = got.dtype() == DType::kFloat32
                          ? first_mismatch(got.data<float>(), want.data<float>(), n, rtol, atol)
                          : first_mismatch(got.data<double>(), want.data<double>(), n, rtol, atol);
    if (i < 0) return Status();
    return invalid_argument(mismatch_message(i, got.as_double(i), want.as_double(i)));
  }
  const bool is_float = dtype_is_float(got.dtype());
  for (int64_t i = 0; i < n; ++i) {
    if (is_float) {
      const double a = got.as_double(i), b = want.as_double(i);
      if (!close_enough(a, b, rtol, atol)) return invalid_argument(mismatch_message(i, a, b));
      continue;
    }
    if (got.as_int64(i) != want.as_int64(i)) {
      return invalid_argument("element " + std::to_string(i) + " is " + std::to_string(got.as_int64(i)) + ", expected " +
                              std::to_string(want.as_int64(i)));
    }
  }
  return Status();
}

double max_abs(const Tensor& t) {
  if (t.is_container() || !dtype_is_float(t.dtype())) return 0;
  const int64_t n = t.numel();
  double m = 0;
  if (t.dtype() == DType::kFloat32) {
    const float* p = t.data<float>();
    float mf = 0;  // float compares are exact; the loop vectorizes
    for (int64_t i = 0; i < n; ++i) {
      const float a = std::fabs(p[i]);
      if (a <= std::numeric_limits<float>::max() && a > mf) mf = a;  // NaN and inf fail the first test
    }
    return mf;
  }
  for (int64_t i = 0; i < n; ++i) {
    const double a = std::fabs(t.as_double(i));
    if (std::isfinite(a) && a > m) m = a;
  }
  return m;
}

}  // namespace tessera
