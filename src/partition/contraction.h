// Partitions contracted: each partition becomes one vertex, with an edge where a value produced
// in one is read in another. Chosen partitions can run one after another only if this graph is a
// DAG. Convexity of each partition is not enough: P = {a, d} and Q = {c, b} with edges a->b and
// c->d are both convex, yet P feeds Q and Q feeds P.
#pragma once

#include <vector>

#include "ir/graph.h"
#include "ir/node_set.h"
#include "ir/status.h"

namespace tessera {

// An execution order of `parts` (disjoint node sets of g; nodes in none run alone), as indices
// into `parts`, ties broken by the lowest first node; an error if the contracted graph has a
// cycle.
Result<std::vector<int>> partition_order(const Graph& g, const std::vector<NodeSet>& parts);

// Whether `parts` contracted form a DAG.
bool jointly_executable(const Graph& g, const std::vector<NodeSet>& parts);

}  // namespace tessera
