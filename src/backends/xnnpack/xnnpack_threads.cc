// pthreadpool on tessera's threads: the pthreadpool functions XNNPACK calls, defined here so that
// they take the place of libpthreadpool's (the executable's definitions come first in the dynamic
// linker's lookup). XNNPACK's kernels then run on the session's ThreadPool like every other
// tessera-thread backend's, instead of on a second set of workers: those spun or slept on their
// own schedule between XNNPACK's kernels and took the cores from the native kernels around them
// (det, XNNPACK mixed with native: native convolutions 2-3 times slower in the plan than alone,
// the plan 48 ms where its parts added up to 26 ms).
//
// A pool made by pthreadpool_create() holds no threads: XnnpackKernel binds it to the session's
// ThreadPool for each run (bind_thread_pool) and XNNPACK's parallel loops become parallel_for
// over their tiles. Unbound, or with one thread, loops run on the caller. Flags (yield, uarch)
// mean nothing here and are ignored.
#include <dlfcn.h>
#include <pthreadpool.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "backends/xnnpack/xnnpack_threads.h"

struct pthreadpool {
  size_t threads = 1;                   // what XNNPACK plans its tiling for
  tessera::ThreadPool* pool = nullptr;  // where its loops run now (nullptr: the caller alone)
};

namespace tessera::xnnpack {

void bind_thread_pool(pthreadpool_t p, ThreadPool* pool) {
  if (p) p->pool = pool;
}

bool xnnpack_uses_tessera_threads() {
  // What the dynamic linker binds XNNPACK's references to: the first definition in load order.
  void* bound = dlsym(RTLD_DEFAULT, "pthreadpool_parallelize_2d_tile_2d");
  void (*mine)(pthreadpool_t, pthreadpool_task_2d_tile_2d_t, void*, size_t, size_t, size_t, size_t, uint32_t) =
      &pthreadpool_parallelize_2d_tile_2d;
  return bound == reinterpret_cast<void*>(mine);
}

namespace {

// Calls task(start, size) for every tile of a D-dimensional range: dims before the last `tiled`
// ones step by 1 (size 1), the tiled ones by tile[d] (the last tile of a dim may be shorter).
// Tiles are numbered in row-major order and handed to the pool in contiguous chunks.
template <int D, typename Task>
void for_each_tile(pthreadpool_t p, const size_t (&range)[D], const size_t (&tile)[D], const Task& task) {
  size_t count[D];
  int64_t total = 1;
  for (int d = 0; d < D; ++d) {
    if (range[d] == 0) return;
    count[d] = (range[d] + tile[d] - 1) / tile[d];
    total *= static_cast<int64_t>(count[d]);
  }
  auto run = [&](int64_t begin, int64_t end) {
    size_t start[D], size[D];
    for (int64_t t = begin; t < end; ++t) {
      size_t rest = static_cast<size_t>(t);
      for (int d = D - 1; d >= 0; --d) {
        const size_t i = rest % count[d];
        rest /= count[d];
        start[d] = i * tile[d];
        size[d] = std::min(tile[d], range[d] - start[d]);
      }
      task(start, size);
    }
  };
  if (p && p->pool && p->pool->num_threads() > 1) {
    p->pool->parallel_for(total, 1, run);
  } else {
    run(0, total);
  }
}

}  // namespace
}  // namespace tessera::xnnpack

using tessera::xnnpack::for_each_tile;

extern "C" {

pthreadpool_t pthreadpool_create(size_t threads_count) {
  auto* p = new pthreadpool();
  p->threads = std::max<size_t>(1, threads_count);
  return p;
}

void pthreadpool_destroy(pthreadpool_t p) { delete p; }

size_t pthreadpool_get_threads_count(pthreadpool_t p) { return p ? p->threads : 1; }

void pthreadpool_parallelize_1d(pthreadpool_t p, pthreadpool_task_1d_t task, void* ctx, size_t r0, uint32_t) {
  for_each_tile<1>(p, {r0}, {1}, [&](const size_t* s, const size_t*) { task(ctx, s[0]); });
}

void pthreadpool_parallelize_1d_tile_1d(pthreadpool_t p, pthreadpool_task_1d_tile_1d_t task, void* ctx, size_t r0,
                                        size_t t0, uint32_t) {
  for_each_tile<1>(p, {r0}, {t0}, [&](const size_t* s, const size_t* n) { task(ctx, s[0], n[0]); });
}

void pthreadpool_parallelize_2d(pthreadpool_t p, pthreadpool_task_2d_t task, void* ctx, size_t r0, size_t r1,
                                uint32_t) {
  for_each_tile<2>(p, {r0, r1}, {1, 1}, [&](const size_t* s, const size_t*) { task(ctx, s[0], s[1]); });
}

void pthreadpool_parallelize_2d_tile_1d(pthreadpool_t p, pthreadpool_task_2d_tile_1d_t task, void* ctx, size_t r0,
                                        size_t r1, size_t t1, uint32_t) {
  for_each_tile<2>(p, {r0, r1}, {1, t1}, [&](const size_t* s, const size_t* n) { task(ctx, s[0], s[1], n[1]); });
}

void pthreadpool_parallelize_2d_tile_2d(pthreadpool_t p, pthreadpool_task_2d_tile_2d_t task, void* ctx, size_t r0,
                                        size_t r1, size_t t0, size_t t1, uint32_t) {
  for_each_tile<2>(p, {r0, r1}, {t0, t1},
                   [&](const size_t* s, const size_t* n) { task(ctx, s[0], s[1], n[0], n[1]); });
}

void pthreadpool_parallelize_3d(pthreadpool_t p, pthreadpool_task_3d_t task, void* ctx, size_t r0, size_t r1,
                                size_t r2, uint32_t) {
  for_each_tile<3>(p, {r0, r1, r2}, {1, 1, 1}, [&](const size_t* s, const size_t*) { task(ctx, s[0], s[1], s[2]); });
}

void pthreadpool_parallelize_3d_tile_2d(pthreadpool_t p, pthreadpool_task_3d_tile_2d_t task, void* ctx, size_t r0,
                                        size_t r1, size_t r2, size_t t1, size_t t2, uint32_t) {
  for_each_tile<3>(p, {r0, r1, r2}, {1, t1, t2},
                   [&](const size_t* s, const size_t* n) { task(ctx, s[0], s[1], s[2], n[1], n[2]); });
}

void pthreadpool_parallelize_4d(pthreadpool_t p, pthreadpool_task_4d_t task, void* ctx, size_t r0, size_t r1,
                                size_t r2, size_t r3, uint32_t) {
  for_each_tile<4>(p, {r0, r1, r2, r3}, {1, 1, 1, 1},
                   [&](const size_t* s, const size_t*) { task(ctx, s[0], s[1], s[2], s[3]); });
}

void pthreadpool_parallelize_4d_tile_2d(pthreadpool_t p, pthreadpool_task_4d_tile_2d_t task, void* ctx, size_t r0,
                                        size_t r1, size_t r2, size_t r3, size_t t2, size_t t3, uint32_t) {
  for_each_tile<4>(p, {r0, r1, r2, r3}, {1, 1, t2, t3},
                   [&](const size_t* s, const size_t* n) { task(ctx, s[0], s[1], s[2], s[3], n[2], n[3]); });
}

void pthreadpool_parallelize_5d(pthreadpool_t p, pthreadpool_task_5d_t task, void* ctx, size_t r0, size_t r1,
                                size_t r2, size_t r3, size_t r4, uint32_t) {
  for_each_tile<5>(p, {r0, r1, r2, r3, r4}, {1, 1, 1, 1, 1},
                   [&](const size_t* s, const size_t*) { task(ctx, s[0], s[1], s[2], s[3], s[4]); });
}

void pthreadpool_parallelize_5d_tile_2d(pthreadpool_t p, pthreadpool_task_5d_tile_2d_t task, void* ctx, size_t r0,
                                        size_t r1, size_t r2, size_t r3, size_t r4, size_t t3, size_t t4, uint32_t) {
  for_each_tile<5>(p, {r0, r1, r2, r3, r4}, {1, 1, 1, t3, t4}, [&](const size_t* s, const size_t* n) {
    task(ctx, s[0], s[1], s[2], s[3], s[4], n[3], n[4]);
  });
}

void pthreadpool_parallelize_6d_tile_2d(pthreadpool_t p, pthreadpool_task_6d_tile_2d_t task, void* ctx, size_t r0,
                                        size_t r1, size_t r2, size_t r3, size_t r4, size_t r5, size_t t4, size_t t5,
                                        uint32_t) {
  for_each_tile<6>(p, {r0, r1, r2, r3, r4, r5}, {1, 1, 1, 1, t4, t5}, [&](const size_t* s, const size_t* n) {
    task(ctx, s[0], s[1], s[2], s[3], s[4], s[5], n[4], n[5]);
  });
}

}  // extern "C"
