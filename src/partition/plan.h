// A plan: which backend runs which nodes of one model, with the measured costs that chose it.
//
// Plans are JSON files (`tessera optimize -o plan.json`), replayed by `tessera run --plan` and
// SessionOptions::plan. A plan names its model by a hash of the graph's structure (ops,
// attributes, shapes, dtypes, node and input names; not weight values, so retrained weights keep
// their plan): replaying it on another model is refused. Nodes are named by their index in the
// imported graph (deterministic) and, for people and for a second check, by name.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/status.h"

namespace tessera {

struct PlanPartition {
  std::string backend;
  std::vector<int> nodes;  // node indices, ascending
  std::string label;       // "Conv+Relu" (op types in order)
  std::string rule;        // the rule that proposed it ("merge" after merging)
  double seconds = -1;     // measured on its own (median); -1 when not measured
  double noise = 0;        // interquartile range of those measurements
};

struct Plan {
  static constexpr int kFormat = 1;
  std::string model;       // the model file it was made for (informational)
  std::string model_hash;  // graph_hash() of that model
  int threads = 1;
  std::string cpu;
  std::map<std::string, std::vector<int64_t>> input_shapes;  // fixed dims it was measured with
  std::map<std::string, std::string> backend_versions;       // of the backends it uses
  std::vector<PlanPartition> partitions;                     // in an order they can run in
  // How rank-4 tensors pass between the partitions: "row-major" or "channels-last"
  // (CompileOptions::layout).
  std::string layout = "row-major";
  double predicted_seconds = 0;   // sum of partition costs and transitions
  double transition_seconds = 0;  // part of predicted_seconds
  double measured_seconds = -1;   // the whole plan, end to end (median); -1 when not measured
};

// 16 hex digits identifying the graph's structure (see above).
std::string graph_hash(const Graph& g);

std::string plan_to_json(const Plan& plan);
Result<Plan> plan_from_json(const std::string& text);
Status write_plan(const std::string& path, const Plan& plan);
Result<Plan> read_plan(const std::string& path);

// Checks that `plan` was made for g (hash, node indices and names): ok, or an error saying what
// does not match ("plan.json was made for another model (hash ...)").
Status check_plan_matches(const Plan& plan, const Graph& g);

}  // namespace tessera
