// The prefix cache: a radix tree of token sequences over KV blocks, as SGLang's RadixAttention,
// at block granularity. Every edge holds whole blocks, so a node's tokens are a multiple of the
// block size and its blocks hold exactly those tokens' K/V; a partial match splits an edge at a
// block boundary.
//
// Blocks in the tree belong to the tree; a request that matched a prefix reads those blocks and
// holds a lock on the path (reference counts on every node up to the root) so they are not
// evicted under it. Unlocked leaves are evicted least recently used first. Each namespace (a
// tenant: cache_salt, API key) has its own root, so tenants never share entries.
//
// Not thread-safe: the engine thread owns it, as it owns the KV cache.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "llm/kv_cache.h"

namespace tessera::serve {

class PrefixCache {
 public:
  struct Node;

  PrefixCache(llm::KvBlockPool& pool, int64_t block_size);
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  struct Match {
    Node* node = nullptr;         // the deepest node matched (the namespace's root if none); locked
    std::vector<int32_t> blocks;  // the K/V blocks of the matched tokens
    int64_t tokens = 0;           // blocks.size() * block size
  };
  // The longest cached prefix of tokens[0, max_tokens) in namespace ns, in whole blocks. The path
  // is locked (the caller unlocks match.node when done with the blocks) and marked as used now.
  Match match(uint64_t ns, std::span<const int32_t> tokens, int64_t max_tokens);

  // How many tokens match() would find, changing nothing.
  int64_t cached_prefix(uint64_t ns, std::span<const int32_t> tokens, int64_t max_tokens) const;

  // Adds the first n_blocks full blocks of a sequence (tokens[0, n_blocks * block size), whose K/V
  // are blocks[0, n_blocks)). Blocks the tree already has for the same tokens win: the caller's
  // copies go back to the pool and blocks[i] is rewritten to the tree's; the other blocks now
  // belong to the tree. Returns the node of the last block, unlocked (lock it, then unlock the node
  // the caller held before, to move a lock down the path).
  Node* insert(uint64_t ns, std::span<const int32_t> tokens, std::vector<int32_t>& blocks, int64_t n_blocks);

  void lock(Node* node);
  void unlock(Node* node);

  // Frees at least `blocks` blocks by evicting unlocked leaves, least recently used first (fewer
  // if not enough are unlocked); returns how many were freed.
  int64_t evict(int64_t blocks);
  // Evicts everything that is not locked; returns the blocks freed.
  int64_t flush();

  int64_t block_size() const { return block_size_; }
  int64_t cached_blocks() const { return cached_blocks_; }
  int64_t evictable_blocks() const { return cached_blocks_ - locked_blocks_; }
  // Every block the tree holds (tests check ownership with it).
  void collect_blocks(std::vector<int32_t>& out) const;

 private:
  Node& root(uint64_t ns);
  // Splits node so that its first `keep_blocks` blocks become a new parent; returns the parent.
  Node* split(Node* node, int64_t keep_blocks);
  void touch(Node* node);

  llm::KvBlockPool& pool_;
  int64_t block_size_;
  std::map<uint64_t, std::unique_ptr<Node>> roots_;
  int64_t cached_blocks_ = 0;
  int64_t locked_blocks_ = 0;  // blocks of nodes whose lock count is not zero
  uint64_t clock_ = 0;         // LRU time
};

}  // namespace tessera::serve
