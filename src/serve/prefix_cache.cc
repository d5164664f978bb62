#include "serve/prefix_cache.h"

#include <algorithm>
#include <queue>

#include "ir/status.h"

namespace tessera::serve {

struct PrefixCache::Node {
  Node* parent = nullptr;
  uint64_t ns = 0;
  std::vector<int32_t> tokens;  // a multiple of the block size (empty for a root)
  std::vector<int32_t> blocks;  // tokens.size() / block size
  // Keyed by each child's first block of tokens: children differ in their first block.
  std::map<std::vector<int32_t>, std::unique_ptr<Node>> children;
  int64_t lock_count = 0;
  uint64_t last_used = 0;
};

namespace {

// How many whole blocks of child's tokens equal tokens[pos, limit) from the start (at least one:
// a child is found by its first block).
int64_t matching_blocks(const PrefixCache::Node& child, std::span<const int32_t> tokens, int64_t pos, int64_t limit,
                        int64_t block_size) {
  const int64_t child_blocks = static_cast<int64_t>(child.blocks.size());
  int64_t same = 1;
  while (same < child_blocks && pos + (same + 1) * block_size <= limit &&
         std::equal(child.tokens.begin() + same * block_size, child.tokens.begin() + (same + 1) * block_size,
                    tokens.begin() + pos + same * block_size)) {
    ++same;
  }
  return same;
}

}  // namespace

PrefixCache::PrefixCache(llm::KvBlockPool& pool, int64_t block_size) : pool_(pool), block_size_(block_size) {}

// The blocks stay marked in use in the pool: the pool (the KV cache) usually goes away with the
// cache, and a live pool is given its blocks back by flush() first.
PrefixCache::~PrefixCache() = default;

PrefixCache::Node& PrefixCache::root(uint64_t ns) {
  std::unique_ptr<Node>& r = roots_[ns];
  if (!r) {
    r = std::make_unique<Node>();
    r->ns = ns;
  }
  return *r;
}

void PrefixCache::touch(Node* node) {
  const uint64_t now = ++clock_;
  for (Node* n = node; n; n = n->parent) n->last_used = now;
}

void PrefixCache::lock(Node* node) {
  for (Node* n = node; n; n = n->parent) {
    if (n->lock_count++ == 0) locked_blocks_ += static_cast<int64_t>(n->blocks.size());
  }
}

void PrefixCache::unlock(Node* node) {
  for (Node* n = node; n; n = n->parent) {
    TESSERA_CHECK(n->lock_count > 0, "unlocking a prefix-cache node that is not locked");
    if (--n->lock_count == 0) locked_blocks_ -= static_cast<int64_t>(n->blocks.size());
  }
}

PrefixCache::Node* PrefixCache::split(Node* node, int64_t keep_blocks) {
  const int64_t keep_tokens = keep_blocks * block_size_;
  auto upper = std::make_unique<Node>();
  upper->parent = node->parent;
  upper->ns = node->ns;
  upper->tokens.assign(node->tokens.begin(), node->tokens.begin() + keep_tokens);
  upper->blocks.assign(node->blocks.begin(), node->blocks.begin() + keep_blocks);
  upper->lock_count = node->lock_count;  // every lock through node passes its new parent
  upper->last_used = node->last_used;
  node->tokens.erase(node->tokens.begin(), node->tokens.begin() + keep_tokens);
  node->blocks.erase(node->blocks.begin(), node->blocks.begin() + keep_blocks);

  Node* parent = node->parent;
  std::vector<int32_t> old_key(upper->tokens.begin(), upper->tokens.begin() + block_size_);
  std::unique_ptr<Node> self = std::move(parent->children.at(old_key));
  std::vector<int32_t> new_key(node->tokens.begin(), node->tokens.begin() + block_size_);
  node->parent = upper.get();
  upper->children.emplace(std::move(new_key), std::move(self));
  Node* result = upper.get();
  parent->children[old_key] = std::move(upper);
  return result;
}

PrefixCache::Match PrefixCache::match(uint64_t ns, std::span<const int32_t> tokens, int64_t max_tokens) {
  Match m;
  Node* node = &root(ns);
  const int64_t usable = std::min<int64_t>(max_tokens, static_cast<int64_t>(tokens.size())) / block_size_ * block_size_;
  int64_t pos = 0;
  while (pos < usable) {
    std::vector<int32_t> key(tokens.begin() + pos, tokens.begin() + pos + block_size_);
    auto it = node->children.find(key);
    if (it == node->children.end()) break;
    Node* child = it->second.get();
    const int64_t child_blocks = static_cast<int64_t>(child->blocks.size());
    const int64_t same = matching_blocks(*child, tokens, pos, usable, block_size_);
    if (same < child_blocks) child = split(child, same);
    m.blocks.insert(m.blocks.end(), child->blocks.begin(), child->blocks.end());
    pos += same * block_size_;
    node = child;
    if (same < child_blocks) break;
  }
  m.node = node;
  m.tokens = pos;
  lock(node);
  touch(node);
  return m;
}

int64_t PrefixCache::cached_prefix(uint64_t ns, std::span<const int32_t> tokens, int64_t max_tokens) const {
  auto r = roots_.find(ns);
  if (r == roots_.end()) return 0;
  const Node* node = r->second.get();
  const int64_t usable = std::min<int64_t>(max_tokens, static_cast<int64_t>(tokens.size())) / block_size_ * block_size_;
  int64_t pos = 0;
  while (pos < usable) {
    auto it = node->children.find(std::vector<int32_t>(tokens.begin() + pos, tokens.begin() + pos + block_size_));
    if (it == node->children.end()) break;
    const Node* child = it->second.get();
    const int64_t child_blocks = static_cast<int64_t>(child->blocks.size());
    const int64_t same = matching_blocks(*child, tokens, pos, usable, block_size_);
    pos += same * block_size_;
    if (same < child_blocks) break;
    node = child;
  }
  return pos;
}

PrefixCache::Node* PrefixCache::insert(uint64_t ns, std::span<const int32_t> tokens, std::vector<int32_t>& blocks,
                                       int64_t n_blocks) {
  TESSERA_CHECK(n_blocks <= static_cast<int64_t>(blocks.size()) &&
                    n_blocks * block_size_ <= static_cast<int64_t>(tokens.size()),
                "inserting more blocks than the sequence has");
  Node* node = &root(ns);
  int64_t b = 0;  // blocks of the sequence placed so far
  while (b < n_blocks) {
    const auto first = tokens.begin() + b * block_size_;
    std::vector<int32_t> key(first, first + block_size_);
    auto it = node->children.find(key);
    if (it == node->children.end()) {
      // A new leaf with the rest: its blocks now belong to the tree.
      auto leaf = std::make_unique<Node>();
      leaf->parent = node;
      leaf->ns = ns;
      leaf->tokens.assign(first, tokens.begin() + n_blocks * block_size_);
      leaf->blocks.assign(blocks.begin() + b, blocks.begin() + n_blocks);
      cached_blocks_ += n_blocks - b;  // a new leaf is unlocked: not in locked_blocks_
      Node* raw = leaf.get();
      node->children.emplace(std::move(key), std::move(leaf));
      node = raw;
      break;
    }
    Node* child = it->second.get();
    const int64_t child_blocks = static_cast<int64_t>(child->blocks.size());
    const int64_t same = matching_blocks(*child, tokens, b * block_size_, n_blocks * block_size_, block_size_);
    // The tree's copies win; ours (unless they are the same blocks) go back to the pool.
    for (int64_t i = 0; i < same; ++i) {
      int32_t& mine = blocks[b + i];
      if (mine != child->blocks[i]) {
        pool_.release(mine);
        mine = child->blocks[i];
      }
    }
    if (same < child_blocks) child = split(child, same);
    b += same;
    node = child;
  }
  touch(node);
  return node;
}

int64_t PrefixCache::evict(int64_t want) {
  auto older = [](const Node* a, const Node* b) { return a->last_used > b->last_used; };
  std::priority_queue<Node*, std::vector<Node*>, decltype(older)> leaves(older);
  std::vector<Node*> stack;
  for (auto& [ns, r] : roots_) stack.push_back(r.get());
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    if (n->parent && n->children.empty() && n->lock_count == 0) leaves.push(n);
    for (auto& [key, c] : n->children) stack.push_back(c.get());
  }
  int64_t freed = 0;
  while (freed < want && !leaves.empty()) {
    Node* leaf = leaves.top();
    leaves.pop();
    for (int32_t blk : leaf->blocks) pool_.release(blk);
    freed += static_cast<int64_t>(leaf->blocks.size());
    cached_blocks_ -= static_cast<int64_t>(leaf->blocks.size());
    Node* parent = leaf->parent;
    parent->children.erase(std::vector<int32_t>(leaf->tokens.begin(), leaf->tokens.begin() + block_size_));
    if (parent->parent && parent->children.empty() && parent->lock_count == 0) leaves.push(parent);
  }
  // Namespaces with nothing left and nothing locked.
  for (auto it = roots_.begin(); it != roots_.end();) {
    it = it->second->children.empty() && it->second->lock_count == 0 ? roots_.erase(it) : std::next(it);
  }
  return freed;
}

int64_t PrefixCache::flush() { return evict(cached_blocks_); }

void PrefixCache::collect_blocks(std::vector<int32_t>& out) const {
  std::vector<const Node*> stack;
  for (const auto& [ns, r] : roots_) stack.push_back(r.get());
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    out.insert(out.end(), n->blocks.begin(), n->blocks.end());
    for (const auto& [key, c] : n->children) stack.push_back(c.get());
  }
}

}  // namespace tessera::serve
