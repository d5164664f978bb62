// Internals shared by the reference kernels of the tensor family (shape manipulation, indexing):
// a dtype-generic element copier, index reading and the per-file registration functions.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "backends/ref/ref_kernel.h"
#include "ir/status.h"
#include "ir/tensor.h"

namespace tessera::ref {

// Copies elements between two tensors of one dtype by flat element index: bytes of dtype_size
// for numeric dtypes, std::string assignment for kString.
class ElementCopier {
 public:
  ElementCopier(const Tensor& src, Tensor& dst)
      : is_string_(src.dtype() == DType::kString),
        element_size_(dtype_size(src.dtype())),
        src_(static_cast<const uint8_t*>(src.raw_data())),
        dst_(static_cast<uint8_t*>(dst.raw_data())),
        src_strings_(is_string_ ? &src.strings() : nullptr),
        dst_strings_(is_string_ ? &dst.strings() : nullptr) {
    TESSERA_CHECK(src.dtype() == dst.dtype(), "ElementCopier dtype mismatch");
  }

  void copy(int64_t dst_index, int64_t src_index) const {
    if (is_string_) {
      (*dst_strings_)[dst_index] = (*src_strings_)[src_index];
      return;
    }
    uint8_t* d = dst_ + dst_index * element_size_;
    const uint8_t* s = src_ + src_index * element_size_;
    switch (element_size_) {
      case 1: *d = *s; break;
      case 2: std::memcpy(d, s, 2); break;
      case 4: std::memcpy(d, s, 4); break;
      case 8: std::memcpy(d, s, 8); break;
      default: std::memcpy(d, s, element_size_); break;
    }
  }
  // Copies `count` consecutive elements.
  void copy_run(int64_t dst_index, int64_t src_index, int64_t count) const {
    if (count <= 0) return;
    if (is_string_) {
      for (int64_t i = 0; i < count; ++i)
        (*dst_strings_)[dst_index + i] = (*src_strings_)[src_index + i];
      return;
    }
    std::memmove(dst_ + dst_index * element_size_, src_ + src_index * element_size_,
                 static_cast<size_t>(count) * element_size_);
  }

 private:
  bool is_string_;
  int64_t element_size_;
  const uint8_t* src_;
  uint8_t* dst_;
  const std::vector<std::string>* src_strings_;
  std::vector<std::string>* dst_strings_;
};

// The elements of an integer tensor (indices, shapes, axes) as int64; an error naming `what`
// for any other dtype.
Result<std::vector<int64_t>> read_index_tensor(const RefKernelContext& ctx, const Tensor& t,
                                               const std::string& what);

// Wraps a possibly negative index into [0, dim); an error when it is outside [-dim, dim).
Result<int64_t> wrap_index(const RefKernelContext& ctx, int64_t index, int64_t dim);

// Element-count product of dims[begin, end).
int64_t product_of_dims(const std::vector<int64_t>& dims, size_t begin, size_t end);

// Largest element count a kernel allocates from shape data in a model (guards absurd shapes).
inline constexpr int64_t kMaxElements = int64_t{1} << 40;

// An error unless every dim is >= 0 and the element count is at most kMaxElements.
Status check_output_dims(const RefKernelContext& ctx, const std::vector<int64_t>& dims);

// dst[i] = src[src_base + sum_d index_d(i) * src_strides[d]] for every element i of dst, where
// index_d(i) is the coordinate of i along dst's dim d (strides may be negative or zero).
void strided_copy(const Tensor& src, Tensor& dst, int64_t src_base,
                  const std::vector<int64_t>& src_strides);

// A one-element tensor of `dtype` holding `value` (numeric dtypes and bool; empty for kString).
Tensor scalar_of_dtype(DType dtype, double value);

// Registration of the kernels in tensor_kernels.cc (shape ops) and tensor_index_kernels.cc
// (gather, scatter, selection ops).
void register_tensor_shape_kernels(RefKernelTable& t);
void register_tensor_layout_kernels(RefKernelTable& t);
void register_tensor_index_kernels(RefKernelTable& t);

}  // namespace tessera::ref
