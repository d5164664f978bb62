#include "runtime/placement.h"

#include <algorithm>

namespace tessera {

Result<std::vector<Partition>> place_on_backend(const Graph& g, const Backend& backend, const NodeSet* excluded) {
  TESSERA_RETURN_IF_ERROR(backend.available());
  const int n_nodes = g.num_nodes();
  std::vector<NodeSet> groups;            // by group id; emptied when merged away
  std::vector<int> group_of(n_nodes, -1);  // node -> group id
  const bool fuse = backend.fusion_style() != FusionStyle::kNone;
  Reachability reach(g);
  for (int n = 0; n < n_nodes; ++n) {
    if ((excluded && excluded->contains(n)) || !backend.supports(g, n).ok()) continue;
    int mine = static_cast<int>(groups.size());
    groups.push_back(NodeSet::of(n_nodes, {n}));
    group_of[n] = mine;
    if (!fuse) continue;
    // Join the groups of the node's producers, one at a time, while the result stays valid.
    for (int v : g.node(n).inputs) {
      if (v == kNoValue || g.value(v).producer < 0) continue;
      int other = group_of[g.value(v).producer];
      if (other < 0 || other == mine) continue;
      NodeSet merged = groups[mine] | groups[other];
      if (!reach.is_convex(merged)) continue;
      SubGraph sg(g, merged);
      if (sg.depth() > backend.max_fusion_depth() || !backend.accepts(sg).ok()) continue;
      for (int m : groups[other]) group_of[m] = mine;
      groups[mine] = std::move(merged);
      groups[other] = NodeSet(n_nodes);
    }
  }
  std::vector<Partition> parts;
  for (NodeSet& s : groups) {
    if (s.empty()) continue;
    // A group the backend will not take whole falls back to single nodes it accepts.
    if (s.count() > 1 || backend.accepts(SubGraph(g, s)).ok()) {
      parts.push_back({std::move(s), &backend});
    }
  }
  return parts;
}

Result<std::vector<Partition>> place_by_plan(const Graph& g, const Plan& plan) {
  TESSERA_RETURN_IF_ERROR(check_plan_matches(plan, g));
  std::vector<Partition> parts;
  for (const PlanPartition& p : plan.partitions) {
    const Backend* b = find_backend(p.backend);
    if (!b) return invalid_argument("the plan uses backend '" + p.backend + "', which this build lacks (it has: " + backend_names() + ")");
    if (Status st = b->available(); !st.ok())
      return Status(st.code(), "the plan uses backend '" + p.backend + "', not available here: " + st.message());
    Partition part{NodeSet(g.num_nodes()), b};
    for (int n : p.nodes) part.nodes.add(n);
    parts.push_back(std::move(part));
  }
  return parts;
}

}  // namespace tessera
