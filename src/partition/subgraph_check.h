// What makes a group of nodes a legal partition, beyond what a backend says about it.
//
// A SubGraph (ir/subgraph.h) already knows its inputs, outputs, entry and exit nodes, depth and
// taps. Here: its kind (the largest OpKind inside, as TVM's fusion takes it) and the structural
// validity rules a partition rule imposes (Collage's SubGraphConfig):
//   convex     no path leaves the subgraph and re-enters it (else it cannot run as one step)
//   max_exits  at most this many exit nodes (0: no limit)
//   max_depth  at most this long a chain of inside nodes (0: no limit)
//   allow_taps whether an output may also be read inside (an exposed intermediate value)
#pragma once

#include <string>

#include "ir/node_set.h"
#include "ir/status.h"
#include "ir/subgraph.h"
#include "ops/op_registry.h"

namespace tessera {

struct SubGraphConfig {
  int max_exits = 0;
  int max_depth = 0;
  bool allow_taps = true;

  std::string to_string() const;  // "exits<=1 depth<=8 no-taps"
};

// The kind of one node: its op's registered kind; kOpaque for ops the registry does not know.
OpKind node_kind(const Graph& g, int n);
// The largest kind of the nodes inside (kElementwise for the empty subgraph).
OpKind subgraph_kind(const SubGraph& sg);

// Ok if `sg` obeys `config` and is convex, else the first rule it breaks ("not convex", "3 exits
// (at most 1)", ...). `reach` must be of sg's graph.
Status check_subgraph(const SubGraph& sg, const Reachability& reach, const SubGraphConfig& config);

// Whether `a` and `b` touch: a value produced in one is read in the other.
bool touching(const Graph& g, const NodeSet& a, const NodeSet& b);

}  // namespace tessera
