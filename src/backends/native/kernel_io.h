// Small pieces every native kernel needs: where a value comes from at run time (a kernel input
// or a constant), and aligned per-thread scratch.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "backends/backend.h"
#include "backends/kernel_io.h"

namespace tessera::native {

// For each SubGraph output: which output of `node` it is (-1 when another node produces it).
std::vector<int> output_positions(const SubGraph& sg, const Node& node);

// The node inside sg with op type `op` (default domain) that produces value v, or nullptr: for
// kernels that recognize a group by walking back from its output.
const Node* producer_in(const SubGraph& sg, int v, const char* op);

// parallel_for on the pool, or inline without one.
void parallel(ThreadPool* pool, int64_t n, int64_t grain,
              const std::function<void(int64_t, int64_t)>& fn);
inline int pool_threads(ThreadPool* pool) { return pool ? pool->num_threads() : 1; }

// n floats, 64-byte aligned, uninitialized.
class ScratchBuffer {
 public:
  explicit ScratchBuffer(int64_t n);
  ~ScratchBuffer();
  ScratchBuffer(ScratchBuffer&& o) noexcept : data_(o.data_) { o.data_ = nullptr; }
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  float* data() { return data_; }
  const float* data() const { return data_; }

 private:
  float* data_;
};

// Per-run scratch of at least n floats, 64-byte aligned, uninitialized. Up to kHeldFloats it is a
// buffer the calling thread keeps for its next run with the same slot (grown when too small): small
// kernels then do not allocate per run, which for buffers past malloc's mmap threshold cost page
// faults on every run. Larger ones are allocated for this run alone. One per slot per thread at a
// time.
enum class ScratchSlot { kGemmA, kGemmB, kGemmHook, kCount };
class RunScratch {
 public:
  static constexpr int64_t kHeldFloats = int64_t{1} << 18;  // 1 MiB a slot
  RunScratch(ScratchSlot slot, int64_t n);
  float* data() { return data_; }

 private:
  std::unique_ptr<ScratchBuffer> own_;
  float* data_;
};

}  // namespace tessera::native
