#include "ir/tensor_compare.h"

#include <cmath>

namespace tessera {

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
  bool is_float = dtype_is_float(got.dtype());
  for (int64_t i = 0; i < got.numel(); ++i) {
    if (is_float) {
      double a = got.as_double(i), b = want.as_double(i);
      if (std::isnan(a) && std::isnan(b)) continue;
      if (std::isinf(a) || std::isinf(b)) {
        if (a == b) continue;
      } else if (std::fabs(a - b) <= atol + rtol * std::fabs(b)) {
        continue;
      }
      return invalid_argument("element " + std::to_string(i) + " is " + std::to_string(a) + ", expected " + std::to_string(b));
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
  double m = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    double a = std::fabs(t.as_double(i));
    if (std::isfinite(a) && a > m) m = a;
  }
  return m;
}

}  // namespace tessera
