#include "ir/tensor.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <sys/mman.h>
#include <unistd.h>
#include <limits>
#include <type_traits>

namespace tessera {

namespace {
constexpr size_t kHugePageBytes = size_t{2} << 20;
size_t physical_memory_bytes() {
  static const size_t bytes = [] {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : SIZE_MAX;
  }();
  return bytes;
}
}  // namespace

std::shared_ptr<Storage> Storage::allocate_bytes(size_t nbytes) {
  std::shared_ptr<Storage> s = allocate_bytes_uninitialized(nbytes);
  std::memset(s->data_, 0, s->capacity_);
  return s;
}

std::shared_ptr<Storage> Storage::allocate_bytes_uninitialized(size_t nbytes) {
  // A buffer larger than the machine's memory can only come from an absurd shape in a model or a
  // flag: fail at once (the runtime turns bad_alloc into an error Status) instead of letting
  // overcommit hand out memory that the first writes would then fault in until the OOM killer.
  if (nbytes > physical_memory_bytes()) throw std::bad_alloc();
  auto s = std::shared_ptr<Storage>(new Storage());
  size_t rounded = (nbytes + kTensorAlignment - 1) / kTensorAlignment * kTensorAlignment;
  if (rounded == 0) rounded = kTensorAlignment;
  // Large buffers (weights, mostly) start on a 2 MiB boundary and ask for transparent huge pages:
  // kernels stream them, and with 4 KiB pages every page is a TLB miss.
  const bool huge = rounded >= kHugePageBytes * 2;
  s->data_ = std::aligned_alloc(huge ? kHugePageBytes : kTensorAlignment,
                                huge ? (rounded + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes : rounded);
  if (s->data_ == nullptr) throw std::bad_alloc();
  static const bool huge_pages = std::getenv("TESSERA_NO_HUGE_PAGES") == nullptr;
  if (huge && huge_pages) ::madvise(s->data_, rounded, MADV_HUGEPAGE);
  s->capacity_ = rounded;
  return s;
}

std::shared_ptr<Storage> Storage::allocate_strings(size_t count) {
  auto s = std::shared_ptr<Storage>(new Storage());
  s->strings_ = std::make_unique<std::vector<std::string>>(count);
  s->data_ = s->strings_->data();
  s->capacity_ = count * sizeof(std::string);
  return s;
}

std::shared_ptr<Storage> Storage::allocate_elements(std::vector<Tensor> elements, DType element_dtype) {
  auto s = std::shared_ptr<Storage>(new Storage());
  s->elements_ = std::make_unique<std::vector<Tensor>>(std::move(elements));
  s->element_dtype_ = element_dtype;
  return s;
}

Storage::~Storage() {
  if (!strings_ && !elements_) std::free(data_);
}

Tensor Tensor::sequence(std::vector<Tensor> elements, DType element_dtype) {
  Tensor t;
  t.dtype_ = DType::kSequence;
  t.dims_ = {static_cast<int64_t>(elements.size())};
  t.storage_ = Storage::allocate_elements(std::move(elements), element_dtype);
  return t;
}

Tensor Tensor::optional(std::optional<Tensor> element, DType element_dtype) {
  Tensor t;
  t.dtype_ = DType::kOptional;
  std::vector<Tensor> elements;
  if (element) elements.push_back(std::move(*element));
  t.dims_ = {static_cast<int64_t>(elements.size())};
  t.storage_ = Storage::allocate_elements(std::move(elements), element_dtype);
  return t;
}

int64_t shape_numel(std::span<const int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::string dims_to_string(std::span<const int64_t> dims) {
  if (dims.empty()) return "scalar";
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += "x";
    s += std::to_string(dims[i]);
  }
  return s;
}

Tensor::Tensor(DType dtype, std::vector<int64_t> dims) : dtype_(dtype), dims_(std::move(dims)) {
  for (int64_t d : dims_) TESSERA_CHECK(d >= 0, "negative tensor dim");
  if (is_container()) {
    storage_ = Storage::allocate_elements(std::vector<Tensor>(static_cast<size_t>(numel())), DType::kUndefined);
  } else if (dtype_ == DType::kString) {
    storage_ = Storage::allocate_strings(static_cast<size_t>(numel()));
  } else {
    storage_ = Storage::allocate_bytes(nbytes());
  }
}

Tensor::Tensor(DType dtype, std::vector<int64_t> dims, std::shared_ptr<Storage> storage)
    : dtype_(dtype), dims_(std::move(dims)), storage_(std::move(storage)) {
  TESSERA_CHECK(storage_ && storage_->capacity() >= nbytes(), "storage too small for tensor");
}

namespace {
template <typename T>
double to_double(T v) {
  return static_cast<double>(static_cast<std::conditional_t<std::is_class_v<T>, float, T>>(v));
}
}  // namespace

double Tensor::as_double(int64_t i) const {
  double out = 0;
  bool ok = visit_numeric_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    out = to_double(static_cast<const T*>(raw_data())[i]);
  });
  TESSERA_CHECK(ok, "as_double on non-numeric tensor");
  return out;
}

int64_t Tensor::as_int64(int64_t i) const {
  int64_t out = 0;
  bool ok = visit_numeric_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) {
      out = static_cast<int64_t>(static_cast<const T*>(raw_data())[i]);
    } else {
      out = static_cast<int64_t>(to_double(static_cast<const T*>(raw_data())[i]));
    }
  });
  TESSERA_CHECK(ok, "as_int64 on non-numeric tensor");
  return out;
}

std::vector<int64_t> Tensor::to_int64_vector() const {
  std::vector<int64_t> v(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i) v[i] = as_int64(i);
  return v;
}

std::vector<double> Tensor::to_double_vector() const {
  std::vector<double> v(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i) v[i] = as_double(i);
  return v;
}

Tensor Tensor::reshaped(std::vector<int64_t> dims) const {
  TESSERA_CHECK(shape_numel(dims) == numel(), "reshaped: element count differs");
  Tensor t = *this;
  t.dims_ = std::move(dims);
  return t;
}

Tensor Tensor::clone() const {
  if (!defined()) return Tensor();
  if (is_container()) {  // elements are immutable values: sharing them is a copy
    Tensor t = *this;
    t.storage_ = Storage::allocate_elements(elements(), element_dtype());
    return t;
  }
  Tensor t(dtype_, dims_);
  if (dtype_ == DType::kString) {
    t.strings() = strings();
  } else if (nbytes()) {
    std::memcpy(t.raw_data(), raw_data(), nbytes());
  }
  return t;
}

namespace {
template <typename To, typename From>
To convert_element(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return to_double(v) != 0.0;
  } else if constexpr (std::is_class_v<To>) {  // Float16 / BFloat16
    return To(static_cast<float>(to_double(v)));
  } else if constexpr (std::is_integral_v<To> && (std::is_floating_point_v<From> || std::is_class_v<From>)) {
    double d = to_double(v);
    if (std::isnan(d)) return To(0);
    // Out-of-range float->int casts are undefined behaviour in C++: saturate instead.
    if (d >= static_cast<double>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    if (d <= static_cast<double>(std::numeric_limits<To>::lowest())) return std::numeric_limits<To>::lowest();
    return static_cast<To>(d);
  } else if constexpr (std::is_class_v<From>) {
    return static_cast<To>(static_cast<float>(v));
  } else {
    return static_cast<To>(v);
  }
}
}  // namespace

Result<Tensor> Tensor::cast(DType to) const {
  if (to == dtype_) return clone();
  if (to == DType::kString || dtype_ == DType::kString || is_container() || to == DType::kSequence ||
      to == DType::kOptional) {
    return unimplemented(std::string("cast between ") + dtype_name(dtype_) + " and " + dtype_name(to));
  }
  Tensor out(to, dims_);
  bool ok = visit_numeric_dtype(dtype_, [&](auto from_tag) {
    using From = decltype(from_tag);
    visit_numeric_dtype(to, [&](auto to_tag) {
      using To = decltype(to_tag);
      const From* src = static_cast<const From*>(raw_data());
      To* dst = static_cast<To*>(out.raw_data());
      for (int64_t i = 0, n = numel(); i < n; ++i) dst[i] = convert_element<To>(src[i]);
    });
  });
  if (!ok) return unimplemented(std::string("cast from ") + dtype_name(dtype_));
  return out;
}

std::string Tensor::describe() const {
  return std::string(dtype_name(dtype_)) + "[" + dims_to_string(dims_) + "]";
}

}  // namespace tessera
