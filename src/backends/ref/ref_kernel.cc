#include "backends/ref/ref_kernel.h"

namespace tessera {

const RefKernelTable& RefKernelTable::global() {
  static const RefKernelTable* table = [] {
    auto* t = new RefKernelTable();
    register_elementwise_kernels(*t);
    register_tensor_kernels(*t);
    register_nn_kernels(*t);
    register_reduction_kernels(*t);
    register_misc_kernels(*t);
    register_control_flow_kernels(*t);
    register_sequence_kernels(*t);
    register_llm_kernels(*t);
    return t;
  }();
  return *table;
}

void RefKernelTable::add(const std::string& op, RefKernelFn fn) {
  TESSERA_CHECK(kernels_.count(op) == 0, "reference kernel registered twice");
  kernels_[op] = std::move(fn);
}

const RefKernelFn* RefKernelTable::find(const std::string& domain, const std::string& op) const {
  std::string key = (domain.empty() || domain == "ai.onnx") ? op : domain + "." + op;
  auto it = kernels_.find(key);
  return it == kernels_.end() ? nullptr : &it->second;
}

std::vector<std::string> RefKernelTable::ops() const {
  std::vector<std::string> v;
  for (const auto& [k, fn] : kernels_) v.push_back(k);
  return v;
}

}  // namespace tessera
