#include "llm/kv_cache.h"

#include <cstring>

namespace tessera::llm {

KvBlockPool::KvBlockPool(int32_t capacity) : in_use_(capacity, 0) {
  free_.reserve(capacity);
  for (int32_t b = capacity - 1; b >= 0; --b) free_.push_back(b);  // hands out 0, 1, 2, ... first
}

int32_t KvBlockPool::allocate() {
  if (free_.empty()) return -1;
  const int32_t b = free_.back();
  free_.pop_back();
  in_use_[b] = 1;
  return b;
}

void KvBlockPool::release(int32_t block) {
  TESSERA_CHECK(block >= 0 && block < capacity() && in_use_[block], "releasing a block that is not in use");
  in_use_[block] = 0;
  free_.push_back(block);
}

int64_t KvCache::bytes_per_block(const ModelConfig& c, int64_t block_size) {
  return 2 * c.layers * c.kv_heads * block_size * c.head_dim() * static_cast<int64_t>(sizeof(float));
}

int64_t KvCache::blocks_for_bytes(const ModelConfig& c, int64_t block_size, int64_t bytes) {
  return std::max<int64_t>(1, bytes / bytes_per_block(c, block_size));
}

KvCache::KvCache(const ModelConfig& c, int64_t blocks, int64_t block_size)
    : block_size_(block_size), pool_(static_cast<int32_t>(blocks)) {
  // Uninitialized: a position is always written (PagedAttention) before it is read.
  const std::vector<int64_t> k_dims = {blocks, c.kv_heads, c.head_dim(), block_size};
  const std::vector<int64_t> v_dims = {blocks, c.kv_heads, block_size, c.head_dim()};
  const size_t bytes = static_cast<size_t>(shape_numel(v_dims)) * sizeof(float);
  for (int64_t l = 0; l < c.layers; ++l) {
    k_.emplace_back(DType::kFloat32, k_dims, Storage::allocate_bytes_uninitialized(bytes));
    v_.emplace_back(DType::kFloat32, v_dims, Storage::allocate_bytes_uninitialized(bytes));
  }
}

void KvCache::commit() {
  for (auto* tensors : {&k_, &v_}) {
    for (Tensor& t : *tensors) std::memset(t.raw_data(), 0, t.nbytes());
  }
}

void KvCache::commit(const SequenceBlocks& seq) {
  for (auto* tensors : {&k_, &v_}) {
    for (Tensor& t : *tensors) {
      const size_t block_bytes = t.nbytes() / static_cast<size_t>(blocks());
      for (int32_t b : seq.blocks) std::memset(static_cast<char*>(t.raw_data()) + b * block_bytes, 0, block_bytes);
    }
  }
}

Status KvCache::reserve(SequenceBlocks& seq, int64_t length) {
  const int64_t need = (length + block_size_ - 1) / block_size_ - static_cast<int64_t>(seq.blocks.size());
  if (need <= 0) return Status();
  if (need > pool_.free_count()) {
    return invalid_argument("the KV cache is full: " + std::to_string(need) + " more blocks needed, " +
                            std::to_string(pool_.free_count()) + " free");
  }
  for (int64_t i = 0; i < need; ++i) seq.blocks.push_back(pool_.allocate());
  return Status();
}

void KvCache::release(SequenceBlocks& seq) {
  for (int32_t b : seq.blocks) pool_.release(b);
  seq.blocks.clear();
  seq.length = 0;
}

}  // namespace tessera::llm
