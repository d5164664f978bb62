// The native backend's instruction sets and the table of kernels compiled for each.
//
// Every kernel that uses vector instructions exists once per ISA: isa_avx512.cc and isa_avx2.cc
// compile the shared templates (simd_*.h) under `#pragma GCC target`, isa_scalar.cc for plain
// C++. The build needs no global -march; best_isa() picks at run time what the CPU supports.
// Nothing here depends on an ISA, so generic code (planning, threading) includes only this.
#pragma once

#include <cstdint>

#include "backends/native/eltwise_program.h"

namespace tessera::native {

enum class Isa { kScalar, kAvx2, kAvx512 };
const char* isa_name(Isa isa);
// Whether this CPU runs `isa` (AVX-512 needs F, DQ, BW and VL; AVX2 needs FMA too).
bool cpu_supports(Isa isa);
// The widest supported ISA; TESSERA_NATIVE_ISA=avx2|scalar caps it (for tests and comparisons).
Isa best_isa();

enum class ReduceKind { kSum, kMax };

// One standalone math function for accuracy tests: y[i] = f(x[i]).
enum class MathFn { kExp, kLog, kTanh, kSigmoid, kErf, kExpm1 };

// One output row of a direct convolution for a block of conv_oc_block output channels (see
// simd_conv.h). Input pixel p of tap t of channel c is in[c * channel_stride + tap_offsets[t] + p]
// (rows zero-padded and split by stride phase beforehand, so no tap needs a bounds check).
struct ConvRowArgs {
  const float* in;
  int64_t channels, channel_stride;
  const int64_t* tap_offsets;
  int64_t taps;
  const float* weights;  // [channels][taps][conv_oc_block]
  const float* bias;     // [conv_oc_block]: the accumulators' start
  float* out;            // output channel o, pixel p at out[o * out_stride + p]
  int64_t out_stride;
  int64_t oc_count;  // channels of the block stored (<= conv_oc_block)
  int64_t width;     // output pixels; loads may read up to width rounded up to 16 (+ the taps)
};

// One input row of a ConvTranspose whose kernel equals its stride (see simd_deconv.h): every
// column j = (oc, kh, kw) of every input pixel w < width, stored at
// out[column_offsets[j] + w * kw] (column_offsets[j] = oc * OH * OW + kh * OW + kw).
struct DeconvRowArgs {
  const float* in;  // input channel c, pixel w at in[c * channel_stride + w]; read up to width
  int64_t channels, channel_stride, width;
  const float* weights;  // [columns / deconv_col_block, rounded up][channels][deconv_col_block]
  const float* bias;     // [columns rounded up to deconv_col_block]: the accumulators' start
  int64_t columns;       // OC * KH * KW
  const int64_t* column_offsets;  // [columns]
  int64_t kw;
  bool clamp;  // y = min(max(y, lo), hi) before the store (a Relu or Clip after the ConvTranspose)
  float lo, hi;
  float* out;
};

// The input transform of one tile row of a Winograd F(2x2, 3x3) convolution (see
// simd_winograd.h): tile t of channel c reads rows row0 .. row0 + 3 of the channel's plane
// (zeros for rows outside [0, height)), columns col0 + 2t .. col0 + 2t + 3 (zeros outside
// [0, width)), and stores V[xi] of the tile to v[c * channel_stride + xi * xi_stride + t].
// Reads nothing outside the planes' rows.
struct WinogradInputArgs {
  const float* in;  // channel 0's plane; channel c's at in + c * plane_stride
  int64_t channels, plane_stride, height, width;
  int64_t row0, col0;  // may be negative (the top and left padding)
  int64_t tiles;
  float* v;
  int64_t channel_stride, xi_stride;
};

// One output row of a depthwise convolution (one input and one output channel, see
// simd_depthwise.h): y[o] = bias + sum over kernel rows r and columns k of
// weights[r * kw + k] * rows[r][o * stride + k * dilation], for o < width. rows[r] is the
// zero-padded input row of kernel row r (null: a row of zeros, skipped); it is read up to
// round_up((width - 1) * stride + 1, kDepthwiseBlock) + (kw - 1) * dilation floats.
constexpr int64_t kDepthwiseBlock = 64;
struct DepthwiseRowArgs {
  const float* const* rows;  // [kh]
  int64_t kh, kw, dilation;
  int64_t stride;  // 1 or 2
  const float* weights;
  float bias;
  float* out;
  int64_t width;
};

// Output pixels [ow0, ow1) of output row `oh` of a depthwise convolution over a channels-last
// image x [h][w][c] (simd_depthwise.h): out[ow - ow0][ch] = bias[ch] + sum over the taps inside
// the image of weights[(r * kw + k) * c + ch] * x[ih][iw][ch], ih = oh * sh - pad_top + r * dh,
// iw = ow * sw - pad_left + k * dw (the taps outside are the zero padding).
struct DepthwiseClArgs {
  const float* x;
  int64_t h, w, c;
  const float* weights;  // [kh][kw][c]
  const float* bias;     // [c]
  int64_t kh, kw, sh, sw, dh, dw, pad_top, pad_left;
  int64_t oh, ow0, ow1;
  float* out;  // [ow1 - ow0][c]
};

// What a GEMM micro-kernel's block of C starts from before the products are added: zero, C itself
// (a later k block), or a bias: bias[j] for column j of the block, or bias[i] for its row i.
// prefetch_b: when not 0, each k step also prefetches B's floats this far ahead (the same row of
// the next packed panel), so that a B read once per row block streams in behind the products: rec's
// head (40 x 120 by 120 x 6625, its 3.2 MB of weights cold in a whole-model run) took 0.45-0.47 ms
// in the plan without, 0.37-0.41 ms with (0.21 ms alone).
struct GemmStart {
  enum Kind { kZero, kC, kColumnBias, kRowBias } kind = kZero;
  const float* bias = nullptr;
  int64_t prefetch_b = 0;
};

// The kernels for one ISA. Pointers to plain functions, so the caller needs no vector types.
struct IsaKernels {
  Isa isa;
  int vector_width;  // floats per vector register

  // Runs a compiled elementwise program over flattened output elements [begin, end).
  // scratch: program.scratch_floats() floats, 64-byte aligned, private to the caller's thread.
  void (*eltwise)(const EltwiseProgram& program, const EltwiseBuffers& buffers, int64_t begin,
                  int64_t end, float* scratch);
  void (*math)(MathFn fn, const float* x, float* y, int64_t n);

  // y[r] = reduce(x[r * len .. r * len + len)) for r < rows.
  void (*reduce_rows)(ReduceKind kind, const float* x, int64_t rows, int64_t len, float* y);
  // y[i] = reduce over r < len of x[r * stride + i], for i < width.
  void (*reduce_columns)(ReduceKind kind, const float* x, int64_t len, int64_t stride,
                         int64_t width, float* y);
  // Softmax of one contiguous row of len floats.
  void (*softmax_row)(const float* x, int64_t len, float* y);
  // Softmax down columns: for i < width, over x[r * stride + i], r < len; scratch: 2 * width.
  void (*softmax_columns)(const float* x, int64_t len, int64_t stride, int64_t width, float* y,
                          float* scratch);
  // y = (x - mean) * inv_std * scale + bias over one row of n floats (bias may be null);
  // stores the row's mean and 1/sqrt(var + eps).
  void (*layer_norm_row)(const float* x, int64_t n, const float* scale, const float* bias,
                         float eps, float* y, float* mean, float* inv_std);

  // Language-model rows (simd_llm.h): attention scores of nq query heads against keys in K
  // blocks stored transposed, and the weighted sums of values in V blocks (see
  // attention_scores / attention_values there); y = x / rms(x) * w; y = silu(g) * u;
  // y = gelu(x) (tanh approximation).
  void (*attention_scores)(const float* q, int64_t ldq, int64_t nq, int64_t hd, const float* const* kt,
                           int64_t bs, int64_t len, float scale, float* scores, int64_t lds);
  void (*attention_values)(const float* w, int64_t lds, int64_t nq, int64_t len, const float* const* vb,
                           int64_t bs, int64_t hd, float* out, int64_t ldo);
  void (*rms_norm_row)(const float* x, const float* w, int64_t n, float eps, float* y);
  void (*silu_mul)(const float* g, const float* u, int64_t n, float* y);
  void (*gelu_tanh)(const float* x, int64_t n, float* y);

  // SGEMM micro-kernel geometry and kernels: C[m x n] (+)= Apanel * Bpanel, where Apanel holds kc
  // columns of gemm_mr rows ([k][mr]) and Bpanel kc rows of gemm_nr columns ([k][nr]), m <=
  // gemm_mr, n <= gemm_nr. gemm_micro[m - 1] is specialized for m rows.
  int gemm_mr, gemm_nr;
  using GemmMicroFn = void (*)(int64_t kc, const float* a, const float* b, float* c, int64_t ldc,
                               int n, GemmStart start);
  GemmMicroFn gemm_micro[16];
  // The same with A read in place: A(i, k) = a[i * lda + k] (no packing; rows of a channels-last
  // activation).
  using GemmMicroRowsFn = void (*)(int64_t kc, const float* a, int64_t lda, const float* b, float* c,
                                   int64_t ldc, int n, GemmStart start);
  GemmMicroRowsFn gemm_micro_rows[16];
  // A second, narrow register block for products of at most gemm_narrow_nr columns (one vector:
  // 1x1 convolutions with few output channels, channels-last), with up to gemm_narrow_mr rows:
  // the wide block would leave half its columns or more unused. gemm_narrow_nr == 0: none.
  int gemm_narrow_mr, gemm_narrow_nr;
  GemmMicroFn gemm_micro_narrow[32];
  GemmMicroRowsFn gemm_micro_rows_narrow[32];

  // Direct convolution: output channels per packed weight block, and one output row of a block.
  int conv_oc_block;
  void (*conv_row)(const ConvRowArgs& args);

  // ConvTranspose with kernel == stride: columns per packed weight block, and one input row.
  int deconv_col_block;
  void (*deconv_row)(const DeconvRowArgs& args);

  // Winograd F(2x2, 3x3) transforms of one tile row (simd_winograd.h): V = B^T d B of every
  // input channel (see WinogradInputArgs); Y = A^T M A + bias of one output channel from
  // m[xi * xi_stride + tile] to output pixels [0, width) of rows y0 and y1 (y1 null: the tile
  // row's second row is past the output).
  void (*winograd_input_tile_row)(const WinogradInputArgs& args);
  // One output row of a depthwise convolution (DepthwiseRowArgs).
  void (*depthwise_row)(const DepthwiseRowArgs& args);
  // Pixels of one output row of a channels-last depthwise convolution (DepthwiseClArgs).
  void (*depthwise_cl_row)(const DepthwiseClArgs& args);
  void (*winograd_output_tile_row)(const float* m, int64_t xi_stride, int64_t tiles, float bias,
                                   float* y0, float* y1, int64_t width);
};

// The kernels of `isa`, or the scalar ones when this CPU cannot run it.
const IsaKernels& isa_kernels(Isa isa);
// Direct accessors: avx2_kernels() / avx512_kernels() only where cpu_supports() says so.
const IsaKernels& scalar_kernels();
const IsaKernels& avx2_kernels();
const IsaKernels& avx512_kernels();

}  // namespace tessera::native
