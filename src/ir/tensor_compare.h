// Comparing a computed tensor with an expected one, element by element, with a tolerance.
#pragma once

#include "ir/status.h"
#include "ir/tensor.h"

namespace tessera {

// ok when got has want's dtype and shape and every float element is within
// atol + rtol * |want| (NaN matches NaN, infinities must be equal), every other element equal;
// sequences and optionals compare element-wise. Otherwise the first difference, e.g.
// "element 17 is 0.5, expected 0.25".
Status compare_tensors(const Tensor& got, const Tensor& want, double rtol, double atol);

// The largest |x| over the float elements of t (0 for other dtypes and empty tensors).
double max_abs(const Tensor& t);

}  // namespace tessera
