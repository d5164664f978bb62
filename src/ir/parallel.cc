#include "ir/parallel.h"

#include <algorithm>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TESSERA_CPU_RELAX() _mm_pause()
#define TESSERA_HAS_MXCSR 1
#else
#define TESSERA_CPU_RELAX() ((void)0)
#endif

namespace tessera {

#ifdef TESSERA_HAS_MXCSR
uint32_t fp_control() { return _mm_getcsr(); }
void set_fp_control(uint32_t control) { _mm_setcsr(control); }
// MXCSR bit 15: flush to zero (subnormal results become 0); bit 6: denormals are zero (subnormal
// inputs read as 0).
constexpr uint32_t kFlushDenormals = (1u << 15) | (1u << 6);
#else
uint32_t fp_control() { return 0; }
void set_fp_control(uint32_t) {}
constexpr uint32_t kFlushDenormals = 0;
#endif

ScopedFlushDenormals::ScopedFlushDenormals() : saved_(fp_control()) {
  if ((saved_ | kFlushDenormals) != saved_) set_fp_control(saved_ | kFlushDenormals);
}
ScopedFlushDenormals::~ScopedFlushDenormals() {
  if (fp_control() != saved_) set_fp_control(saved_);
}

namespace {
// Spin iterations before blocking (a pause is tens of cycles: about 50 us in all).
constexpr int kSpinIterations = 2000;
// An owner takes 1 / kOwnerShare of what is left in its range at a time (at least `grain`): few
// claims, and what it has not taken yet stays there to be stolen.
constexpr int64_t kOwnerShare = 8;

uint64_t pack(int64_t begin, int64_t end) { return static_cast<uint64_t>(begin) << 32 | static_cast<uint64_t>(end); }
int64_t range_begin(uint64_t r) { return static_cast<int64_t>(r >> 32); }
int64_t range_end(uint64_t r) { return static_cast<int64_t>(r & 0xffffffffu); }
}  // namespace

ThreadPool::ThreadPool(int num_threads) : num_threads_(std::max(1, num_threads)), ranges_(num_threads_) {
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  {
    std::lock_guard<std::mutex> lock(mu_);  // a worker between its checks and its wait holds mu_
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop(int index) {
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
    if (fp_control() != job_fp_control_) set_fp_control(job_fp_control_);
    run_ranges(index);
    if (pending_.fetch_sub(1) == 1 && caller_sleeping_.load()) {
      std::lock_guard<std::mutex> lock(mu_);  // the caller checks pending_ under the lock
      done_cv_.notify_one();
    }
  }
}

// Each thread streams through one contiguous range (kernels that read memory in order keep one
// stream per thread, the hardware prefetchers trained once), and one that runs out takes the back
// half of the fullest other range, so all finish within about `grain` items of each other even
// when one got less CPU. (Chunks taken in turn from one shared counter, each a share of what was
// left, started a new stream per chunk and ended every loop with grain-sized ones: decode's weight
// streams ran several percent slower.)
void ThreadPool::run_ranges(int index) {
  // Ranges count grains (units of `grain` items, the last one maybe shorter), so every chunk but
  // the one that ends the loop holds at least `grain` items.
  const std::function<void(int64_t, int64_t)>& fn = *job_;
  const int64_t grain = job_grain_, n = job_n_;
  std::atomic<uint64_t>& own = ranges_[index].bounds;
  for (;;) {
    uint64_t r = own.load(std::memory_order_relaxed);
    int64_t begin = range_begin(r), end = range_end(r);
    if (begin < end) {
      const int64_t size = std::max<int64_t>(1, (end - begin) / kOwnerShare);
      if (own.compare_exchange_weak(r, pack(begin + size, end), std::memory_order_relaxed)) {
        fn(begin * grain, std::min(n, (begin + size) * grain));
      }
      continue;
    }
    // Nothing left here: steal from the range with the most left its back half, or its one grain
    // (its owner may be descheduled).
    int victim = -1;
    int64_t most = 0;
    for (int t = 0; t < num_threads_; ++t) {
      const uint64_t v = ranges_[t].bounds.load(std::memory_order_relaxed);
      if (range_end(v) - range_begin(v) > most) most = range_end(v) - range_begin(v), victim = t;
    }
    if (victim < 0) return;
    uint64_t v = ranges_[victim].bounds.load(std::memory_order_relaxed);
    const int64_t vb = range_begin(v), ve = range_end(v);
    if (vb >= ve) continue;
    const int64_t mid = ve - (ve - vb + 1) / 2;
    if (!ranges_[victim].bounds.compare_exchange_weak(v, pack(vb, mid), std::memory_order_relaxed)) continue;
    own.store(pack(mid, ve), std::memory_order_relaxed);  // own is empty: nobody else writes it
  }
}

void ThreadPool::run_region_thread(void* pool, int index) {
  auto* self = static_cast<ThreadPool*>(pool);
  if (index < 0 || index >= self->num_threads_) return;  // ranges exist for num_threads_ only
  const uint32_t saved = fp_control();
  if (saved != self->job_fp_control_) set_fp_control(self->job_fp_control_);
  self->run_ranges(index);
  if (fp_control() != saved) set_fp_control(saved);
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t grains = (n + grain - 1) / grain;
  if (grains > int64_t{0x7fffffff}) {
    // Ranges hold 32-bit bounds: coarser grains.
    parallel_for(n, (n + 0x7ffffffe) / 0x7fffffff, fn);
    return;
  }
  if (num_threads_ == 1 || grains == 1 || busy_.exchange(true, std::memory_order_acquire)) {
    fn(0, n);
    return;
  }
  job_grain_ = grain;
  job_n_ = n;
  job_ = &fn;
  job_fp_control_ = fp_control();
  for (int t = 0; t < num_threads_; ++t) {
    ranges_[t].bounds.store(pack(grains * t / num_threads_, grains * (t + 1) / num_threads_), std::memory_order_relaxed);
  }
  if (runner_) {
    runner_(num_threads_, this, &ThreadPool::run_region_thread);
    busy_.store(false, std::memory_order_release);
    return;
  }
  pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  generation_.fetch_add(1);  // publishes the job (sequentially consistent: see sleeping_workers_)
  if (sleeping_workers_.load() > 0) {
    { std::lock_guard<std::mutex> lock(mu_); }
    work_cv_.notify_all();
  }
  run_ranges(0);
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
