// The op table's lookup and the helpers its checks share.
#include "backends/xnnpack/xnnpack_rules.h"

#include <algorithm>
#include <map>

namespace tessera::xnnpack {

int nhwc_axis(int nchw_axis) {
  static const int kMap[4] = {0, 3, 1, 2};
  return kMap[nchw_axis];
}


bool nhwc_is_plain(const std::vector<int64_t>& d) { return d[1] == 1 || d[2] * d[3] == 1; }

const Tensor* NodeView::constant(int i) const {
  if (!has_input(i)) return nullptr;
  const auto& c = input(i).constant;
  return c ? &*c : nullptr;
}

Status NodeView::reject(const std::string& why) const {
  return unimplemented(node.describe() + ": " + why);
}

Status require_float_constant(const NodeView& n, int i, const char* what) {
  const Tensor* t = n.constant(i);
  if (!t) return n.reject(std::string(what) + " must be a constant");
  if (t->dtype() != DType::kFloat32) return n.reject(std::string(what) + " must be float32");
  return Status();
}

Result<std::vector<int64_t>> broadcast_dims(const std::vector<int64_t>& a,
                                            const std::vector<int64_t>& b) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t k = 0; k < rank; ++k) {
    const int64_t x = k + a.size() < rank ? 1 : a[k + a.size() - rank];
    const int64_t y = k + b.size() < rank ? 1 : b[k + b.size() - rank];
    if (x != y && x != 1 && y != 1) {
      return invalid_argument("shapes " + dims_to_string(a) + " and " + dims_to_string(b) +
                              " do not broadcast");
    }
    out[k] = x == 1 ? y : x;
  }
  return out;
}

namespace {
const std::map<std::string, OpRule>& rule_table() {
  static const std::map<std::string, OpRule> table = [] {
    std::vector<OpRule> rules;
    add_nn_rules(rules);
    add_elementwise_rules(rules);
    add_tensor_rules(rules);
    std::map<std::string, OpRule> m;
    for (OpRule& r : rules) m.emplace(r.op_type, std::move(r));
    return m;
  }();
  return table;
}
}  // namespace

const OpRule* find_rule(const Node& n) {
  if (!n.domain.empty() && n.domain != "ai.onnx") return nullptr;
  auto it = rule_table().find(n.op_type);
  return it == rule_table().end() ? nullptr : &it->second;
}

std::vector<std::string> rule_ops() {
  std::vector<std::string> ops;
  for (const auto& [name, rule] : rule_table()) ops.push_back(name);
  return ops;
}

}  // namespace tessera::xnnpack
