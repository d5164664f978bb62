#include "partition/subgraph_check.h"

#include <algorithm>

namespace tessera {

std::string SubGraphConfig::to_string() const {
  std::string s = max_exits > 0 ? "exits<=" + std::to_string(max_exits) : "any exits";
  s += max_depth > 0 ? " depth<=" + std::to_string(max_depth) : " any depth";
  s += allow_taps ? " taps" : " no-taps";
  return s;
}

OpKind node_kind(const Graph& g, int n) {
  const Node& node = g.node(n);
  const OpSchema* schema = OpRegistry::global().find(node.domain, node.op_type);
  return schema ? schema->kind : OpKind::kOpaque;
}

OpKind subgraph_kind(const SubGraph& sg) {
  OpKind kind = OpKind::kElementwise;
  for (int n : sg.nodes()) kind = std::max(kind, node_kind(sg.graph(), n));
  return kind;
}

Status check_subgraph(const SubGraph& sg, const Reachability& reach, const SubGraphConfig& config) {
  if (sg.size() == 0) return invalid_argument("empty subgraph");
  int exits = sg.exit_nodes().count();
  if (config.max_exits > 0 && exits > config.max_exits) {
    return invalid_argument(std::to_string(exits) + " exits (at most " +
                            std::to_string(config.max_exits) + ")");
  }
  if (config.max_depth > 0 && sg.depth() > config.max_depth) {
    return invalid_argument("depth " + std::to_string(sg.depth()) + " (at most " +
                            std::to_string(config.max_depth) + ")");
  }
  if (!config.allow_taps && sg.has_taps()) {
    return invalid_argument("an output is also read inside (a tap)");
  }
  if (!reach.is_convex(sg.nodes())) return invalid_argument("not convex");
  return Status();
}

bool touching(const Graph& g, const NodeSet& a, const NodeSet& b) {
  auto feeds = [&](const NodeSet& from, const NodeSet& to) {
    for (int n : from)
      for (int v : g.node(n).outputs) {
        if (v == kNoValue) continue;
        for (int c : g.value(v).consumers)
          if (to.contains(c)) return true;
      }
    return false;
  };
  return feeds(a, b) || feeds(b, a);
}

}  // namespace tessera
