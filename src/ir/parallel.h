// One thread pool for kernels: parallel_for over an index range, blocking until done.
//
// Idle workers spin for a short while (~50 us) before they sleep, and so does the caller while
// it waits for them: a decode step runs hundreds of short parallel loops back to back, and a
// futex wake-up per loop would cost as much as the loop.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tessera {

// The calling thread's floating-point control word (x86: MXCSR; 0 elsewhere). A pool's workers run
// each job in the mode of the thread that started it.
uint32_t fp_control();
void set_fp_control(uint32_t control);

// Flush-to-zero and denormals-are-zero on the calling thread while it lives, the previous mode
// restored after. Subnormal floats (below 1.2e-38) take a slow path through the FPU on many CPUs,
// a hundred cycles and more per operation: a model with a few tiny weights ran its 1x1
// convolutions 15 times slower. Kernels that set this compute such values as zero.
class ScopedFlushDenormals {
 public:
  ScopedFlushDenormals();
  ~ScopedFlushDenormals();
  ScopedFlushDenormals(const ScopedFlushDenormals&) = delete;
  ScopedFlushDenormals& operator=(const ScopedFlushDenormals&) = delete;

 private:
  uint32_t saved_;
};

// Runs body(ctx, t) for t in [0, num_threads) on that many threads at once (the caller is one
// of them) and returns when all are done: another library's threads (OpenMP's), for
// ThreadPool::set_region_runner.
using RegionRunner = void (*)(int num_threads, void* ctx, void (*body)(void* ctx, int thread));

class ThreadPool {
 public:
  // num_threads counts the calling thread: 1 means no worker threads.
  explicit ThreadPool(int num_threads = 1);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }
  // Calls fn(begin, end) on disjoint chunks covering [0, n): each thread walks its own contiguous
  // share front to back, and one that is done steals the back half of another's rest (at least
  // `grain` items), so the threads finish within about a grain of each other.
  // Runs inline when n is small or the pool has one thread. Not reentrant: a kernel running on
  // the pool must not call parallel_for again (nested calls run inline).
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

  // With a runner, parallel_for runs its threads' shares on the runner's threads instead of this
  // pool's workers (which then sleep): a plan that mixes oneDNN (OpenMP) kernels with tessera's
  // runs all of them on OpenMP's workers, instead of two sets of spinning workers taking cores
  // from each other at every hand-over. nullptr returns to the pool's own workers.
  void set_region_runner(RegionRunner runner) { runner_ = runner; }
  RegionRunner region_runner() const { return runner_; }

 private:
  void worker_loop(int index);
  // Thread `index`'s part of the current job: its own range front to back, then pieces stolen
  // from the back of the others'.
  void run_ranges(int index);
  // A runner thread's part: run_ranges in the caller's floating-point mode, its own restored after.
  static void run_region_thread(void* pool, int index);

  int num_threads_;
  std::vector<std::thread> workers_;
  // A job is published by writing job_* and then bumping generation_ (release); workers that
  // see the new generation (acquire) read job_* without a lock. The mutex and condition
  // variables are only for threads that stopped spinning: sleeping_workers_ / caller_sleeping_
  // say whether a notify is needed (both sides use sequentially consistent atomics, so a sleeper
  // either sees the change or is seen, never neither).
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  // The caller's line (the job and its generation: one transfer to a spinning worker), then one
  // line for what workers write (pending_), and one per thread's range.
  alignas(64) std::atomic<int64_t> generation_{0};
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_grain_ = 0, job_n_ = 0;
  uint32_t job_fp_control_ = 0;  // the caller's floating-point mode, which workers take on
  alignas(64) std::atomic<int> pending_{0};         // workers not yet done with the current job
  // Thread t's items not yet taken, [begin, end) packed as begin << 32 | end: the owner takes from
  // the front, a thread with nothing left steals the back half.
  struct alignas(64) Range {
    std::atomic<uint64_t> bounds{0};
  };
  std::vector<Range> ranges_;
  alignas(64) std::atomic<int> sleeping_workers_{0};
  std::atomic<bool> caller_sleeping_{false};
  std::atomic<bool> stop_{false};
  std::atomic<bool> busy_{false};          // a parallel_for is running (others run inline)
  RegionRunner runner_ = nullptr;
};

}  // namespace tessera
