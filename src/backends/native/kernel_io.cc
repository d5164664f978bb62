#include "backends/native/kernel_io.h"

#include <algorithm>
#include <cstdlib>
#include <new>

namespace tessera::native {

std::vector<int> output_positions(const SubGraph& sg, const Node& node) {
  std::vector<int> pos;
  for (int v : sg.outputs()) {
    int p = -1;
    for (size_t o = 0; o < node.outputs.size(); ++o)
      if (node.outputs[o] == v) p = static_cast<int>(o);
    pos.push_back(p);
  }
  return pos;
}

const Node* producer_in(const SubGraph& sg, int v, const char* op) {
  if (v == kNoValue) return nullptr;
  const int n = sg.graph().value(v).producer;
  if (n < 0 || !sg.nodes().contains(n)) return nullptr;
  const Node& node = sg.graph().node(n);
  return node.domain.empty() && node.op_type == op ? &node : nullptr;
}

void parallel(ThreadPool* pool, int64_t n, int64_t grain,
              const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (pool) {
    pool->parallel_for(n, grain, fn);
  } else {
    fn(0, n);
  }
}

ScratchBuffer::ScratchBuffer(int64_t n) {
  const size_t bytes =
      (static_cast<size_t>(std::max<int64_t>(n, 16)) * sizeof(float) + 63) / 64 * 64;
  data_ = static_cast<float*>(std::aligned_alloc(64, bytes));
  if (!data_) throw std::bad_alloc();
}
ScratchBuffer::~ScratchBuffer() { std::free(data_); }

RunScratch::RunScratch(ScratchSlot slot, int64_t n) {
  if (n > kHeldFloats) {
    own_ = std::make_unique<ScratchBuffer>(n);
    data_ = own_->data();
    return;
  }
  thread_local std::unique_ptr<ScratchBuffer> held[static_cast<int>(ScratchSlot::kCount)];
  std::unique_ptr<ScratchBuffer>& h = held[static_cast<int>(slot)];
  if (!h) h = std::make_unique<ScratchBuffer>(kHeldFloats);
  data_ = h->data();
}

}  // namespace tessera::native
