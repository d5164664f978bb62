// ThreadPool::parallel_for: every index exactly once, across many jobs back to back and after the
// workers have gone to sleep (the hand-off between spinning and sleeping is where wake-ups get lost:
// a lost one shows up as a hang, which CTest's timeout turns into a failure), stealing from a
// thread that is held up, nested and concurrent calls.
#include "ir/parallel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>
#include <vector>

namespace tessera {
namespace {

// Runs parallel_for(n, grain) and checks that the chunks cover [0, n) exactly once, each at least
// `grain` long except the last.
void expect_exact_cover(ThreadPool& pool, int64_t n, int64_t grain) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  std::atomic<int64_t> short_chunks{0};
  pool.parallel_for(n, grain, [&](int64_t b, int64_t e) {
    ASSERT_LT(b, e);
    ASSERT_LE(e, n);
    if (e - b < grain && e != n) ++short_chunks;
    for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
  });
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "n=" << n << " i=" << i;
  EXPECT_EQ(short_chunks.load(), 0);
}

TEST(ThreadPool, EveryIndexOnceOverManyJobsBackToBack) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    std::mt19937 g(static_cast<uint32_t>(threads));
    for (int job = 0; job < 3000; ++job) {
      const int64_t n = std::uniform_int_distribution<int64_t>(1, 300)(g);
      const int64_t grain = std::uniform_int_distribution<int64_t>(1, 40)(g);
      expect_exact_cover(pool, n, grain);
    }
  }
}

TEST(ThreadPool, WakesWorkersThatWentToSleep) {
  ThreadPool pool(3);
  // Pauses longer than the spin (~50 us) put the workers (and the caller's wait) to sleep.
  for (int job = 0; job < 60; ++job) {
    std::this_thread::sleep_for(std::chrono::microseconds(job % 3 == 0 ? 2000 : 80));
    expect_exact_cover(pool, 64, 1);
  }
  // The caller sleeps while a worker is slow.
  for (int job = 0; job < 20; ++job) {
    std::atomic<int64_t> sum{0};
    pool.parallel_for(6, 1, [&](int64_t b, int64_t e) {
      if (b == 5) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      sum += e - b;
    });
    EXPECT_EQ(sum.load(), 6);
  }
}

TEST(ThreadPool, WorkIsSharedAcrossThreads) {
  ThreadPool pool(2);
  std::atomic<bool> seen_other{false};
  const std::thread::id caller = std::this_thread::get_id();
  for (int job = 0; job < 200 && !seen_other; ++job) {
    pool.parallel_for(8, 1, [&](int64_t, int64_t) {
      if (std::this_thread::get_id() != caller) seen_other = true;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    });
  }
  EXPECT_TRUE(seen_other.load());
}

// A thread held up inside a chunk does not hold up the rest of its share: the others steal it.
// The worker's first chunk waits until every other item is done (or 10 s pass: a failure).
TEST(ThreadPool, OthersStealTheShareOfAThreadThatIsHeldUp) {
  ThreadPool pool(2);
  const std::thread::id caller = std::this_thread::get_id();
  for (int job = 0; job < 20; ++job) {
    constexpr int64_t kN = 64;
    std::atomic<int64_t> done{0};
    std::atomic<bool> held{false}, timed_out{false};
    pool.parallel_for(kN, 1, [&](int64_t b, int64_t e) {
      if (std::this_thread::get_id() != caller && !held.exchange(true)) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (done.load() < kN - (e - b)) {
          if (std::chrono::steady_clock::now() > deadline) {
            timed_out = true;
            break;
          }
          std::this_thread::yield();
        }
      }
      done += e - b;
    });
    EXPECT_EQ(done.load(), kN);
    ASSERT_FALSE(timed_out.load());
  }
}

TEST(ThreadPool, NestedAndConcurrentCallsRunInline) {
  ThreadPool pool(2);
  std::atomic<int64_t> inner{0};
  pool.parallel_for(8, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      pool.parallel_for(10, 1, [&](int64_t ib, int64_t ie) { inner += ie - ib; });
    }
  });
  EXPECT_EQ(inner.load(), 80);
  // Two threads calling at once: one runs on the pool, the other inline; both cover their range.
  std::vector<std::thread> callers;
  for (int c = 0; c < 2; ++c) {
    callers.emplace_back([&] {
      for (int job = 0; job < 500; ++job) expect_exact_cover(pool, 37, 3);
    });
  }
  for (auto& t : callers) t.join();
}

TEST(ThreadPool, DestroysCleanlyWhileWorkersSpinOrSleep) {
  for (int i = 0; i < 50; ++i) {
    ThreadPool pool(3);
    expect_exact_cover(pool, 16, 1);
    if (i % 2) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// Every thread of a job computes in the caller's floating-point mode: a subnormal product is
// flushed to zero everywhere inside ScopedFlushDenormals (where the CPU has such a mode) and
// kept everywhere after it, so kernels give the same numbers whichever thread ran a chunk.
TEST(ThreadPool, WorkersComputeInTheCallersFloatingPointMode) {
  ThreadPool pool(3);
  volatile float tiny = 1e-30f;  // volatile: computed at run time, in the thread's mode
  auto products = [&] {
    std::vector<float> out(64, -1.0f);
    pool.parallel_for(64, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        out[static_cast<size_t>(i)] = tiny * 1e-10f;  // 1e-40: subnormal
        std::this_thread::sleep_for(std::chrono::microseconds(20));  // let every thread take some
      }
    });
    return out;
  };
  const uint32_t before = fp_control();
  {
    ScopedFlushDenormals flush;
#if defined(__x86_64__) || defined(__i386__)
    for (float p : products()) EXPECT_EQ(p, 0.0f);
#endif
  }
  EXPECT_EQ(fp_control(), before);  // restored
  for (float p : products()) {
    EXPECT_GT(p, 0.0f);
    EXPECT_LT(p, 1e-38f);
  }
}

}  // namespace
}  // namespace tessera
