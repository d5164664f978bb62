#include "runtime/fma_peak.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TESSERA_FMA_X86 1
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace tessera {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Each FMA loop keeps 12 independent accumulators in registers: enough to cover FMA latency
// (4 cycles) times the FMA ports (2) on current x86 cores. acc = acc*a + b converges, so the
// values stay finite however long it runs. Returns a sum so the loop is not optimized away.
constexpr int kAccumulators = 12;

#ifdef TESSERA_FMA_X86
__attribute__((target("avx512f"))) float fma_loop_avx512(int64_t iters) {
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-6f);
  __m512 c0 = _mm512_set1_ps(0.0f), c1 = _mm512_set1_ps(0.1f), c2 = _mm512_set1_ps(0.2f),
         c3 = _mm512_set1_ps(0.3f);
  __m512 c4 = _mm512_set1_ps(0.4f), c5 = _mm512_set1_ps(0.5f), c6 = _mm512_set1_ps(0.6f),
         c7 = _mm512_set1_ps(0.7f);
  __m512 c8 = _mm512_set1_ps(0.8f), c9 = _mm512_set1_ps(0.9f), c10 = _mm512_set1_ps(1.0f),
         c11 = _mm512_set1_ps(1.1f);
  for (int64_t i = 0; i < iters; ++i) {
    c0 = _mm512_fmadd_ps(c0, a, b);
    c1 = _mm512_fmadd_ps(c1, a, b);
    c2 = _mm512_fmadd_ps(c2, a, b);
    c3 = _mm512_fmadd_ps(c3, a, b);
    c4 = _mm512_fmadd_ps(c4, a, b);
    c5 = _mm512_fmadd_ps(c5, a, b);
    c6 = _mm512_fmadd_ps(c6, a, b);
    c7 = _mm512_fmadd_ps(c7, a, b);
    c8 = _mm512_fmadd_ps(c8, a, b);
    c9 = _mm512_fmadd_ps(c9, a, b);
    c10 = _mm512_fmadd_ps(c10, a, b);
    c11 = _mm512_fmadd_ps(c11, a, b);
  }
  __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c0, c1), _mm512_add_ps(c2, c3)),
                           _mm512_add_ps(_mm512_add_ps(c4, c5), _mm512_add_ps(c6, c7)));
  s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(c8, c9), _mm512_add_ps(c10, c11)));
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);  // (_mm512_reduce_add_ps trips a false -Wuninitialized in GCC 12)
  float sum = 0;
  for (float v : lanes) sum += v;
  return sum;
}

__attribute__((target("avx2,fma"))) float fma_loop_avx2(int64_t iters) {
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-6f);
  __m256 c0 = _mm256_set1_ps(0.0f), c1 = _mm256_set1_ps(0.1f), c2 = _mm256_set1_ps(0.2f),
         c3 = _mm256_set1_ps(0.3f);
  __m256 c4 = _mm256_set1_ps(0.4f), c5 = _mm256_set1_ps(0.5f), c6 = _mm256_set1_ps(0.6f),
         c7 = _mm256_set1_ps(0.7f);
  __m256 c8 = _mm256_set1_ps(0.8f), c9 = _mm256_set1_ps(0.9f), c10 = _mm256_set1_ps(1.0f),
         c11 = _mm256_set1_ps(1.1f);
  for (int64_t i = 0; i < iters; ++i) {
    c0 = _mm256_fmadd_ps(c0, a, b);
    c1 = _mm256_fmadd_ps(c1, a, b);
    c2 = _mm256_fmadd_ps(c2, a, b);
    c3 = _mm256_fmadd_ps(c3, a, b);
    c4 = _mm256_fmadd_ps(c4, a, b);
    c5 = _mm256_fmadd_ps(c5, a, b);
    c6 = _mm256_fmadd_ps(c6, a, b);
    c7 = _mm256_fmadd_ps(c7, a, b);
    c8 = _mm256_fmadd_ps(c8, a, b);
    c9 = _mm256_fmadd_ps(c9, a, b);
    c10 = _mm256_fmadd_ps(c10, a, b);
    c11 = _mm256_fmadd_ps(c11, a, b);
  }
  __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c0, c1), _mm256_add_ps(c2, c3)),
                           _mm256_add_ps(_mm256_add_ps(c4, c5), _mm256_add_ps(c6, c7)));
  s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(c8, c9), _mm256_add_ps(c10, c11)));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, s);
  float sum = 0;
  for (float v : lanes) sum += v;
  return sum;
}

#endif

float fma_loop_scalar(int64_t iters) {
  float c[kAccumulators];
  for (int j = 0; j < kAccumulators; ++j) c[j] = 0.1f * j;
  for (int64_t i = 0; i < iters; ++i)
    for (float& x : c) x = x * 0.999999f + 1e-6f;
  float sum = 0;
  for (float x : c) sum += x;
  return sum;
}

struct FmaLoop {
  const char* isa;
  int lanes;
  float (*fn)(int64_t);
};

FmaLoop pick_fma_loop() {
#ifdef TESSERA_FMA_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return {"avx512f", 16, fma_loop_avx512};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return {"avx2+fma", 8, fma_loop_avx2};
#endif
  return {"scalar", 1, fma_loop_scalar};
}

// Best GFLOP/s of `threads` copies of the FMA loop over `reps` short runs of about `run_s` seconds
// each: the best of many short runs is robust to other processes taking the CPU now and then.
double fma_gflops(const FmaLoop& loop, int threads, double run_s, int reps) {
  // Calibrate the iteration count on one thread so each run lasts about run_s.
  int64_t iters = 1 << 14;
  for (;;) {
    Clock::time_point t0 = Clock::now();
    volatile float sink = loop.fn(iters);
    (void)sink;
    double s = seconds_since(t0);
    if (s > 0.01) {
      iters = std::max<int64_t>(1, static_cast<int64_t>(iters * run_s / s));
      break;
    }
    iters *= 4;
  }
  std::vector<float> sinks(threads);
  double best = 0;
  for (int rep = 0; rep < reps; ++rep) {
    double s = run_on_threads(threads, [&](int t) { sinks[t] = loop.fn(iters); });
    double flops = 2.0 * kAccumulators * loop.lanes * static_cast<double>(iters) * threads;
    best = std::max(best, flops / s * 1e-9);
  }
  return best;
}

}  // namespace

double run_on_threads(int threads, const std::function<void(int)>& body) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  auto worker = [&](int t) {
    ready.fetch_add(1);
    while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
    body(t);
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker, t);
  while (ready.load() < threads - 1) std::this_thread::yield();
  Clock::time_point t0 = Clock::now();
  go.store(true, std::memory_order_release);
  body(0);
  for (std::thread& th : pool) th.join();
  return seconds_since(t0);
}

FmaPeak measure_fma_peak(int threads, int reps, double run_seconds) {
  FmaPeak peak;
  peak.threads = std::max(1, threads);
  const FmaLoop loop = pick_fma_loop();
  peak.isa = loop.isa;
  reps = std::max(1, reps);
  peak.gflops_1t = fma_gflops(loop, 1, run_seconds, reps);
  // N threads can always do what one does (they may share a core's FMA units: SMT siblings).
  peak.gflops_nt = peak.threads == 1 ? peak.gflops_1t
                                     : std::max(peak.gflops_1t, fma_gflops(loop, peak.threads, run_seconds, reps));
  return peak;
}

}  // namespace tessera
