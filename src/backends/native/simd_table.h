// Builds an ISA's IsaKernels table from the simd templates instantiated for policy S.
//
// Included by each ISA file under its target pragma, so that every template (and every lambda in
// it) is instantiated for that ISA.
#pragma once

#include <utility>

#include "backends/native/isa.h"

namespace tessera::native::simd {

template <class S, int kMr, int kNv, int... Ms>
void fill_gemm_micro(IsaKernels& k, std::integer_sequence<int, Ms...>) {
  ((k.gemm_micro[Ms] = &gemm_micro<S, kMr, Ms + 1, kNv>), ...);
  ((k.gemm_micro_rows[Ms] = &gemm_micro_rows<S, Ms + 1, kNv>), ...);
}
template <class S, int kMr, int... Ms>
void fill_gemm_micro_narrow(IsaKernels& k, std::integer_sequence<int, Ms...>) {
  ((k.gemm_micro_narrow[Ms] = &gemm_micro<S, kMr, Ms + 1, 1>), ...);
  ((k.gemm_micro_rows_narrow[Ms] = &gemm_micro_rows<S, Ms + 1, 1>), ...);
}

// kMr x (kNv * S::W) is the GEMM register block; kNarrowMr x S::W the narrow one (0: none).
template <class S, int kMr, int kNv, int kNarrowMr = 0>
IsaKernels make_kernels(Isa isa) {
  static_assert(kMr <= 16, "gemm_micro has room for 16 row counts");
  static_assert(kNarrowMr <= 32, "gemm_micro_narrow has room for 32 row counts");
  IsaKernels k{};
  k.isa = isa;
  k.vector_width = S::W;
  k.eltwise = &eltwise_run<S>;
  k.math = &math_run<S>;
  k.reduce_rows = &reduce_rows<S>;
  k.reduce_columns = &reduce_columns<S>;
  k.softmax_row = &softmax_row<S>;
  k.softmax_columns = &softmax_columns<S>;
  k.layer_norm_row = &layer_norm_row<S>;
  k.attention_scores = &attention_scores<S>;
  k.attention_values = &attention_values<S>;
  k.rms_norm_row = &rms_norm_row<S>;
  k.silu_mul = &silu_mul<S>;
  k.gelu_tanh = &gelu_tanh<S>;
  k.gemm_mr = kMr;
  k.gemm_nr = kNv * S::W;
  fill_gemm_micro<S, kMr, kNv>(k, std::make_integer_sequence<int, kMr>());
  k.gemm_narrow_mr = kNarrowMr;
  k.gemm_narrow_nr = kNarrowMr > 0 ? S::W : 0;
  fill_gemm_micro_narrow<S, kNarrowMr>(k, std::make_integer_sequence<int, kNarrowMr>());
  k.winograd_input_tile_row = &winograd_input_tile_row<S>;
  k.winograd_output_tile_row = &winograd_output_tile_row<S>;
  k.depthwise_row = &depthwise_row<S>;
  k.depthwise_cl_row = &depthwise_cl_row<S>;
  return k;
}

// The direct convolution's register tile: kOcb output channels x kNv vectors of pixels.
template <class S, int kOcb, int kNv>
IsaKernels with_conv(IsaKernels k) {
  k.conv_oc_block = kOcb;
  k.conv_row = &conv_row<S, kOcb, kNv>;
  return k;
}

// The ConvTranspose row kernel's blocks: kJb columns, kAcc accumulators at most.
template <class S, int kJb, int kAcc>
IsaKernels with_deconv(IsaKernels k) {
  k.deconv_col_block = kJb;
  k.deconv_row = &deconv_row<S, kJb, kAcc>;
  return k;
}

}  // namespace tessera::native::simd
