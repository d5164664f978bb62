// The native backend's grouping rule and compiler, for a given ISA (the backend uses the best
// one; tests compile for each ISA this CPU runs).
#pragma once

#include "backends/backend.h"
#include "backends/native/isa.h"

namespace tessera::native {

// supports() of one node.
Status native_supports(const Graph& g, int n);
// Single supported nodes; elementwise groups of one output shape; one MatMul / Gemm with an
// elementwise tail of its output shape; a Concat with nearest Resizes that only it reads.
Status native_accepts(const SubGraph& sg);
// Whether the group's kernel takes channels-last (NHWC) rank-4 tensors: elementwise groups, 1x1,
// depthwise and separable convolution groups, a lone 4-D GlobalAveragePool.
bool native_takes_channels_last(const SubGraph& sg);
// channels_last (CompileOptions::layout): only for groups native_takes_channels_last accepts.
Result<std::unique_ptr<Kernel>> compile_native(const SubGraph& sg, const IsaKernels& isa, bool channels_last = false);

}  // namespace tessera::native
