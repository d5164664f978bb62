#include "runtime/buffer_pool.h"

#include <algorithm>
#include <cstring>

namespace tessera {

Tensor BufferPool::allocate(DType dtype, std::vector<int64_t> dims) {
  return take(dtype, std::move(dims), true);
}

Tensor BufferPool::allocate_uninitialized(DType dtype, std::vector<int64_t> dims) {
  return take(dtype, std::move(dims), false);
}

Tensor BufferPool::take(DType dtype, std::vector<int64_t> dims, bool zero_fill) {
  if (dtype == DType::kString || dtype == DType::kSequence || dtype == DType::kOptional) {
    return Tensor(dtype, std::move(dims));
  }
  size_t need = static_cast<size_t>(shape_numel(dims)) * dtype_size(dtype);
  std::shared_ptr<Storage> storage;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.lower_bound(need);
    if (it != free_.end() && it->first <= std::max<size_t>(2 * need, kTensorAlignment)) {
      storage = std::move(it->second);
      free_.erase(it);
    }
  }
  if (storage) {
    if (zero_fill) std::memset(storage->data(), 0, storage->capacity());  // kernels may rely on it
  } else {
    storage =
        zero_fill ? Storage::allocate_bytes(need) : Storage::allocate_bytes_uninitialized(need);
    std::lock_guard<std::mutex> lock(mu_);
    reserved_bytes_ += storage->capacity();
    owned_.insert(storage.get());
  }
  std::lock_guard<std::mutex> lock(mu_);
  live_bytes_ += storage->capacity();
  peak_bytes_ = std::max(peak_bytes_, live_bytes_);
  return Tensor(dtype, std::move(dims), std::move(storage));
}

void BufferPool::release(Tensor& t) {
  std::shared_ptr<Storage> storage = t.storage();
  t = Tensor();
  // Only buffers this pool handed out and that nobody else shares come back.
  if (!storage || storage->holds_strings() || storage->holds_elements() || storage.use_count() != 1) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (!owned_.count(storage.get())) return;
  live_bytes_ -= storage->capacity();
  free_.emplace(storage->capacity(), std::move(storage));
}

void BufferPool::detach(const Tensor& t) {
  if (!t.storage()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (owned_.erase(t.storage().get())) live_bytes_ -= t.storage()->capacity();
}

size_t BufferPool::release_free() {
  std::lock_guard<std::mutex> lock(mu_);
  size_t bytes = 0;
  for (auto& [capacity, storage] : free_) {
    owned_.erase(storage.get());
    bytes += capacity;
  }
  free_.clear();
  reserved_bytes_ -= bytes;
  return bytes;
}

void BufferPool::reset_peak() {
  std::lock_guard<std::mutex> lock(mu_);
  peak_bytes_ = live_bytes_;
}

}  // namespace tessera
