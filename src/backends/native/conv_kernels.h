// The native backend's Conv: a direct convolution over zero-padded copies of the input rows
// (no im2col of the image), Winograd F(2x2, 3x3) for the 3x3 convolutions where it pays, or one
// channel at a time for depthwise convolutions;
// per-channel affine nodes folded into its weights and bias, and an elementwise tail run on the
// finished output rows.
#pragma once

#include <string>

#include "backends/backend.h"
#include "backends/native/isa.h"

namespace tessera::native {

bool is_conv_op(const std::string& op_type);  // Conv
// A 2-D Conv over float32 NCHW with constant weights (and bias), any strides, dilations, pads
// or auto_pad, groups of more than one input channel (depthwise convolutions are refused).
Status check_conv_node(const Graph& g, int n);
// That Conv, then per-channel affine nodes folded into it (Add, Sub, Mul, Div by a per-channel
// constant; BatchNormalization), then elementwise nodes of its output shape.
Status check_conv_group(const SubGraph& sg);

// kAuto: Winograd for a 3x3 kernel with stride 1, dilation 1 and one group where it should beat
// the direct kernel (winograd_pays), else direct. kWinograd (tests, comparisons) fails on other
// convolutions.
enum class ConvAlgorithm { kAuto, kDirect, kWinograd };
// Whether Conv node n runs as Winograd under kAuto.
Result<bool> conv_uses_winograd(const Graph& g, int n);
Result<std::unique_ptr<Kernel>> compile_conv_kernel(
    const SubGraph& sg, const IsaKernels& isa, ConvAlgorithm algorithm = ConvAlgorithm::kAuto);

}  // namespace tessera::native
