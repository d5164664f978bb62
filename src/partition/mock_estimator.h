// A cost estimator for tests (Collage's MockCostEstimator): a per-op cost per backend, cheaper
// per op in larger groups, so that depth limits and winners are observable without running
// anything; and a cap on the number of distinct candidates it will estimate, so tests can check
// that the search stays within a measurement budget.
//
// A group of k ops costs  (sum of its ops' costs) * (1 - group_discount * (1 - 1/k)):  a single
// op costs its own cost, large groups approach (1 - group_discount) of the sum.
#pragma once

#include <map>
#include <set>
#include <string>
#include <unordered_map>

#include "partition/cost_estimator.h"

namespace tessera {

struct MockCostModel {
  double default_op_seconds = 1e-3;
  std::map<std::string, double> backend_op_seconds;                 // backend name -> per-op cost
  std::map<std::string, std::map<std::string, double>> op_seconds;  // backend -> op type -> cost
  std::map<std::string, std::set<std::string>> invalid_ops;         // backend -> ops it gets wrong
  double group_discount = 0.5;
  int max_measurements = 0;  // distinct candidates it will estimate; 0: no limit
};

class MockEstimator final : public CostEstimator {
 public:
  MockEstimator(const Graph& g, MockCostModel model) : graph_(g), model_(std::move(model)) {}

  // The same candidate asked again costs no measurement. Past the cap, new candidates come back
  // unmeasured ("measurement cap of N reached").
  Cost cost(const Candidate& c) override;

  // The cost of one op of type `op_type` on `backend`.
  double op_seconds(const std::string& backend, const std::string& op_type) const;
  int measurements() const { return measurements_; }  // distinct candidates estimated
  int refused() const { return refused_; }            // calls refused because of the cap
  int calls() const { return calls_; }

 private:
  struct Key {
    NodeSet nodes;
    const Backend* backend;
    bool operator==(const Key& o) const { return backend == o.backend && nodes == o.nodes; }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return k.nodes.hash() * 31 + std::hash<const void*>()(k.backend);
    }
  };
  const Graph& graph_;
  MockCostModel model_;
  std::unordered_map<Key, Cost, KeyHash> known_;
  int measurements_ = 0, refused_ = 0, calls_ = 0;
};

}  // namespace tessera
