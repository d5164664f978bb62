// Matrix products with quantized and half-precision weights (ggml / GGUF block layouts), the
// kernels of LLM decode (one activation row: weight-bandwidth bound) and prefill (many rows:
// register-tiled so each weight block loaded serves several activation rows).
//
// Q8_0 / Q4_0 weights: the activation rows are quantized once per call to 32-blocks (int8 + fp32
// scale, as llama.cpp's Q8_0 activations but with an fp32 scale) and multiplied with integer dot
// products (AVX-512 VNNI vpdpbusd, AVX2 vpmaddubsw). F32 / F16 / BF16: fp32 FMA on the converted
// weights. Q4_K / Q6_K: correct, via per-panel dequantization to fp32 (slower).
#pragma once

#include <cstdint>

#include "backends/native/isa.h"
#include "backends/quant_formats.h"
#include "ir/parallel.h"

namespace tessera::native {

// A weight matrix W [n, k] stored as n rows of quant::row_bytes(type, k) bytes (GGUF's layout:
// row r is output feature r, k is the reduction dim).
struct QuantWeight {
  quant::QType type = quant::QType::kF32;
  int64_t n = 0, k = 0;
  const uint8_t* data = nullptr;
};

// y[t * ldy + j] = sum_i x[t * ldx + i] * W[j, i]  (+ bias[j] if bias)
//                  (+ residual[t * ld_residual + j] if residual), for t < rows, j < n.
// k must be a multiple of the type's block size. residual may equal y (same ld). Buffers for the
// quantized activations are thread-local and reused across calls. pool may be null (one thread).
void quant_matmul(const QuantWeight& w, const float* x, int64_t rows, int64_t ldx, float* y,
                  int64_t ldy, const float* bias, const float* residual, int64_t ld_residual,
                  ThreadPool* pool);

// The same on the kernels of one ISA (tests, comparisons); an ISA this CPU cannot run falls back to
// the best one it can (see quant_matmul_isa_runs).
void quant_matmul_for_isa(Isa isa, const QuantWeight& w, const float* x, int64_t rows,
                          int64_t ldx, float* y, int64_t ldy, const float* bias,
                          const float* residual, int64_t ld_residual, ThreadPool* pool);

// Whether quant_matmul_for_isa(isa, ...) really runs that ISA's kernels on this CPU (AVX-512
// here needs VNNI as well as F/DQ/BW/VL; AVX2 needs FMA and F16C).
bool quant_matmul_isa_runs(Isa isa);

// Which path quant_matmul uses on this CPU for `type`: "avx512-vnni", "avx2" or "scalar".
const char* quant_matmul_path(quant::QType type);

}  // namespace tessera::native
