#include "backends/ref/elementwise_kernels.h"

namespace tessera {
namespace ref {

Result<BroadcastPlan> plan_broadcast(const std::vector<std::vector<int64_t>>& shapes) {
  BroadcastPlan plan;
  TESSERA_ASSIGN_OR_RETURN(plan.out_dims, broadcast_shapes(shapes));
  plan.numel = shape_numel(plan.out_dims);
  std::vector<std::vector<int64_t>> strides;
  for (const auto& s : shapes) strides.push_back(broadcast_strides(s, plan.out_dims));

  // Coalesce: drop size-1 dims, and merge dim d into the previous kept dim p when every input
  // steps through d and p as one contiguous run (stride[p] == stride[d] * dims[d]).
  plan.loop_strides.assign(shapes.size(), {});
  for (size_t d = 0; d < plan.out_dims.size(); ++d) {
    int64_t n = plan.out_dims[d];
    if (n == 1) continue;
    bool merge = !plan.loop_dims.empty();
    for (size_t k = 0; merge && k < shapes.size(); ++k) {
      merge = plan.loop_strides[k].back() == strides[k][d] * n;
    }
    if (merge) {
      plan.loop_dims.back() *= n;
      for (size_t k = 0; k < shapes.size(); ++k) plan.loop_strides[k].back() = strides[k][d];
    } else {
      plan.loop_dims.push_back(n);
      for (size_t k = 0; k < shapes.size(); ++k) plan.loop_strides[k].push_back(strides[k][d]);
    }
  }
  if (plan.loop_dims.empty()) {  // a scalar result (or all dims 1)
    plan.loop_dims.push_back(1);
    for (auto& s : plan.loop_strides) s.push_back(0);
  }
  return plan;
}

}  // namespace ref

void register_elementwise_kernels(RefKernelTable& t) {
  ref::register_elementwise_unary_kernels(t);
  ref::register_elementwise_binary_kernels(t);
  ref::register_elementwise_cast_kernels(t);
}

}  // namespace tessera
