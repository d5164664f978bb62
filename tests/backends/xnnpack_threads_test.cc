// XNNPACK's pthreadpool on tessera's threads (xnnpack_threads.cc): the functions XNNPACK calls are
// ours, and each parallel loop visits every tile exactly once, with the right extents, on the
// ThreadPool bound to it (or on the caller when none is).
#include <gtest/gtest.h>

#if defined(TESSERA_WITH_XNNPACK)
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

#include "backends/xnnpack/xnnpack_threads.h"

namespace tessera::xnnpack {
namespace {

// What the tasks saw: one entry per call, (start..., size...) of the tiled dims.
struct Visits {
  std::mutex mu;
  std::map<std::vector<size_t>, int> calls;
  std::set<std::thread::id> threads;
  void add(std::vector<size_t> key) {
    std::lock_guard<std::mutex> lock(mu);
    ++calls[std::move(key)];
    threads.insert(std::this_thread::get_id());
  }
};

// Tiles of [0, range) by `tile`: (start, size) pairs, the last one shorter.
std::vector<std::pair<size_t, size_t>> tiles(size_t range, size_t tile) {
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t s = 0; s < range; s += tile) out.emplace_back(s, std::min(tile, range - s));
  return out;
}

TEST(XnnpackThreads, XnnpackCallsTheseFunctions) { EXPECT_TRUE(xnnpack_uses_tessera_threads()); }

TEST(XnnpackThreads, TwoDimTiledLoopVisitsEveryTileOnce) {
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    pthreadpool_t p = pthreadpool_create(static_cast<size_t>(threads));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(pthreadpool_get_threads_count(p), static_cast<size_t>(threads));
    bind_thread_pool(p, &pool);
    for (auto [ri, rj, ti, tj] : {std::tuple<size_t, size_t, size_t, size_t>{7, 10, 2, 3}, {1, 1, 4, 4}, {16, 5, 16, 1}}) {
      Visits v;
      pthreadpool_parallelize_2d_tile_2d(
          p,
          [](void* ctx, size_t i, size_t j, size_t ni, size_t nj) { static_cast<Visits*>(ctx)->add({i, j, ni, nj}); },
          &v, ri, rj, ti, tj, 0);
      std::map<std::vector<size_t>, int> want;
      for (auto [i, ni] : tiles(ri, ti))
        for (auto [j, nj] : tiles(rj, tj)) want[{i, j, ni, nj}] = 1;
      EXPECT_EQ(v.calls, want) << ri << "x" << rj << " by " << ti << "x" << tj << ", " << threads << " threads";
    }
    pthreadpool_destroy(p);
  }
}

TEST(XnnpackThreads, HigherDimLoopsVisitEveryIndexOnce) {
  ThreadPool pool(2);
  pthreadpool_t p = pthreadpool_create(2);
  bind_thread_pool(p, &pool);
  Visits v3;
  pthreadpool_parallelize_3d_tile_2d(
      p,
      [](void* ctx, size_t b, size_t i, size_t j, size_t ni, size_t nj) {
        static_cast<Visits*>(ctx)->add({b, i, j, ni, nj});
      },
      &v3, 3, 5, 9, 2, 4, 0);
  std::map<std::vector<size_t>, int> want3;
  for (size_t b = 0; b < 3; ++b)
    for (auto [i, ni] : tiles(5, 2))
      for (auto [j, nj] : tiles(9, 4)) want3[{b, i, j, ni, nj}] = 1;
  EXPECT_EQ(v3.calls, want3);

  Visits v6;
  pthreadpool_parallelize_6d_tile_2d(
      p,
      [](void* ctx, size_t a, size_t b, size_t c, size_t d, size_t e, size_t f, size_t ne, size_t nf) {
        static_cast<Visits*>(ctx)->add({a, b, c, d, e, f, ne, nf});
      },
      &v6, 2, 1, 3, 2, 5, 7, 3, 3, 0);
  std::map<std::vector<size_t>, int> want6;
  for (size_t a = 0; a < 2; ++a)
    for (size_t c = 0; c < 3; ++c)
      for (size_t d = 0; d < 2; ++d)
        for (auto [e, ne] : tiles(5, 3))
          for (auto [f, nf] : tiles(7, 3)) want6[{a, 0, c, d, e, f, ne, nf}] = 1;
  EXPECT_EQ(v6.calls, want6);

  Visits v1;
  pthreadpool_parallelize_1d(p, [](void* ctx, size_t i) { static_cast<Visits*>(ctx)->add({i}); }, &v1, 0, 0);
  EXPECT_TRUE(v1.calls.empty());  // an empty range calls nothing
  pthreadpool_destroy(p);
}

TEST(XnnpackThreads, LoopsRunOnTheBoundPoolOrOnTheCaller) {
  auto slow_tile = [](void* ctx, size_t i) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    static_cast<Visits*>(ctx)->add({i});
  };
  ThreadPool pool(2);
  pthreadpool_t p = pthreadpool_create(2);
  bind_thread_pool(p, &pool);
  Visits shared;
  pthreadpool_parallelize_1d(p, slow_tile, &shared, 64, 0);
  EXPECT_EQ(shared.calls.size(), 64u);
  EXPECT_EQ(shared.threads.size(), 2u) << "the pool's worker took part";

  bind_thread_pool(p, nullptr);
  Visits alone;
  pthreadpool_parallelize_1d(p, slow_tile, &alone, 16, 0);
  EXPECT_EQ(alone.calls.size(), 16u);
  ASSERT_EQ(alone.threads.size(), 1u);
  EXPECT_EQ(*alone.threads.begin(), std::this_thread::get_id());
  pthreadpool_destroy(p);
}

}  // namespace
}  // namespace tessera::xnnpack
#endif
