// The radix prefix cache on its own: matches, splits, namespaces, LRU eviction of unlocked leaves,
// and block ownership under random churn (every block owned by exactly one of the free list, the
// tree and a running request; and a matched block always holds the K/V of the tokens it matched).
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "serve/prefix_cache.h"

namespace tessera::serve {
namespace {

constexpr int64_t kBs = 4;

// A request's blocks, as the engine keeps them: the first `tree` belong to the cache.
struct FakeRequest {
  uint64_t ns = 0;
  std::vector<int32_t> tokens;
  std::vector<int32_t> blocks;
  int64_t tree = 0;
  PrefixCache::Node* locked = nullptr;
};

TEST(PrefixCache, MatchesWholeBlocksAndSplitsOnPartialMatch) {
  llm::KvBlockPool pool(16);
  PrefixCache cache(pool, kBs);
  std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13};  // 3 full blocks + 1
  std::vector<int32_t> blocks;
  for (int i = 0; i < 4; ++i) blocks.push_back(pool.allocate());
  PrefixCache::Node* n = cache.insert(0, a, blocks, 3);
  EXPECT_EQ(cache.cached_blocks(), 3);
  pool.release(blocks[3]);  // the partial block stays the request's

  // Shares two blocks, then differs inside the third.
  std::vector<int32_t> b = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 99, 12, 13, 14};
  EXPECT_EQ(cache.cached_prefix(0, b, 100), 8);
  PrefixCache::Match m = cache.match(0, b, 100);
  EXPECT_EQ(m.tokens, 8);
  EXPECT_EQ(m.blocks, std::vector<int32_t>(blocks.begin(), blocks.begin() + 2));
  // The split left the original path intact.
  EXPECT_EQ(cache.cached_prefix(0, a, 100), 12);
  // max_tokens caps the match at whole blocks below it.
  EXPECT_EQ(cache.cached_prefix(0, a, 11), 8);
  EXPECT_EQ(cache.cached_prefix(0, a, 7), 4);
  // Another namespace sees nothing.
  EXPECT_EQ(cache.cached_prefix(1, a, 100), 0);
  PrefixCache::Match other = cache.match(1, a, 100);
  EXPECT_EQ(other.tokens, 0);
  cache.unlock(other.node);

  // The matched path is locked: only the unshared third block can go.
  EXPECT_EQ(cache.evictable_blocks(), 1);
  EXPECT_EQ(cache.evict(10), 1);
  EXPECT_EQ(cache.cached_prefix(0, a, 100), 8);
  cache.unlock(m.node);
  EXPECT_EQ(cache.flush(), 2);
  EXPECT_EQ(pool.free_count(), 16);
  (void)n;
}

TEST(PrefixCache, InsertKeepsTheTreesCopyAndFreesTheDuplicate) {
  llm::KvBlockPool pool(8);
  PrefixCache cache(pool, kBs);
  const std::vector<int32_t> t = {5, 6, 7, 8, 9, 10, 11, 12};
  std::vector<int32_t> first = {pool.allocate(), pool.allocate()};
  cache.insert(0, t, first, 2);
  std::vector<int32_t> second = {pool.allocate(), pool.allocate()};  // computed the same prefix
  const int free_before = pool.free_count();
  cache.insert(0, t, second, 2);
  EXPECT_EQ(second, first);
  EXPECT_EQ(pool.free_count(), free_before + 2);
  EXPECT_EQ(cache.cached_blocks(), 2);
}

TEST(PrefixCache, EvictsLeastRecentlyUsedLeavesFirst) {
  llm::KvBlockPool pool(8);
  PrefixCache cache(pool, kBs);
  const std::vector<int32_t> x = {1, 1, 1, 1}, y = {2, 2, 2, 2}, z = {3, 3, 3, 3};
  for (const auto* t : {&x, &y, &z}) {
    std::vector<int32_t> b = {pool.allocate()};
    cache.insert(0, *t, b, 1);
  }
  cache.unlock(cache.match(0, x, 4).node);  // x used again: y is now the oldest
  EXPECT_EQ(cache.evict(1), 1);
  EXPECT_EQ(cache.cached_prefix(0, y, 4), 0);
  EXPECT_EQ(cache.cached_prefix(0, x, 4), 4);
  EXPECT_EQ(cache.cached_prefix(0, z, 4), 4);
  EXPECT_EQ(cache.evict(1), 1);
  EXPECT_EQ(cache.cached_prefix(0, z, 4), 0);
}

// What a block "holds": a fingerprint of every token up to its end (the K/V of position p depend
// on tokens 0..p), written when a request computes it.
uint64_t fingerprint(const std::vector<int32_t>& tokens, int64_t end) {
  uint64_t h = 1469598103934665603ull;
  end = std::min<int64_t>(end, static_cast<int64_t>(tokens.size()));
  for (int64_t i = 0; i < end; ++i) h = (h ^ static_cast<uint64_t>(tokens[i] + 7)) * 1099511628211ull;
  return h;
}

TEST(PrefixCache, BlockOwnershipHoldsUnderRandomChurn) {
  constexpr int32_t kBlocks = 48;
  llm::KvBlockPool pool(kBlocks);
  PrefixCache cache(pool, kBs);
  std::vector<uint64_t> content(kBlocks, 0);
  std::mt19937_64 rng(42);
  // A few shared prefixes, so requests overlap in interesting ways.
  std::vector<std::vector<int32_t>> prefixes;
  for (int p = 0; p < 4; ++p) {
    std::vector<int32_t> t(4 + rng() % 24);
    for (auto& v : t) v = static_cast<int32_t>(rng() % 5);
    prefixes.push_back(t);
  }
  std::vector<FakeRequest> running;
  int64_t hits = 0;

  auto check = [&](int step) {
    std::vector<int> owners(kBlocks, 0);
    for (int32_t b = 0; b < kBlocks; ++b) owners[b] += pool.in_use(b) ? 0 : 1;
    std::vector<int32_t> tree;
    cache.collect_blocks(tree);
    std::vector<uint8_t> in_tree(kBlocks, 0);
    for (int32_t b : tree) {
      ++owners[b];
      in_tree[b] = 1;
    }
    ASSERT_EQ(static_cast<int64_t>(tree.size()), cache.cached_blocks());
    for (const FakeRequest& r : running) {
      for (size_t i = 0; i < r.blocks.size(); ++i) {
        if (static_cast<int64_t>(i) < r.tree) {
          ASSERT_TRUE(in_tree[r.blocks[i]]) << "step " << step;
        } else {
          ++owners[r.blocks[i]];
        }
        // Every block a request reads holds its own tokens' K/V.
        ASSERT_EQ(content[r.blocks[i]], fingerprint(r.tokens, static_cast<int64_t>(i + 1) * kBs)) << "step " << step;
      }
    }
    for (int32_t b = 0; b < kBlocks; ++b) ASSERT_EQ(owners[b], 1) << "block " << b << " at step " << step;
  };
  auto finish = [&](size_t i) {
    FakeRequest& r = running[i];
    const int64_t full = static_cast<int64_t>(r.tokens.size()) / kBs;
    if (full > r.tree) {
      PrefixCache::Node* n = cache.insert(r.ns, r.tokens, r.blocks, full);
      cache.lock(n);
      cache.unlock(r.locked);
      r.locked = n;
      r.tree = full;
    }
    cache.unlock(r.locked);
    for (size_t b = static_cast<size_t>(r.tree); b < r.blocks.size(); ++b) pool.release(r.blocks[b]);
    running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
  };

  for (int step = 0; step < 3000; ++step) {
    const int op = static_cast<int>(rng() % 10);
    if (op < 5) {  // a new request: a shared prefix, then its own tokens
      FakeRequest r;
      r.ns = rng() % 3 == 0 ? 1 : 0;
      r.tokens = prefixes[rng() % prefixes.size()];
      const int extra = static_cast<int>(rng() % 12);
      for (int e = 0; e < extra; ++e) r.tokens.push_back(static_cast<int32_t>(rng() % 5));
      PrefixCache::Match m = cache.match(r.ns, r.tokens, static_cast<int64_t>(r.tokens.size()) - 1);
      hits += m.tokens;
      r.locked = m.node;
      r.blocks = m.blocks;
      r.tree = static_cast<int64_t>(m.blocks.size());
      const int64_t need = (static_cast<int64_t>(r.tokens.size()) + kBs - 1) / kBs - r.tree;
      if (pool.free_count() < need) cache.evict(need - pool.free_count());
      if (pool.free_count() < need) {  // does not fit now
        cache.unlock(r.locked);
        continue;
      }
      for (int64_t b = 0; b < need; ++b) {
        const int32_t id = pool.allocate();
        content[id] = fingerprint(r.tokens, static_cast<int64_t>(r.blocks.size() + 1) * kBs);
        r.blocks.push_back(id);
      }
      running.push_back(std::move(r));
    } else if (op < 9 && !running.empty()) {
      finish(rng() % running.size());
    } else if (op == 9) {
      cache.evict(1 + rng() % 4);
    }
    check(step);
    if (::testing::Test::HasFatalFailure()) return;
  }
  while (!running.empty()) finish(0);
  EXPECT_GT(hits, 0);
  EXPECT_EQ(cache.evictable_blocks(), cache.cached_blocks());
  cache.flush();
  EXPECT_EQ(pool.free_count(), kBlocks);
}

}  // namespace
}  // namespace tessera::serve
