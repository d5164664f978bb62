// ThreadPool::parallel_for: every index exactly once, across many jobs back to back and after the
// workers have gone to sleep (the hand-off between spinning and sleeping is where wake-ups get lost:
// a lost one shows up as a hang, which CTest's timeout turns into a failure), stealing from a
// thread that is held up, nested and concurrent calls.
#include "ir/parallel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <random>
#include <set>
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

// A region runner on threads of its own (as OpenMP's team would be): body(0) on the caller, the
// others on fresh threads; records which threads ran, and can start fewer threads than asked.
struct TestRunner {
  static inline std::atomic<int> regions{0};
  static inline int threads_to_start = -1;  // < 0: as many as asked
  static inline std::mutex mu;
  static inline std::set<std::thread::id> ids;
  static inline bool flush_in_workers = false;  // the started threads run in flush-to-zero mode
  static inline std::atomic<uint32_t> worker_mode_after{0};
  static void run(int n, void* ctx, void (*body)(void*, int)) {
    ++regions;
    const int started = threads_to_start < 0 ? n : threads_to_start;
    std::vector<std::thread> others;
    for (int t = 1; t < started; ++t)
      others.emplace_back([=] {
        { std::lock_guard<std::mutex> lock(mu); ids.insert(std::this_thread::get_id()); }
        std::optional<ScopedFlushDenormals> flush;
        if (flush_in_workers) flush.emplace();
        body(ctx, t);
        worker_mode_after = fp_control();
      });
    body(ctx, 0);
    for (std::thread& t : others) t.join();
  }
};

TEST(ThreadPool, RegionRunnerRunsTheSharesOnItsThreads) {
  ThreadPool pool(3);
  pool.set_region_runner(&TestRunner::run);
  EXPECT_EQ(pool.region_runner(), &TestRunner::run);
  TestRunner::regions = 0;
  TestRunner::ids.clear();
  for (int64_t n : {2, 3, 17, 1000, 4096}) expect_exact_cover(pool, n, 1);
  expect_exact_cover(pool, 1000, 7);
  EXPECT_EQ(TestRunner::regions.load(), 6);
  EXPECT_GE(TestRunner::ids.size(), 2u);  // the runner's threads took part
  // Work items ran on the runner's threads, not the pool's workers.
  std::mutex mu;
  std::set<std::thread::id> seen;
  pool.parallel_for(3000, 1, [&](int64_t, int64_t) {
    std::this_thread::sleep_for(std::chrono::microseconds(5));
    std::lock_guard<std::mutex> lock(mu);
    seen.insert(std::this_thread::get_id());
  });
  seen.erase(std::this_thread::get_id());
  for (std::thread::id id : seen) EXPECT_TRUE(TestRunner::ids.count(id)) << "a pool worker ran a share";

  // A runner that starts fewer threads than the pool has: the shares of the missing ones are
  // stolen, every index still runs once.
  TestRunner::threads_to_start = 1;
  for (int64_t n : {5, 999}) expect_exact_cover(pool, n, 1);
  TestRunner::threads_to_start = -1;

  pool.set_region_runner(nullptr);  // back to the pool's own workers
  const int before = TestRunner::regions.load();
  expect_exact_cover(pool, 1000, 1);
  EXPECT_EQ(TestRunner::regions.load(), before);
}

TEST(ThreadPool, RegionRunnerThreadsComputeInTheCallersModeAndKeepTheirOwn) {
  ThreadPool pool(2);
  pool.set_region_runner(&TestRunner::run);
  volatile float tiny = 1e-30f;
  std::vector<float> out(64, -1.0f);
  {
    ScopedFlushDenormals flush;
    pool.parallel_for(64, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) out[static_cast<size_t>(i)] = tiny * 1e-10f;
    });
  }
#if defined(__x86_64__) || defined(__i386__)
  for (float p : out) EXPECT_EQ(p, 0.0f);
#endif
  // A runner thread in a mode of its own (flush to zero, while the caller is not) computes its
  // share in the caller's mode and is back in its own mode after.
  TestRunner::flush_in_workers = true;
  pool.parallel_for(64, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      out[static_cast<size_t>(i)] = tiny * 1e-10f;
      std::this_thread::sleep_for(std::chrono::microseconds(20));  // let both threads take some
    }
  });
  TestRunner::flush_in_workers = false;
  for (float p : out) EXPECT_GT(p, 0.0f);
#if defined(__x86_64__) || defined(__i386__)
  // The modes without MXCSR's sticky exception flags (bits 0-5), which differ by what each thread
  // happened to compute.
  const auto mode = [](uint32_t control) { return control & ~0x3fu; };
  EXPECT_NE(mode(TestRunner::worker_mode_after.load()), mode(fp_control()));
  {
    ScopedFlushDenormals flush;
    EXPECT_EQ(mode(TestRunner::worker_mode_after.load()), mode(fp_control()));
  }
#endif
}

}  // namespace
}  // namespace tessera
