#include "ir/parallel.h"

#include <algorithm>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TESSERA_CPU_RELAX() _mm_pause()
#else
#define TESSERA_CPU_RELAX() ((void)0)
#endif

namespace tessera {

namespace {
// Spin iterations before blocking (a pause is tens of cycles: about 50 us in all).
constexpr int kSpinIterations = 2000;
// A chunk takes 1 / (kGuidedShare x threads) of the items left: the first ones large (few stream
// starts for kernels that read memory in order; a thread that gets less CPU on a shared machine
// holds up at most that much), the last ones `grain` items. With fixed chunks (each an eighth of
// the loop at 2 threads) a thread idled for up to one chunk at the end of every loop: decode's
// weight streams ran 10-30% slower than this.
constexpr int kGuidedShare = 4;
}  // namespace

ThreadPool::ThreadPool(int num_threads) : num_threads_(std::max(1, num_threads)) {
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  {
    std::lock_guard<std::mutex> lock(mu_);  // a worker between its checks and its wait holds mu_
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop() {
  int64_t seen = 0;
  for (;;) {
    for (int i = 0; i < kSpinIterations && generation_.load(std::memory_order_acquire) == seen &&
                    !stop_.load(std::memory_order_relaxed);
         ++i) {
      TESSERA_CPU_RELAX();
    }
    if (generation_.load(std::memory_order_acquire) == seen && !stop_.load()) {
      std::unique_lock<std::mutex> lock(mu_);
      sleeping_workers_.fetch_add(1);
      work_cv_.wait(lock, [&] { return stop_.load() || generation_.load() != seen; });
      sleeping_workers_.fetch_sub(1);
    }
    if (stop_.load()) return;
    seen = generation_.load(std::memory_order_acquire);
    run_chunks(*job_, job_n_, job_grain_);
    if (pending_.fetch_sub(1) == 1 && caller_sleeping_.load()) {
      std::lock_guard<std::mutex> lock(mu_);  // the caller checks pending_ under the lock
      done_cv_.notify_one();
    }
  }
}

void ThreadPool::run_chunks(const std::function<void(int64_t, int64_t)>& fn, int64_t n, int64_t grain) {
  const int64_t share = int64_t{kGuidedShare} * num_threads_;
  for (;;) {
    int64_t begin = next_item_.load(std::memory_order_relaxed), size = 0;
    do {
      if (begin >= n) return;
      size = std::min(n - begin, std::max(grain, (n - begin + share - 1) / share));
    } while (!next_item_.compare_exchange_weak(begin, begin + size, std::memory_order_relaxed));
    fn(begin, begin + size);
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t max_chunks = (n + grain - 1) / grain;
  if (num_threads_ == 1 || max_chunks == 1 || busy_.exchange(true, std::memory_order_acquire)) {
    fn(0, n);
    return;
  }
  job_grain_ = grain;
  job_n_ = n;
  job_ = &fn;
  next_item_.store(0, std::memory_order_relaxed);
  pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  generation_.fetch_add(1);  // publishes the job (sequentially consistent: see sleeping_workers_)
  if (sleeping_workers_.load() > 0) {
    { std::lock_guard<std::mutex> lock(mu_); }
    work_cv_.notify_all();
  }
  run_chunks(fn, n, grain);
  for (int i = 0; i < kSpinIterations && pending_.load(std::memory_order_acquire) != 0; ++i) TESSERA_CPU_RELAX();
  if (pending_.load(std::memory_order_acquire) != 0) {
    std::unique_lock<std::mutex> lock(mu_);
    caller_sleeping_.store(true);
    done_cv_.wait(lock, [&] { return pending_.load() == 0; });
    caller_sleeping_.store(false);
  }
  busy_.store(false, std::memory_order_release);
}

}  // namespace tessera
