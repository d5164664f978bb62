// The native backend's data-movement kernels: nearest Resize by integer factors, Concat and
// GlobalAveragePool, and one fused group: a Concat whose inputs come (some of them) through
// nearest Resizes read only by it, which writes the concatenation straight from the small
// tensors without materializing the upsampled ones (the FPN necks of detection models).
#pragma once

#include <memory>
#include <string>

#include "backends/backend.h"
#include "backends/native/isa.h"

namespace tessera::native {

// Resize, Concat, GlobalAveragePool.
bool is_gather_op(const std::string& op_type);

// supports() of one of these nodes:
//   Resize             float32 4-D NCHW, mode nearest, N and C kept, H and W each upscaled by a
//                      positive integer factor (constant scales or sizes) in a coordinate /
//                      nearest mode whose source pixel is exactly floor(out / factor) (checked
//                      against ONNX's formula for every output index); align_corners,
//                      tf_crop_and_resize, linear / cubic and the opset 18 axes attribute are
//                      refused.
//   Concat             any axis, any fixed-size dtype, static shapes (a byte copy).
//   GlobalAveragePool  float32 N x C x spatial... (rank >= 3); also channels-last (rank 4: the
//                      input N x H x W x C, the output N x C x 1 x 1, stored alike in both
//                      layouts).
Status check_gather_node(const Graph& g, int n);
// A group of more than one node: one Concat (float32, 4-D, axis 1) and nearest Resizes (as
// above), each of which feeds that Concat and is read by nothing else.
Status check_gather_group(const SubGraph& sg);
// A lone GlobalAveragePool of a 4-D tensor: the one gather group that takes channels-last.
bool gather_takes_channels_last(const SubGraph& sg);
Result<std::unique_ptr<Kernel>> compile_gather_kernel(const SubGraph& sg, const IsaKernels& isa, bool channels_last);

}  // namespace tessera::native
