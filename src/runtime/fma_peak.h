// This machine's fp32 FMA throughput, measured: a loop of independent register-resident FMAs in
// the widest vector ISA the CPU has, on one thread and on N at once. No kernel can multiply-add
// faster, so a model's Conv / MatMul work (ir/node_flops.h) divided by it is a floor on its
// latency at this precision.
#pragma once

#include <functional>
#include <string>

namespace tessera {

struct FmaPeak {
  std::string isa;     // the loop that ran: "avx512f", "avx2+fma" or "scalar"
  int threads = 1;     // threads of gflops_nt
  double gflops_1t = 0;  // fp32 GFLOP/s on one thread (a multiply-add counts two)
  double gflops_nt = 0;  // the same, `threads` threads in parallel (never below gflops_1t)
};

// The best of `reps` runs of about `run_seconds` each, on one thread and then on `threads`:
// the best of several short runs is robust to other processes taking the CPU now and then.
// About 2 * reps * run_seconds (0.25 s with the defaults).
FmaPeak measure_fma_peak(int threads, int reps = 4, double run_seconds = 0.03);

// Runs body(t) for t in [0, threads) on that many threads at once (the caller's is one of them),
// started together, and returns the wall seconds from the common start to the last finish.
double run_on_threads(int threads, const std::function<void(int)>& body);

}  // namespace tessera
