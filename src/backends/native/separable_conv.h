// Channels-last depthwise convolutions, and depthwise-separable pairs as one kernel.
//
// A depthwise group (a depthwise Conv, its folded affine nodes and elementwise tail) runs
// channels-last through depthwise_cl_row (simd_depthwise.h): per output pixel, a vector of
// channels at a time, every tap a contiguous load.
//
// A separable pair is a depthwise group followed by the 1x1 group (pointwise_conv.h) that reads
// its result, as MobileNet-style blocks have them (rec's backbone: 3x3 or 5x5 depthwise with
// HardSwish, then 1x1 with HardSwish). Channels-last, the pair runs band by band: each thread
// computes a band of the depthwise output pixels and then the 1x1 product of that band while it
// is still in its cache, instead of writing the whole depthwise output to memory and reading it
// back in a second kernel. A thread's bands are consecutive, so with consecutive pairs its bands
// come from its own cache too. Row-major, the pair runs as its two kernels one after the other.
#pragma once

#include <memory>

#include "backends/backend.h"
#include "backends/native/isa.h"

namespace tessera::native {

// Whether sg is a depthwise group that runs channels-last here, or why not.
Status check_depthwise_group(const SubGraph& sg);
Result<std::unique_ptr<Kernel>> compile_depthwise_channels_last(const SubGraph& sg, const IsaKernels& isa);

// Whether sg is a separable pair: two Conv nodes, the first a depthwise group, the second a 1x1
// group (no scaling Mul) whose Conv reads the first group's result; or why not.
Status check_separable_group(const SubGraph& sg);
Result<std::unique_ptr<Kernel>> compile_separable(const SubGraph& sg, const IsaKernels& isa, bool channels_last);

}  // namespace tessera::native
