#include "machine_peak.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <functional>

#include "runtime/fma_peak.h"

namespace tessera::bench {
namespace {

struct AlignedFloats {
  explicit AlignedFloats(size_t n)
      : n(n), p(static_cast<float*>(std::aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64))) {}
  ~AlignedFloats() { std::free(p); }
  AlignedFloats(const AlignedFloats&) = delete;
  AlignedFloats& operator=(const AlignedFloats&) = delete;
  size_t n;
  float* p;
};

// Best GB/s over `reps` passes of kernel(begin, end), split evenly over the threads.
double stream_gbps(int threads, size_t n, double bytes_per_elem, int reps,
                   const std::function<void(size_t, size_t)>& kernel) {
  double best = 0;
  for (int rep = 0; rep < reps; ++rep) {
    double s =
        run_on_threads(threads, [&](int t) { kernel(n * t / threads, n * (t + 1) / threads); });
    best = std::max(best, bytes_per_elem * static_cast<double>(n) / s * 1e-9);
  }
  return best;
}

// Three buffers of n floats, first touched by the threads that stream them (pages land near them
// on NUMA machines).
struct StreamBuffers {
  StreamBuffers(int threads, size_t n) : a(n), b(n), c(n) {
    run_on_threads(threads, [&](int t) {
      for (size_t i = n * t / threads; i < n * (t + 1) / threads; ++i) {
        a.p[i] = 0.0f;
        b.p[i] = 1.0f;
        c.p[i] = 2.0f;
      }
    });
  }
  AlignedFloats a, b, c;
};

double triad_pass_gbps(int threads, StreamBuffers& s, int reps) {
  const float k = 0.5f;
  float* __restrict pa = s.a.p;
  const float* __restrict pb = s.b.p;
  const float* __restrict pc = s.c.p;
  return stream_gbps(threads, s.a.n, 3 * sizeof(float), reps, [&](size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; ++i) pa[i] = pb[i] + k * pc[i];
  });
}

size_t stream_floats(double stream_mib) { return static_cast<size_t>(stream_mib * 1024 * 1024 / sizeof(float)); }

}  // namespace

MachinePeak measure_machine_peak(int threads, bool quick, double stream_mib) {
  MachinePeak peak;
  threads = std::max(1, threads);
  peak.threads = threads;
  peak.stream_mib = stream_mib;
  const int reps = quick ? 4 : 10;
  const FmaPeak fma = measure_fma_peak(threads, reps);
  peak.isa = fma.isa;
  peak.fma_gflops_1t = fma.gflops_1t;
  peak.fma_gflops_nt = fma.gflops_nt;

  StreamBuffers s(threads, stream_floats(stream_mib));
  float* __restrict pa = s.a.p;
  const float* __restrict pb = s.b.p;
  peak.copy_gbps = stream_gbps(threads, s.a.n, 2 * sizeof(float), reps, [&](size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; ++i) pa[i] = pb[i];
  });
  peak.triad_gbps = triad_pass_gbps(threads, s, reps);
  return peak;
}

struct TriadProbe::Buffers : StreamBuffers {
  using StreamBuffers::StreamBuffers;
};

TriadProbe::TriadProbe(int threads, double stream_mib)
    : threads_(std::max(1, threads)),
      buffers_(std::make_unique<Buffers>(threads_, stream_floats(stream_mib))) {}
TriadProbe::~TriadProbe() = default;
double TriadProbe::gbps() { return triad_pass_gbps(threads_, *buffers_, 1); }

}  // namespace tessera::bench
