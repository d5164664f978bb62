#include "backends/native/isa.h"

#include <cstdlib>
#include <cstring>

namespace tessera::native {

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
  }
  return "?";
}

bool cpu_supports(Isa isa) {
#if defined(__x86_64__) || defined(__i386__)
  switch (isa) {
    case Isa::kScalar: return true;
    case Isa::kAvx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case Isa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
             cpu_supports(Isa::kAvx2);
  }
  return false;
#else
  return isa == Isa::kScalar;
#endif
}

Isa best_isa() {
  static const Isa best = [] {
    Isa cap = Isa::kAvx512;
    if (const char* env = std::getenv("TESSERA_NATIVE_ISA")) {
      if (std::strcmp(env, "avx2") == 0) cap = Isa::kAvx2;
      if (std::strcmp(env, "scalar") == 0) cap = Isa::kScalar;
    }
    for (Isa isa : {Isa::kAvx512, Isa::kAvx2}) {
      if (static_cast<int>(isa) <= static_cast<int>(cap) && cpu_supports(isa)) return isa;
    }
    return Isa::kScalar;
  }();
  return best;
}

const IsaKernels& isa_kernels(Isa isa) {
  if (!cpu_supports(isa)) return scalar_kernels();
  switch (isa) {
    case Isa::kAvx512: return avx512_kernels();
    case Isa::kAvx2: return avx2_kernels();
    case Isa::kScalar: break;
  }
  return scalar_kernels();
}

}  // namespace tessera::native
