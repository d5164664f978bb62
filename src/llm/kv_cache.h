// The paged KV cache: per layer one K and one V tensor of fixed-size blocks (K
// float[blocks, kv_heads, head_dim, block_size]: each block's keys transposed, so that a query's
// scores against a block are one vector loop; V float[blocks, kv_heads, block_size, head_dim]), a pool that hands out block ids in O(1), and
// per-sequence block tables.
//
// Not thread-safe: one engine thread owns it.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/status.h"
#include "ir/tensor.h"
#include "llm/model_config.h"

namespace tessera::llm {

// Fixed-size block ids [0, capacity) with an O(1) free list.
class KvBlockPool {
 public:
  explicit KvBlockPool(int32_t capacity);
  int32_t capacity() const { return static_cast<int32_t>(in_use_.size()); }
  int32_t free_count() const { return static_cast<int32_t>(free_.size()); }
  // A free block, or -1 when none is left.
  int32_t allocate();
  // Returns a block taken by allocate(); freeing a free block is an internal error.
  void release(int32_t block);
  bool in_use(int32_t block) const { return in_use_[block] != 0; }

 private:
  std::vector<int32_t> free_;
  std::vector<uint8_t> in_use_;
};

// The blocks of one sequence, in order, and how many positions are filled.
struct SequenceBlocks {
  std::vector<int32_t> blocks;
  int64_t length = 0;  // tokens whose K/V are in the cache
};

class KvCache {
 public:
  // blocks * block_size positions in all, shared by every sequence.
  KvCache(const ModelConfig& config, int64_t blocks, int64_t block_size);
  // The cache size that fits `bytes` (at least one block).
  static int64_t blocks_for_bytes(const ModelConfig& config, int64_t block_size, int64_t bytes);
  static int64_t bytes_per_block(const ModelConfig& config, int64_t block_size);

  int64_t block_size() const { return block_size_; }
  int64_t blocks() const { return pool_.capacity(); }
  KvBlockPool& pool() { return pool_; }
  const Tensor& k(int64_t layer) const { return k_[layer]; }
  // Writes every block once, so that the whole preallocation is resident from now on (a server's
  // memory then stays flat as requests touch new blocks). The contents stay meaningless.
  void commit();
  // The same for seq's blocks only (every layer): a first write to a page costs a fault, ~17 us
  // on the machines we measure, which a decode step would otherwise pay as it reaches a block.
  void commit(const SequenceBlocks& seq);
  const Tensor& v(int64_t layer) const { return v_[layer]; }

  // Grows seq's block table so it holds `length` positions; fails (taking nothing) when the pool
  // has too few free blocks.
  Status reserve(SequenceBlocks& seq, int64_t length);
  // Gives every block of seq back to the pool.
  void release(SequenceBlocks& seq);

 private:
  int64_t block_size_;
  KvBlockPool pool_;
  std::vector<Tensor> k_, v_;
};

}  // namespace tessera::llm
