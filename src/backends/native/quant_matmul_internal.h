// Internal to quant_matmul*.cc: the problem description every ISA's kernels receive and their
// table. Nothing here is compiled for an ISA (no inline code), so it is safe to share.
#pragma once

#include <cstdint>

#include "backends/quant_formats.h"

namespace tessera::native::qmm {

// Activations quantized to 32-blocks: row t holds k int8 at xq + t * ldxq and k / 32 fp32 scales
// at xd + t * ldxd; x[i] ~= xd[i / 32] * xq[i]. Produced by Kernels::quantize_rows, identically
// (bit for bit) on every ISA: d = amax / 127, q = nearest-even(x * (1 / d)).
constexpr int kActBlock = 32;

struct Problem {
  quant::QType type;
  int64_t n, k, rows;
  const uint8_t* w;     // row j at w + j * w_row_bytes
  int64_t w_row_bytes;
  const float* x;       // float activations (float and K-quant weights)
  int64_t ldx;
  const int8_t* xq;     // quantized activations (Q8_0 / Q4_0 weights)
  int64_t ldxq;
  const float* xd;
  int64_t ldxd;
  // The quantized activations regrouped for the weight layout by Kernels::regroup_rows (row t at
  // xr + t * ldxr), or null where the kernels read xq / xd as they are.
  const uint8_t* xr;
  int64_t ldxr;
  // Grouped (Q4_0R / Q8_0R) and panel (Q4_0C / Q8_0C) tiles only: the 128-value groups (panels:
  // 32-value blocks) [g_begin, g_end) of k this pass sums (g_end <= 0: all), added to y when
  // accumulate (a later pass: no bias or residual again).
  int64_t g_begin, g_end;
  bool accumulate;
  float* y;
  int64_t ldy;
  const float* bias;
  const float* residual;
  int64_t ld_residual;
};

// Runs run(q) for each segment of k (quant::panel_segment_blocks) with q = p over that segment's
// blocks [g_begin, g_end), each after the first added to y (accumulate).
template <class Run>
void for_each_panel_segment(const Problem& p, Run run) {
  const int64_t blocks = p.k / quant::kQK4_0, per_segment = quant::panel_segment_blocks(blocks);
  Problem q = p;
  for (int64_t first = 0; first < blocks; first += per_segment) {
    q.g_begin = first;
    q.g_end = blocks - first > per_segment ? first + per_segment : blocks;
    q.accumulate = first > 0;
    run(q);
  }
}

struct Kernels {
  // Quantizes rows [r0, r1) of x (k a multiple of 32) into xq / xd with the layout above.
  void (*quantize_rows)(const float* x, int64_t ldx, int64_t r0, int64_t r1, int64_t k, int8_t* xq,
                        int64_t ldxq, float* xd, int64_t ldxd);
  // Computes y for all rows and output features [j0, j1).
  void (*block)(const Problem& p, int64_t j0, int64_t j1);
  // Optional (null: never): the bytes per row of regrouped activations block() wants for this
  // problem's weight type and row count (0: none), and the regrouping of rows [r0, r1) of
  // p.xq / p.xd into xr. Done once per call, before block() runs on any thread.
  int64_t (*regrouped_row_bytes)(const Problem& p);
  void (*regroup_rows)(const Problem& p, int64_t r0, int64_t r1, uint8_t* xr, int64_t ldxr);
};

const Kernels& scalar_qmm_kernels();
const Kernels& avx2_qmm_kernels();    // only where the CPU has AVX2, FMA and F16C
const Kernels& avx512_qmm_kernels();  // only where it has AVX-512 F/DQ/BW/VL and VNNI

inline bool uses_quantized_activations(quant::QType t) {
  return t == quant::QType::kQ8_0 || t == quant::QType::kQ4_0 || t == quant::QType::kQ4_0R ||
         t == quant::QType::kQ8_0R || quant::is_panel_type(t);
}
// Rows [j0, j1) of a Q4_0, Q4_0R, Q8_0R or panel-type weight as Q8_0 rows (Q4: the quants minus 8 as int8;
// the same scales) at dst, one after another: the many-row paths then run the Q8_0 tiles, whose
// inner loop unpacks no nibbles. Returns the Q8_0 row size in bytes.
int64_t unpack_rows_to_q8_0(const Problem& p, int64_t j0, int64_t j1, uint8_t* dst);

inline bool is_kquant(quant::QType t) {
  return t == quant::QType::kQ4_K || t == quant::QType::kQ6_K;
}

}  // namespace tessera::native::qmm
