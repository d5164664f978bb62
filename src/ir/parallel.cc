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
}  // namespace

ThreadPool::ThreadPool(int num_threads) : num_threads_(std::max(1, num_threads)) {
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop(int index) {
  int64_t seen = 0;
  for (;;) {
    const std::function<void(int64_t, int64_t)>* job;
    int64_t n, chunk;
    for (int i = 0; i < kSpinIterations && generation_.load(std::memory_order_acquire) == seen &&
                    !stop_.load(std::memory_order_relaxed);
         ++i) {
      TESSERA_CPU_RELAX();
    }
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
      n = job_n_;
      chunk = job_chunk_;
    }
    int64_t begin = index * chunk;
    if (begin < n) (*job)(begin, std::min(n, begin + chunk));
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mu_);  // the waiter checks pending_ under the lock
      done_cv_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  int64_t max_chunks = (n + grain - 1) / grain;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (num_threads_ == 1 || max_chunks == 1 || busy_) {
      lock.unlock();
      fn(0, n);
      return;
    }
    busy_ = true;
    int64_t threads = std::min<int64_t>(num_threads_, max_chunks);
    job_chunk_ = (n + threads - 1) / threads;
    job_n_ = n;
    job_ = &fn;
    pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  work_cv_.notify_all();
  fn(0, std::min(n, job_chunk_));
  for (int i = 0; i < kSpinIterations && pending_.load(std::memory_order_acquire) != 0; ++i) TESSERA_CPU_RELAX();
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return pending_ == 0; });
  busy_ = false;
}

}  // namespace tessera
