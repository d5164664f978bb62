#include "runtime/fma_peak.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace tessera {
namespace {

TEST(FmaPeak, MeasuresAPlausibleRate) {
  FmaPeak p = measure_fma_peak(2, 2, 0.005);
  EXPECT_FALSE(p.isa.empty());
  EXPECT_EQ(p.threads, 2);
  EXPECT_GT(p.gflops_1t, 0.1);
  EXPECT_GE(p.gflops_nt, p.gflops_1t);
  // No core retires more than 4 vector FMAs of 16 floats a cycle, nor runs at 8 GHz: a rate
  // above that is a miscount (flops per iteration, threads counted twice).
  EXPECT_LT(p.gflops_1t, 4 * 16 * 2 * 8.0);
  EXPECT_LT(p.gflops_nt, 2 * 4 * 16 * 2 * 8.0);
}

TEST(FmaPeak, RunOnThreadsRunsEachIndexOnceAllAtOnce) {
  std::atomic<int> mask{0}, inside{0}, met{0};
  double s = run_on_threads(3, [&](int t) {
    mask.fetch_or(1 << t);
    inside.fetch_add(1);
    // They were started together, so each sees the other two arrive (unless one hung).
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (inside.load() < 3 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    if (inside.load() == 3) met.fetch_add(1);
  });
  EXPECT_EQ(mask.load(), 0b111);
  EXPECT_EQ(met.load(), 3);
  EXPECT_GT(s, 0);
}

}  // namespace
}  // namespace tessera
