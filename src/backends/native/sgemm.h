// Blocked single-precision GEMM on the ISA's register-blocked micro-kernel (Goto / BLIS loop
// nest): C (+)= alpha * A * B for a batch of problems of one shape.
//
// B is packed into panels of nr columns ([k][nr] per panel, zero padded), once per constant
// weight at compile time or per run for activations; A is packed per (mc x kc) block into
// panels of mr rows. Threads split the batch, or one problem's C into a grid of slabs, so small
// and skinny products (1 x 4096 x 4096, 64 x 768 x 768) use every thread too.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "backends/native/isa.h"
#include "backends/native/kernel_io.h"

namespace tessera::native {

// The width of the panels sgemm_batched reads a packed B of n columns in (GemmShape::b_packed):
// IsaKernels::gemm_narrow_nr when the narrow register block holds all n, else gemm_nr.
int gemm_panel_width(const IsaKernels& isa, int64_t n);
// Floats of a packed k x n B for panels of nr columns.
int64_t packed_b_floats(int64_t k, int64_t n, int nr);
// Packs B (element (kk, j) at b[kk * rs + j * cs]) into panels of nr columns.
void pack_b(const float* b, int64_t rs, int64_t cs, int64_t k, int64_t n, int nr, float* dst);

struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  int64_t a_rs = 0, a_cs = 1;  // A(i, kk) = a[i * a_rs + kk * a_cs]
  int64_t b_rs = 0, b_cs = 1;  // raw B(kk, j) = b[kk * b_rs + j * b_cs], when not packed
  int64_t ldc = 0;             // C(i, j) = c[i * ldc + j]
  bool b_packed = false;       // GemmOperands::b points at pack_b panels
  bool a_in_place = false;     // A's rows are read where they are (a_cs == 1, alpha == 1), not packed
  float alpha = 1.0f;
};

struct GemmOperands {
  const float* a;
  const float* b;
  float* c;
};

// Called per finished (or about to start) block of C: batch, rows [m0, m1), cols [n0, n1), and
// `scratch_floats` of the calling thread's scratch.
using GemmBlockFn = std::function<void(int64_t batch, int64_t m0, int64_t m1, int64_t n0,
                                       int64_t n1, float* scratch)>;
struct GemmHooks {
  // C(i, j) of every problem starts from column_bias[j], or row_bias[i] (a bias in the
  // micro-kernel's accumulators: no pass over C), or what `init` fills in; else from zero. At most
  // one of the three; the biases need k > 0 (with k == 0 no block is computed).
  const float* column_bias = nullptr;
  const float* row_bias = nullptr;
  GemmBlockFn init;    // fills C's block before accumulation (a bias); unset: C is overwritten
  GemmBlockFn finish;  // runs on a block once it is complete (an elementwise tail)
  int64_t scratch_floats = 0;
};

void sgemm_batched(const IsaKernels& isa, const GemmShape& shape,
                   const std::vector<GemmOperands>& problems, const GemmHooks& hooks,
                   ThreadPool* pool);

}  // namespace tessera::native
