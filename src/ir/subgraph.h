// SubGraph: a set of nodes of one graph that a backend compiles and runs as a unit, with the
// values crossing its boundary derived from the graph.
//
//   inputs   non-constant values read inside but produced outside (graph inputs or other nodes'
//            outputs), in order of first use; a compiled Kernel receives one tensor per input.
//   outputs  values produced inside and read outside (or graph outputs), in producer order; the
//            Kernel returns one tensor per output.
//   constants initializers read inside; a backend reads them at compile time (weight packing).
//
// Derived node sets, for the partitioner's validity rules (partition/subgraph_check.h):
//   entry nodes  inside nodes that read a non-constant value from outside (or a graph input)
//   exit nodes   inside nodes that produce an output
//   depth        the longest chain of inside nodes (1 for a single node)
//   taps         outputs that are also read inside: the subgraph exposes an intermediate value
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
  const NodeSet& entry_nodes() const { return entry_nodes_; }
  const NodeSet& exit_nodes() const { return exit_nodes_; }
  int depth() const { return depth_; }
  // Some output is also read by an inside node.
  bool has_taps() const { return has_taps_; }
  // "Conv+Relu+Add" (op types in execution order) for reports and error messages.
  std::string label() const;

 private:
  const Graph* graph_;
  NodeSet nodes_;
  std::vector<int> inputs_, outputs_, constants_;
  NodeSet entry_nodes_, exit_nodes_;
  int depth_ = 0;
  bool has_taps_ = false;
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
