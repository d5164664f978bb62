#include <gtest/gtest.h>

#include <random>
#include <set>

#include "llm/kv_cache.h"

namespace tessera::llm {
namespace {

ModelConfig small_config() {
  ModelConfig c;
  c.hidden = 32;
  c.heads = 4;
  c.kv_heads = 2;
  c.layers = 2;
  c.ffn_hidden = 64;
  c.vocab_size = 10;
  c.context_length = 64;
  return c;
}

// Every block is in exactly one place: the free list or one sequence's table.
void expect_partition(const KvCache& cache, const std::vector<SequenceBlocks>& seqs, KvBlockPool& pool) {
  std::set<int32_t> owned;
  for (const SequenceBlocks& s : seqs) {
    for (int32_t b : s.blocks) {
      EXPECT_TRUE(owned.insert(b).second) << "block " << b << " in two tables";
      EXPECT_TRUE(pool.in_use(b));
    }
  }
  EXPECT_EQ(static_cast<int32_t>(owned.size()) + pool.free_count(), pool.capacity());
  (void)cache;
}

TEST(KvCache, BlocksStayPartitionedUnderRandomChurn) {
  KvCache cache(small_config(), 40, 4);
  std::vector<SequenceBlocks> seqs(6);
  std::mt19937 rng(9);
  for (int step = 0; step < 2000; ++step) {
    SequenceBlocks& s = seqs[rng() % seqs.size()];
    if (rng() % 4 == 0) {
      cache.release(s);
    } else {
      const int64_t want = s.length + 1 + rng() % 9;
      const int32_t free_before = cache.pool().free_count();
      const size_t had = s.blocks.size();
      Status st = cache.reserve(s, want);
      if (st.ok()) {
        s.length = want;
        EXPECT_EQ(static_cast<int64_t>(s.blocks.size()), (want + 3) / 4);
      } else {
        EXPECT_EQ(cache.pool().free_count(), free_before);  // nothing taken
        EXPECT_EQ(s.blocks.size(), had);
      }
    }
    expect_partition(cache, seqs, cache.pool());
  }
  for (SequenceBlocks& s : seqs) cache.release(s);
  EXPECT_EQ(cache.pool().free_count(), 40);
}

TEST(KvCache, SizesFollowTheConfig) {
  const ModelConfig c = small_config();
  EXPECT_EQ(KvCache::bytes_per_block(c, 16), 2 * 2 * 2 * 16 * 8 * 4);
  EXPECT_EQ(KvCache::blocks_for_bytes(c, 16, 10 * KvCache::bytes_per_block(c, 16) + 5), 10);
  KvCache cache(c, 3, 16);
  EXPECT_EQ(cache.k(1).dims(), (std::vector<int64_t>{3, 2, 8, 16}));  // keys transposed per block
  EXPECT_EQ(cache.v(1).dims(), (std::vector<int64_t>{3, 2, 16, 8}));
}

// commit(seq) writes exactly seq's blocks, in every layer's K and V, and nothing else.
TEST(KvCache, CommitOfASequenceWritesOnlyItsBlocks) {
  const ModelConfig c = small_config();
  KvCache cache(c, 6, 4);
  std::vector<const Tensor*> all;
  for (int64_t l = 0; l < c.layers; ++l) {
    all.push_back(&cache.k(l));
    all.push_back(&cache.v(l));
  }
  for (const Tensor* t : all) {
    float* f = const_cast<float*>(t->data<float>());
    for (int64_t i = 0; i < t->numel(); ++i) f[i] = 7.0f;
  }
  SequenceBlocks other, seq;
  ASSERT_TRUE(cache.reserve(other, 5).ok());  // blocks 0, 1
  ASSERT_TRUE(cache.reserve(seq, 9).ok());    // blocks 2, 3, 4
  ASSERT_EQ(seq.blocks.size(), 3u);
  cache.commit(seq);
  const std::set<int32_t> mine(seq.blocks.begin(), seq.blocks.end());
  for (const Tensor* t : all) {
    const int64_t per_block = t->numel() / 6;
    for (int64_t i = 0; i < t->numel(); ++i) {
      const float want = mine.count(static_cast<int32_t>(i / per_block)) ? 0.0f : 7.0f;
      ASSERT_EQ(t->data<float>()[i], want) << "element " << i;
    }
  }
}

}  // namespace
}  // namespace tessera::llm
