// The native backend's single-node kernels over rows: ReduceSum / ReduceMean / ReduceMax (any
// axes), Softmax (opset 13 axis and the older 2-D flattening), LayerNormalization.
#pragma once

#include "backends/backend.h"
#include "backends/native/isa.h"

namespace tessera::native {

bool is_row_op(const std::string& op_type);
// supports() for one of these nodes: float32, static shapes, constant axes.
Status check_row_node(const Graph& g, int n);
Result<std::unique_ptr<Kernel>> compile_row_kernel(const SubGraph& sg, const IsaKernels& isa);
// Whether a LayerNormalization of value x (float32, static) over its dims from `axis` on can take
// scale and bias (kNoValue, or values broadcasting onto those dims).
Status check_layer_norm(const Graph& g, int x, int axis, int scale, int bias);
// A LayerNormalization of value x over its dims from `axis` on, as sg's only output: scale and bias
// (values broadcasting onto those dims) or kNoValue.
Result<std::unique_ptr<Kernel>> compile_layer_norm(const SubGraph& sg, const IsaKernels& isa, int x,
                                                   int axis, float epsilon, int scale, int bias);
// For a supported Softmax node that normalizes contiguous rows (nothing after its axis, or the
// flattened trailing dims before opset 13): the row length; an error for any other.
Result<int64_t> softmax_row_length(const Graph& g, int n);

}  // namespace tessera::native
