// Tensors: a dtype, concrete dims and a 64-byte-aligned, reference-counted buffer.
//
// Copying a Tensor shares its buffer (like a shared_ptr); clone() copies the data.
// String tensors hold std::string elements (ONNX needs them for a few ops).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "ir/status.h"

namespace tessera {

inline constexpr size_t kTensorAlignment = 64;
class Tensor;

// A raw buffer of bytes aligned to kTensorAlignment, or an array of strings.
class Storage {
 public:
  // Zero-filled bytes. Throws std::bad_alloc when the memory cannot be had (or exceeds the
  // machine's physical memory); the runtime catches it and reports an error Status.
  static std::shared_ptr<Storage> allocate_bytes(size_t nbytes);
  // Same, contents unspecified (for buffers a kernel overwrites entirely).
  static std::shared_ptr<Storage> allocate_bytes_uninitialized(size_t nbytes);
  static std::shared_ptr<Storage> allocate_strings(size_t count);
  // The elements of a sequence or optional value.
  static std::shared_ptr<Storage> allocate_elements(std::vector<Tensor> elements, DType element_dtype);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() { return data_; }
  const void* data() const { return data_; }
  size_t capacity() const { return capacity_; }
  bool holds_strings() const { return strings_ != nullptr; }
  std::vector<std::string>& strings() { return *strings_; }
  const std::vector<std::string>& strings() const { return *strings_; }
  bool holds_elements() const { return elements_ != nullptr; }
  const std::vector<Tensor>& elements() const { return *elements_; }
  DType element_dtype() const { return element_dtype_; }

 private:
  Storage() = default;
  void* data_ = nullptr;
  size_t capacity_ = 0;
  std::unique_ptr<std::vector<std::string>> strings_;
  std::unique_ptr<std::vector<Tensor>> elements_;
  DType element_dtype_ = DType::kUndefined;
};

int64_t shape_numel(std::span<const int64_t> dims);
std::string dims_to_string(std::span<const int64_t> dims);  // "1x3x224x224", "scalar" for rank 0

class Tensor {
 public:
  Tensor() = default;
  // A zero-filled tensor (empty strings for kString).
  Tensor(DType dtype, std::vector<int64_t> dims);
  // A tensor over an existing storage that must hold at least nbytes() bytes.
  Tensor(DType dtype, std::vector<int64_t> dims, std::shared_ptr<Storage> storage);

  template <typename T>
  static Tensor from_vector(std::vector<int64_t> dims, const std::vector<T>& values) {
    Tensor t(DTypeOf<T>::value, std::move(dims));
    TESSERA_CHECK(static_cast<size_t>(t.numel()) == values.size(), "from_vector size mismatch");
    T* p = t.data<T>();
    for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
    return t;
  }
  template <typename T>
  static Tensor scalar(T value) {
    return from_vector<T>({}, std::vector<T>{value});
  }

  // A sequence value (dims {n}); element_dtype is the tensors' dtype, known even when empty.
  static Tensor sequence(std::vector<Tensor> elements, DType element_dtype);
  // An optional value holding `element` (a tensor or a sequence), or nothing.
  static Tensor optional(std::optional<Tensor> element, DType element_dtype);
  bool is_container() const { return dtype_ == DType::kSequence || dtype_ == DType::kOptional; }
  // Elements of a sequence or optional.
  const std::vector<Tensor>& elements() const { return storage_->elements(); }
  DType element_dtype() const { return storage_->element_dtype(); }

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& dims() const { return dims_; }
  int rank() const { return static_cast<int>(dims_.size()); }
  int64_t dim(int i) const { return dims_[i < 0 ? i + rank() : i]; }
  int64_t numel() const { return shape_numel(dims_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  void* raw_data() { return storage_ ? storage_->data() : nullptr; }
  const void* raw_data() const { return storage_ ? storage_->data() : nullptr; }
  template <typename T>
  T* data() {
    TESSERA_CHECK(DTypeOf<T>::value == dtype_, "tensor dtype mismatch");
    return static_cast<T*>(raw_data());
  }
  template <typename T>
  const T* data() const {
    TESSERA_CHECK(DTypeOf<T>::value == dtype_, "tensor dtype mismatch");
    return static_cast<const T*>(raw_data());
  }
  std::vector<std::string>& strings() { return storage_->strings(); }
  const std::vector<std::string>& strings() const { return storage_->strings(); }

  // Element i converted to double / int64 (any numeric dtype). For shape and index inputs.
  double as_double(int64_t i) const;
  int64_t as_int64(int64_t i) const;
  // All elements converted to int64 (for shape-like inputs).
  std::vector<int64_t> to_int64_vector() const;
  std::vector<double> to_double_vector() const;

  // Same data, new dims (numel must match). Shares the buffer.
  Tensor reshaped(std::vector<int64_t> dims) const;
  // Deep copy.
  Tensor clone() const;
  // Converts every element to `to` (numeric types and bool; float->int truncates toward zero).
  Result<Tensor> cast(DType to) const;
  std::string describe() const;  // "float32[1x3x4]"

 private:
  DType dtype_ = DType::kUndefined;
  std::vector<int64_t> dims_;
  std::shared_ptr<Storage> storage_;
};

}  // namespace tessera
