#include "partition/mock_estimator.h"

#include <algorithm>

namespace tessera {

double MockEstimator::op_seconds(const std::string& backend, const std::string& op_type) const {
  if (auto b = model_.op_seconds.find(backend); b != model_.op_seconds.end())
    if (auto o = b->second.find(op_type); o != b->second.end()) return o->second;
  if (auto b = model_.backend_op_seconds.find(backend); b != model_.backend_op_seconds.end())
    return b->second;
  return model_.default_op_seconds;
}

Cost MockEstimator::cost(const Candidate& c) {
  ++calls_;
  Key key{c.nodes, c.backend};
  if (auto it = known_.find(key); it != known_.end()) return it->second;
  if (model_.max_measurements > 0 && measurements_ >= model_.max_measurements) {
    ++refused_;
    return Cost::unmeasured("measurement cap of " + std::to_string(model_.max_measurements) +
                            " reached");
  }
  ++measurements_;
  const std::string backend = c.backend ? c.backend->name() : "";
  double sum = 0;
  int k = 0;
  Cost cost;
  for (int n : c.nodes) {
    const std::string& op_type = graph_.node(n).op_type;
    if (auto inv = model_.invalid_ops.find(backend);
        inv != model_.invalid_ops.end() && inv->second.count(op_type)) {
      cost = Cost::invalid("mock: " + backend + " computes " + op_type + " wrongly");
      break;
    }
    sum += op_seconds(backend, op_type);
    ++k;
  }
  if (cost.valid)
    cost = Cost::of(sum * (1.0 - model_.group_discount * (1.0 - 1.0 / std::max(k, 1))));
  known_.emplace(std::move(key), cost);
  return cost;
}

}  // namespace tessera
