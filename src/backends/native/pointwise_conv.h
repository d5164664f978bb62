// The native backend's 1x1 convolution (stride 1, no padding, one group) as one GEMM per image, in
// either layout a plan passes tensors in: channels-last X [H*W, C] times W^T, or row-major W times
// X [C, H*W]. The group may open with a Mul of the convolution's input by a per-channel scale (a
// squeeze-excitation block's x * s): the kernel folds s into its copy of the weights each run,
// (W diag(s)) x = W (x * s), so the scaled tensor is never written or read. Per-channel affine
// nodes after the convolution are folded into the weights and bias, and an elementwise tail runs on
// finished blocks of the output, as in the direct kernel (conv_common.h).
#pragma once

#include <memory>

#include "backends/backend.h"
#include "backends/native/conv_common.h"
#include "backends/native/isa.h"
#include "ir/pattern.h"

namespace tessera::native {

// Whether sg is a group this kernel runs: the 1x1 Conv, maybe its scaling Mul, the affine nodes and
// the tail; the reason when not.
Status check_pointwise_conv_group(const SubGraph& sg);
// Whether sg's Conv reads a value computed inside sg (a scaling Mul): only this kernel runs that.
bool conv_has_head(const SubGraph& sg);
Result<std::unique_ptr<Kernel>> compile_pointwise_conv(const SubGraph& sg, const IsaKernels& isa,
                                                       bool channels_last);
// The channels-last kernel of a group without a scaling Mul, as a PixelBandKernel.
Result<std::unique_ptr<PixelBandKernel>> compile_pointwise_band(const SubGraph& sg, const IsaKernels& isa);
// Mul(x, s) -> Conv 1x1 [-> BatchNormalization [-> Add(residual)]]: the squeeze-excitation output
// projection, as fused-pattern candidates of the native backend.
Pattern scaled_pointwise_conv_pattern();

}  // namespace tessera::native
