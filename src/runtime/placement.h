// Placement: which backend runs which nodes. A Partition is a group of nodes one backend compiles
// into one kernel; nodes in no partition run on the reference kernels.
//
// place_on_backend is the simple placement behind `tessera run --backend NAME`: every node the
// backend supports goes to it, grouped as its fusion style allows (greedily, in execution order,
// keeping every group convex); the partitioner (`tessera optimize`) chooses by measurement instead.
#pragma once

#include "partition/plan.h"

#include <string>
#include <vector>

#include "backends/backend.h"
#include "ir/node_set.h"

namespace tessera {

struct Partition {
  NodeSet nodes;
  const Backend* backend = nullptr;
};

// `excluded` (optional, of g's size): nodes left to ref as if the backend did not support them
// (the optimizer carves out nodes another backend runs much faster).
Result<std::vector<Partition>> place_on_backend(const Graph& g, const Backend& backend,
                                                const NodeSet* excluded = nullptr);

// The partitions of a plan (`tessera optimize`) made for g: refused when the plan was made for
// another model, names a backend this build lacks or that is not available here.
Result<std::vector<Partition>> place_by_plan(const Graph& g, const Plan& plan);

}  // namespace tessera
