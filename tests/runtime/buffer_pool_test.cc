#include "runtime/buffer_pool.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(BufferPool, ReusesReleasedBufferOfSimilarSize) {
  BufferPool pool;
  Tensor a = pool.allocate(DType::kFloat32, {256});
  const void* first = a.raw_data();
  pool.release(a);
  EXPECT_FALSE(a.defined());
  Tensor b = pool.allocate(DType::kFloat32, {200});
  EXPECT_EQ(b.raw_data(), first);
  // Reused buffers come back zeroed, like fresh ones.
  for (int64_t i = 0; i < b.numel(); ++i) EXPECT_EQ(b.data<float>()[i], 0.0f);
}

TEST(BufferPool, DoesNotReuseFarLargerBuffer) {
  BufferPool pool;
  Tensor big = pool.allocate(DType::kFloat32, {1 << 16});
  const void* p = big.raw_data();
  pool.release(big);
  Tensor small = pool.allocate(DType::kFloat32, {16});
  EXPECT_NE(small.raw_data(), p);
}

TEST(BufferPool, SharedBufferIsNotReturnedWhileInUse) {
  BufferPool pool;
  Tensor a = pool.allocate(DType::kFloat32, {64});
  Tensor alias = a;  // e.g. a kernel forwarding its input
  const void* p = a.raw_data();
  pool.release(a);
  Tensor b = pool.allocate(DType::kFloat32, {64});
  EXPECT_NE(b.raw_data(), p);
  EXPECT_EQ(alias.raw_data(), p);
}

TEST(BufferPool, PeakCountsLiveBytes) {
  BufferPool pool;
  Tensor a = pool.allocate(DType::kFloat32, {1024});  // 4 KiB
  Tensor b = pool.allocate(DType::kFloat32, {1024});
  size_t two = pool.live_bytes();
  EXPECT_GE(two, 2 * 4096u);
  pool.release(a);
  pool.release(b);
  EXPECT_EQ(pool.live_bytes(), 0u);
  pool.reset_peak();
  Tensor c = pool.allocate(DType::kFloat32, {1024});
  EXPECT_EQ(pool.peak_bytes(), pool.live_bytes());
  EXPECT_LT(pool.peak_bytes(), two);
  EXPECT_EQ(pool.reserved_bytes(), two);  // c reused a freed buffer
}

TEST(BufferPool, DetachedBufferLeavesThePool) {
  BufferPool pool;
  Tensor a = pool.allocate(DType::kFloat32, {64});
  pool.detach(a);
  EXPECT_EQ(pool.live_bytes(), 0u);
  Tensor keep = a;
  pool.release(a);  // not owned any more: ignored
  Tensor b = pool.allocate(DType::kFloat32, {64});
  EXPECT_NE(b.raw_data(), keep.raw_data());
}

TEST(BufferPool, ReleaseFreeDropsOnlyTheFreeBuffers) {
  BufferPool pool;
  Tensor live = pool.allocate(DType::kFloat32, {1024});
  Tensor a = pool.allocate(DType::kFloat32, {2048});
  Tensor b = pool.allocate(DType::kFloat32, {4096});
  const size_t live_bytes = pool.live_bytes() - a.nbytes() - b.nbytes();
  pool.release(a);
  pool.release(b);
  const size_t freed = pool.release_free();
  EXPECT_GE(freed, (2048u + 4096u) * sizeof(float));
  EXPECT_EQ(pool.reserved_bytes(), pool.live_bytes());
  EXPECT_GE(pool.live_bytes(), live_bytes);
  EXPECT_EQ(pool.release_free(), 0u);
  // The live buffer still comes back and is reused afterwards.
  const void* p = live.raw_data();
  pool.release(live);
  Tensor c = pool.allocate(DType::kFloat32, {1000});
  EXPECT_EQ(c.raw_data(), p);
}

}  // namespace
}  // namespace tessera
