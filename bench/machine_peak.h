// This machine's peaks, measured at start so benchmark numbers can be read as a fraction of them:
// fp32 FMA throughput (register-resident, widest ISA the CPU has) and streaming memory bandwidth
// (buffers far larger than the caches).
#pragma once

#include <memory>
#include <string>

namespace tessera::bench {

struct MachinePeak {
  std::string isa;           // the FMA loop that ran: "avx512f", "avx2+fma" or "scalar"
  int threads = 1;           // threads of the *_nt numbers
  double fma_gflops_1t = 0;  // fp32 FMA GFLOP/s on one thread
  double fma_gflops_nt = 0;  // same, `threads` threads in parallel
  double triad_gbps = 0;     // a[i] = b[i] + s*c[i], bytes read + written, `threads` threads
  double copy_gbps = 0;      // a[i] = b[i], bytes read + written, `threads` threads
  double stream_mib = 0;     // size of each streaming buffer
};

// Runs the FMA loops (best of several 0.03 s runs) and the streaming loops (best of several
// passes) over three buffers of `stream_mib` MiB each. About 2 s; under 1 s when quick.
MachinePeak measure_machine_peak(int threads, bool quick, double stream_mib = 256);

// One stream-triad pass at a time over its own three buffers of `stream_mib` MiB: a benchmark of
// a bandwidth-bound kernel alternates its runs with passes of this, so each run's GB/s has the
// machine's bandwidth measured at the same moment beside it (the machine is shared: the bandwidth
// left to us moves by tens of percent within seconds).
class TriadProbe {
 public:
  TriadProbe(int threads, double stream_mib);
  ~TriadProbe();
  TriadProbe(const TriadProbe&) = delete;
  TriadProbe& operator=(const TriadProbe&) = delete;
  double gbps();  // one pass, bytes read + written per second (as MachinePeak::triad_gbps)

 private:
  struct Buffers;
  int threads_;
  std::unique_ptr<Buffers> buffers_;
};

}  // namespace tessera::bench
