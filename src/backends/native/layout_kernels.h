// The native backend's layout kernels: Transpose and Slice as strided byte copies, for any
// fixed-size dtype and static shapes. Both first merge the dims that stay contiguous on both
// sides, so that most of the work is memcpy of runs (a Transpose whose innermost output dim
// reads the input with a stride runs as tiled 2-D transposes instead).
#pragma once

#include <memory>
#include <string>

#include "backends/backend.h"

namespace tessera::native {

// Transpose, Slice.
bool is_layout_op(const std::string& op_type);

// supports() of one of these nodes (they run alone, one node per kernel):
//   Transpose  static shapes, a fixed-size dtype; perm a permutation (default: reversed dims).
//   Slice      static shapes, a fixed-size dtype; starts / ends / axes / steps constants
//              (attributes before opset 10), any signs and steps.
Status check_layout_node(const Graph& g, int n);
Result<std::unique_ptr<Kernel>> compile_layout_kernel(const SubGraph& sg);

}  // namespace tessera::native
