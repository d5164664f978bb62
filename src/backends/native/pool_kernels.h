// The native backend's 2-D pools: MaxPool and AveragePool over float32 N x C x H x W.
#pragma once

#include <memory>
#include <string>

#include "backends/backend.h"

namespace tessera::native {

// MaxPool, AveragePool.
bool is_pool_op(const std::string& op_type);

// supports() of one of these nodes: float32, 4-D, static shapes; kernel_shape, strides, pads,
// auto_pad, dilations and ceil_mode as ONNX has them (nn::forward_window), count_include_pad for
// AveragePool. MaxPool's Indices output is refused when anything reads it.
Status check_pool_node(const Graph& g, int n);
Result<std::unique_ptr<Kernel>> compile_pool_kernel(const SubGraph& sg);

}  // namespace tessera::native
