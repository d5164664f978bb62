// The native backend's Conv: a direct convolution over zero-padded copies of the input rows
// (no im2col of the image), per-channel affine nodes folded into its weights and bias, and an
// elementwise tail run on the finished output rows.
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
Result<std::unique_ptr<Kernel>> compile_conv_kernel(const SubGraph& sg, const IsaKernels& isa);

}  // namespace tessera::native
