// SubGraph: a set of nodes of one graph that a backend compiles and runs as a unit, with the
// values crossing its boundary derived from the graph.
//
//   inputs   non-constant values read inside but produced outside (graph inputs or other nodes'
//            outputs), in order of first use; a compiled Kernel receives one tensor per input.
//   outputs  values produced inside and read outside (or graph outputs), in producer order; the
//            Kernel returns one tensor per output.
//   constants initializers read inside; a backend reads them at compile time (weight packing).
//
// Reachability answers "does a path lead from node a to node b", which convexity needs: a set is
// convex when no path leaves it and comes back in (such a set cannot run as one step).
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/node_set.h"

namespace tessera {

class SubGraph {
 public:
  SubGraph(const Graph& g, NodeSet nodes);

  const Graph& graph() const { return *graph_; }
  const NodeSet& nodes() const { return nodes_; }
  const std::vector<int>& inputs() const { return inputs_; }
  const std::vector<int>& outputs() const { return outputs_; }
  const std::vector<int>& constants() const { return constants_; }
  int size() const { return nodes_.count(); }
  // "Conv+Relu+Add" (op types in execution order) for reports and error messages.
  std::string label() const;

 private:
  const Graph* graph_;
  NodeSet nodes_;
  std::vector<int> inputs_, outputs_, constants_;
};

class Reachability {
 public:
  explicit Reachability(const Graph& g);
  // Nodes reachable from n by one or more edges (n itself excluded).
  const NodeSet& descendants(int n) const { return descendants_[n]; }
  bool reaches(int from, int to) const { return descendants_[from].contains(to); }
  // No node outside `s` is both reachable from `s` and reaches `s`.
  bool is_convex(const NodeSet& s) const;

 private:
  std::vector<NodeSet> descendants_;
};

}  // namespace tessera
