#include "partition/contraction.h"

#include <functional>
#include <queue>

namespace tessera {

Result<std::vector<int>> partition_order(const Graph& g, const std::vector<NodeSet>& parts) {
  const int n = g.num_nodes();
  // Vertices: the parts, then one per node in no part.
  std::vector<int> vertex_of(n, -1);
  std::vector<int> first_node;
  for (size_t p = 0; p < parts.size(); ++p) {
    if (parts[p].capacity() != n) return invalid_argument("a partition of another graph");
    for (int m : parts[p]) {
      if (vertex_of[m] >= 0)
        return invalid_argument(g.node(m).describe() + " is in two partitions");
      vertex_of[m] = static_cast<int>(p);
    }
    first_node.push_back(parts[p].empty() ? n : parts[p].first());
  }
  for (int m = 0; m < n; ++m) {
    if (vertex_of[m] >= 0) continue;
    vertex_of[m] = static_cast<int>(first_node.size());
    first_node.push_back(m);
  }
  const int v_count = static_cast<int>(first_node.size());
  std::vector<std::vector<int>> succ(v_count);
  std::vector<int> indegree(v_count, 0);
  for (int m = 0; m < n; ++m) {
    auto link = [&](int value) {
      if (value == kNoValue || g.value(value).producer < 0) return;
      int from = vertex_of[g.value(value).producer], to = vertex_of[m];
      if (from == to) return;
      succ[from].push_back(to);
      ++indegree[to];
    };
    for (int value : g.node(m).inputs) link(value);
    for (int value : g.node(m).implicit_inputs) link(value);
  }
  using Item = std::pair<int, int>;  // (first node, vertex)
  std::priority_queue<Item, std::vector<Item>, std::greater<>> ready;
  for (int v = 0; v < v_count; ++v)
    if (indegree[v] == 0) ready.push({first_node[v], v});
  std::vector<int> order;
  int done = 0;
  while (!ready.empty()) {
    int v = ready.top().second;
    ready.pop();
    ++done;
    if (v < static_cast<int>(parts.size())) order.push_back(v);
    for (int t : succ[v])
      if (--indegree[t] == 0) ready.push({first_node[t], t});
  }
  if (done != v_count) return invalid_argument("the partitions feed each other in a cycle");
  return order;
}

bool jointly_executable(const Graph& g, const std::vector<NodeSet>& parts) {
  return partition_order(g, parts).ok();
}

}  // namespace tessera
