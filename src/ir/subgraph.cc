#include "ir/subgraph.h"

#include <algorithm>

namespace tessera {

SubGraph::SubGraph(const Graph& g, NodeSet nodes)
    : graph_(&g), nodes_(std::move(nodes)), entry_nodes_(g.num_nodes()), exit_nodes_(g.num_nodes()) {
  TESSERA_CHECK(nodes_.capacity() == g.num_nodes(), "SubGraph over a NodeSet of another graph");
  std::vector<char> seen(g.num_values(), 0);
  std::vector<int> depth(g.num_nodes(), 0);
  for (int n : nodes_) {
    const Node& node = g.node(n);
    int d = 1;
    auto read = [&](int v) {
      if (v == kNoValue) return;
      const Value& val = g.value(v);
      if (val.producer >= 0 && nodes_.contains(val.producer)) {
        d = std::max(d, depth[val.producer] + 1);
        return;
      }
      if (!val.constant) entry_nodes_.add(n);
      if (seen[v]) return;
      seen[v] = 1;
      (val.constant ? constants_ : inputs_).push_back(v);
    };
    for (int v : node.inputs) read(v);
    for (int v : node.implicit_inputs) read(v);
    depth[n] = d;
    depth_ = std::max(depth_, d);
  }
  for (int n : nodes_) {
    for (int v : g.node(n).outputs) {
      if (v == kNoValue) continue;
      const Value& val = g.value(v);
      bool used_outside = val.is_graph_output ||
                          std::any_of(val.consumers.begin(), val.consumers.end(),
                                      [&](int c) { return !nodes_.contains(c); });
      if (!used_outside) continue;
      outputs_.push_back(v);
      exit_nodes_.add(n);
      has_taps_ |= std::any_of(val.consumers.begin(), val.consumers.end(),
                               [&](int c) { return nodes_.contains(c); });
    }
  }
}

std::string SubGraph::label() const {
  std::string s;
  for (int n : nodes_) {
    if (!s.empty()) s += '+';
    s += graph_->node(n).op_type;
  }
  return s;
}

Reachability::Reachability(const Graph& g) {
  int n = g.num_nodes();
  descendants_.assign(n, NodeSet(n));
  // Post-DFS order: consumers have larger indices, so walk backwards.
  for (int i = n - 1; i >= 0; --i) {
    for (int v : g.node(i).outputs) {
      if (v == kNoValue) continue;
      for (int c : g.value(v).consumers) {
        descendants_[i].add(c);
        descendants_[i] |= descendants_[c];
      }
    }
  }
}

bool Reachability::is_convex(const NodeSet& s) const {
  if (s.empty()) return true;
  NodeSet below(s.capacity());
  for (int n : s) below |= descendants_[n];
  below -= s;
  // Convex iff no node outside s that is below s reaches back into s.
  for (int m : below)
    if (descendants_[m].intersects(s)) return false;
  return true;
}

}  // namespace tessera
