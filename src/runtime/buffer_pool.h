// A TensorAllocator that reuses freed buffers: the runtime's memory planning by liveness.
//
// The executor returns a value's buffer as soon as its last consumer has run; a later allocation
// takes the smallest free buffer that fits (and is not more than twice too large). Peak bytes are
// the most bytes ever held at once by live values plus free buffers.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_set>

#include "backends/ref/ref_kernel.h"

namespace tessera {

class BufferPool final : public TensorAllocator {
 public:
  Tensor allocate(DType dtype, std::vector<int64_t> dims) override;
  Tensor allocate_uninitialized(DType dtype, std::vector<int64_t> dims) override;
  // Returns t's buffer to the pool if no other tensor shares it.
  void release(Tensor& t) override;
  // The buffer of t leaves the pool for good (a graph output handed to the caller).
  void detach(const Tensor& t);
  size_t live_bytes() const { return live_bytes_; }
  size_t peak_bytes() const { return peak_bytes_; }
  size_t reserved_bytes() const { return reserved_bytes_; }  // live + free
  // Starts a new peak measurement (free buffers are kept for reuse).
  void reset_peak();
  // Frees the buffers kept for reuse (after a burst of large steps); returns their bytes.
  size_t release_free();

 private:
  Tensor take(DType dtype, std::vector<int64_t> dims, bool zero_fill);

  std::mutex mu_;
  std::multimap<size_t, std::shared_ptr<Storage>> free_;
  std::unordered_set<const Storage*> owned_;  // buffers this pool made
  size_t live_bytes_ = 0, peak_bytes_ = 0, reserved_bytes_ = 0;
};

}  // namespace tessera
