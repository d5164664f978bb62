// The native backend's ConvTranspose (the upsampling layers of detection and segmentation heads,
// whose kernel equals their stride) and BatchNormalization in its inference form.
#pragma once

#include <string>

#include "backends/backend.h"
#include "backends/native/isa.h"

namespace tessera::native {

bool is_deconv_op(const std::string& op_type);  // ConvTranspose
// A 2-D ConvTranspose over float32 NCHW with constant weights, kernel == stride, no padding,
// output padding or dilation, one group.
Status check_deconv_node(const Graph& g, int n);
// That ConvTranspose, then per-channel affine nodes folded into its weights and bias (Add, Sub,
// Mul, Div by a per-channel constant; BatchNormalization), then elementwise nodes of its output
// shape (the tail, run on each block of output rows while it is in cache).
Status check_deconv_group(const SubGraph& sg);
Result<std::unique_ptr<Kernel>> compile_deconv_kernel(const SubGraph& sg, const IsaKernels& isa);

// BatchNormalization in inference form (constant scale, bias, mean and variance; one output).
Status check_batch_norm_node(const Graph& g, int n);
Result<std::unique_ptr<Kernel>> compile_batch_norm_kernel(const SubGraph& sg);

}  // namespace tessera::native
