#include "partition/search.h"

#include <algorithm>
#include <limits>
#include <map>
#include <queue>
#include <set>
#include <unordered_map>

#include "partition/contraction.h"
#include "partition/subgraph_check.h"

namespace tessera {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kInfinity = std::numeric_limits<double>::infinity();

struct BoundaryNode {
  int node;
  int group;
  const Backend* backend;
  auto operator<=>(const BoundaryNode&) const = default;
};

// The part of a search state that decides which extensions are valid.
struct Frontier {
  NodeSet covered;
  // Group ids of the chosen partitions that an uncovered node still reaches in the contracted
  // graph, sorted.
  std::vector<int> open;
  // With transition costs: every covered node next to an uncovered one, with its partition's
  // group id and backend, by node. They decide the transitions of every completion.
  std::vector<BoundaryNode> boundary;

  bool operator==(const Frontier& o) const {
    return open == o.open && covered == o.covered && boundary == o.boundary;
  }
};
struct FrontierHash {
  size_t operator()(const Frontier& f) const {
    size_t h = f.covered.hash();
    for (int g : f.open) h = h * 0x100000001b3ull ^ static_cast<size_t>(g);
    for (const BoundaryNode& b : f.boundary)
      h = h * 0x100000001b3ull ^ (static_cast<size_t>(b.node) * 31 + static_cast<size_t>(b.group));
    return h;
  }
};

// Calls f(value, producer node, consumer node) for every tensor edge between nodes.
template <typename F>
void for_each_edge_into(const Graph& g, int consumer, F&& f) {
  auto visit = [&](int v) {
    if (v != kNoValue && g.value(v).producer >= 0) f(v, g.value(v).producer, consumer);
  };
  for (int v : g.node(consumer).inputs) visit(v);
  for (int v : g.node(consumer).implicit_inputs) visit(v);
}

class Searcher {
 public:
  Searcher(const Graph& g, const std::vector<Candidate>& given, CostEstimator& estimator,
           const SearchOptions& options)
      : g_(g),
        n_(g.num_nodes()),
        estimator_(estimator),
        options_(options),
        reach_(g),
        start_(Clock::now()) {
    CandidateSet set;
    for (const Candidate& c : given) set.add(c);
    // Every node gets a reference singleton, so that a plan always exists.
    for (int m = 0; m < n_; ++m) set.add(Candidate{NodeSet::of(n_, {m}), &ref_backend(), "host"});
    candidates_ = std::move(set).take();
    costs_.resize(candidates_.size());
    convex_.assign(candidates_.size(), -1);
    by_first_.resize(n_);
    std::unordered_map<NodeSet, int> group_ids;
    for (size_t i = 0; i < candidates_.size(); ++i) {
      const NodeSet& nodes = candidates_[i].nodes;
      if (nodes.empty()) continue;
      by_first_[nodes.first()].push_back(static_cast<int>(i));
      auto [it, fresh] = group_ids.emplace(nodes, static_cast<int>(group_nodes_.size()));
      if (fresh) group_nodes_.push_back(nodes);
      group_of_.push_back(it->second);
    }
  }

  Result<SearchResult> run();

 private:
  struct State {
    Frontier frontier;
    double dist = kInfinity;
    double estimate = 0;  // of covering the rest (options_.remaining)
    int parent = -1;     // state
    int candidate = -1;  // the candidate that led here from parent
    bool settled = false;
  };

  bool past_deadline() const {
    return (options_.deadline && Clock::now() >= *options_.deadline) ||
           (options_.stop && options_.stop());
  }
  bool convex(int c) {
    if (convex_[c] < 0) convex_[c] = reach_.is_convex(candidates_[c].nodes) ? 1 : 0;
    return convex_[c] != 0;
  }
  // The cost of candidate c, asking the estimator the first time (unless `may_measure` is false).
  const std::optional<Cost>& cost_of(int c, bool may_measure = true) {
    if (!costs_[c] && may_measure) {
      costs_[c] = estimator_.cost(candidates_[c]);
      evaluated_.push_back({candidates_[c], *costs_[c]});
      report(false);
    }
    return costs_[c];
  }
  bool closes_cycle(const Frontier& f, const NodeSet& e) const;
  Frontier extend(const Frontier& f, int c) const;
  double crossing_cost(const Frontier& f, int c) const;
  bool next_to_uncovered(int x, const NodeSet& covered) const;
  void greedy_complete(Frontier f, std::vector<int>& chosen);
  std::vector<PlannedPartition> merge(std::vector<PlannedPartition> parts, int& merges);
  void report(bool merging);

  const Graph& g_;
  const int n_;
  CostEstimator& estimator_;
  const SearchOptions& options_;
  Reachability reach_;
  Clock::time_point start_;
  std::vector<Candidate> candidates_;
  std::vector<std::optional<Cost>> costs_;
  std::vector<signed char> convex_;         // -1 unknown
  std::vector<std::vector<int>> by_first_;  // node -> candidates whose first node it is
  std::vector<NodeSet> group_nodes_;        // distinct node sets of candidates
  std::vector<int> group_of_;               // candidate -> group id
  std::vector<PlannedPartition> evaluated_;
  SearchProgress progress_;
  int64_t since_report_ = 0;
};

// Whether choosing e (disjoint from f.covered, convex) closes a cycle in the contracted graph
// (chosen partitions as vertices, uncovered nodes as single vertices): a path that leaves e and
// comes back. Such a path must pass through a chosen partition (e is convex), which e, made of
// uncovered nodes, reaches: an open one. No open partition, no cycle.
bool Searcher::closes_cycle(const Frontier& f, const NodeSet& e) const {
  if (f.open.empty()) return false;
  // Nodes after both e and every open group can reach neither.
  int limit = e.last();
  for (int gid : f.open) limit = std::max(limit, group_nodes_[gid].last());
  NodeSet visited(n_);
  std::vector<int> stack;
  std::vector<char> group_done(f.open.size(), 0);
  auto push_consumers = [&](int x) {
    for (int v : g_.node(x).outputs) {
      if (v == kNoValue) continue;
      for (int c : g_.value(v).consumers)
        if (!visited.contains(c) && c <= limit) stack.push_back(c);
    }
  };
  for (int x : e) visited.add(x);
  for (int x : e) push_consumers(x);  // (consumers inside e are marked visited: not pushed)
  visited -= e;
  while (!stack.empty()) {
    int x = stack.back();
    stack.pop_back();
    if (visited.contains(x)) continue;
    visited.add(x);
    if (e.contains(x)) return true;
    if (!f.covered.contains(x)) {
      push_consumers(x);
      continue;
    }
    for (size_t k = 0; k < f.open.size(); ++k) {  // (a closed group is never reached from e)
      const NodeSet& group = group_nodes_[f.open[k]];
      if (group_done[k] || !group.contains(x)) continue;
      group_done[k] = 1;
      visited |= group;
      for (int y : group) push_consumers(y);
    }
  }
  return false;
}

// The frontier after choosing candidate c. The open groups after it are among the open groups
// before it and c itself (a closed group stays closed: contracting c creates no path from an
// uncovered node that did not exist through c's nodes before). A group is open if a walk back
// over producers, jumping across open groups, meets an uncovered node.
Frontier Searcher::extend(const Frontier& f, int c) const {
  Frontier next;
  next.covered = f.covered | candidates_[c].nodes;
  if (next.covered.count() == n_) return next;
  std::vector<int> groups = f.open;
  groups.push_back(group_of_[c]);
  auto group_index = [&](int x) {
    for (size_t k = 0; k < groups.size(); ++k)
      if (group_nodes_[groups[k]].contains(x)) return static_cast<int>(k);
    return -1;
  };
  std::vector<signed char> open(groups.size(), -1);  // -1 unknown
  for (size_t start = 0; start < groups.size(); ++start) {
    std::vector<char> seen(groups.size(), 0);
    std::vector<int> stack = {static_cast<int>(start)};
    seen[start] = 1;
    bool reached = false;
    while (!stack.empty() && !reached) {
      int k = stack.back();
      stack.pop_back();
      if (open[k] == 1) reached = true;
      for (int x : group_nodes_[groups[k]]) {
        if (reached) break;
        auto producer = [&](int v) {
          if (reached || v == kNoValue || g_.value(v).producer < 0) return;
          int p = g_.value(v).producer;
          if (!next.covered.contains(p)) {
            reached = true;
            return;
          }
          int j = group_index(p);
          if (j >= 0 && !seen[j]) seen[j] = 1, stack.push_back(j);
        };
        for (int v : g_.node(x).inputs) producer(v);
        for (int v : g_.node(x).implicit_inputs) producer(v);
      }
    }
    open[start] = reached ? 1 : 0;
    if (reached) next.open.push_back(groups[start]);
  }
  std::sort(next.open.begin(), next.open.end());
  if (options_.transition) {
    for (const BoundaryNode& b : f.boundary)
      if (next_to_uncovered(b.node, next.covered)) next.boundary.push_back(b);
    for (int x : candidates_[c].nodes)
      if (next_to_uncovered(x, next.covered))
        next.boundary.push_back({x, group_of_[c], candidates_[c].backend});
    std::sort(next.boundary.begin(), next.boundary.end());
  }
  return next;
}

bool Searcher::next_to_uncovered(int x, const NodeSet& covered) const {
  bool found = false;
  for_each_edge_into(g_, x, [&](int, int p, int) { found |= !covered.contains(p); });
  for (int v : g_.node(x).outputs) {
    if (v == kNoValue) continue;
    for (int q : g_.value(v).consumers) found |= !covered.contains(q);
  }
  return found;
}

// The transitions candidate c pays against the covered nodes (all on f's boundary), once per
// tensor and consuming partition, as plan_transition_seconds counts them: each tensor coming in
// from another backend, and each going out to a covered partition on another backend.
double Searcher::crossing_cost(const Frontier& f, int c) const {
  if (!options_.transition || f.boundary.empty()) return 0;
  const Backend* b = candidates_[c].backend;
  auto covered_at = [&](int x) -> const BoundaryNode* {
    auto it = std::lower_bound(f.boundary.begin(), f.boundary.end(), BoundaryNode{x, -1, nullptr});
    return it != f.boundary.end() && it->node == x ? &*it : nullptr;
  };
  // (tensor, consuming group or -1 for c) -> (from, to)
  std::map<std::pair<int, int>, std::pair<const Backend*, const Backend*>> crossings;
  for (int x : candidates_[c].nodes) {
    for_each_edge_into(g_, x, [&](int v, int p, int) {
      const BoundaryNode* from = covered_at(p);
      if (from && from->backend != b) crossings[{v, -1}] = {from->backend, b};
    });
    for (int v : g_.node(x).outputs) {
      if (v == kNoValue) continue;
      for (int q : g_.value(v).consumers) {
        const BoundaryNode* to = covered_at(q);
        if (to && to->backend != b) crossings[{v, to->group}] = {b, to->backend};
      }
    }
  }
  double seconds = 0;
  for (const auto& [key, hop] : crossings) seconds += options_.transition(hop.first, hop.second);
  return seconds;
}

void Searcher::report(bool merging) {
  if (!options_.progress) return;
  progress_.candidates_costed = static_cast<int64_t>(evaluated_.size());
  progress_.num_nodes = n_;
  progress_.merging = merging;
  progress_.elapsed_seconds = std::chrono::duration<double>(Clock::now() - start_).count();
  options_.progress(progress_);
}

// Completes f with the cheapest (per node) already-measured candidates that keep the plan valid,
// falling back to reference singletons; measures nothing.
void Searcher::greedy_complete(Frontier f, std::vector<int>& chosen) {
  while (f.covered.count() < n_) {
    int u = (NodeSet::all(n_) - f.covered).first();
    int best = -1, host = -1;
    double best_rate = kInfinity;
    for (int c : by_first_[u]) {
      const Candidate& cand = candidates_[c];
      if (cand.nodes.intersects(f.covered)) continue;
      if (cand.backend == &ref_backend() && cand.nodes.count() == 1) host = c;
      const std::optional<Cost>& cost = costs_[c];
      if (!cost || !cost->valid || !convex(c) || closes_cycle(f, cand.nodes)) continue;
      double rate = cost->seconds / cand.nodes.count();
      if (rate < best_rate) best_rate = rate, best = c;
    }
    if (best < 0) best = host;  // a singleton never closes a cycle: it already was a vertex
    if (!costs_[best]) costs_[best] = Cost::unmeasured("not measured before the deadline");
    chosen.push_back(best);
    f = extend(f, best);
  }
}

Result<SearchResult> Searcher::run() {
  for (const Candidate& c : candidates_)
    if (c.nodes.capacity() != n_ || !c.backend)
      return invalid_argument("a candidate of another graph or without backend");
  SearchResult result;
  std::vector<State> states;
  std::unordered_map<Frontier, int, FrontierHash> state_of;
  using Item = std::pair<double, int>;  // (dist + estimate, state); ties go to the older state
  std::priority_queue<Item, std::vector<Item>, std::greater<>> queue;
  // Exact: states are whole frontiers. Otherwise (large graphs) one state per covered set, keeping
  // the frontier of its cheapest path (Collage's state): far fewer states, plans still valid.
  auto key_of = [&](const Frontier& f) { return options_.exact ? f : Frontier{f.covered, {}, {}}; };
  // A*: with an estimate of the rest, states go by cost + estimate (0 without one: Dijkstra).
  auto estimate = [&](const NodeSet& covered) {
    return options_.remaining && covered.count() < n_ ? options_.remaining(covered) : 0.0;
  };
  auto add_state = [&](Frontier f, double dist, int parent, int cand) {
    int id = static_cast<int>(states.size());
    double h = estimate(f.covered);
    state_of.emplace(key_of(f), id);
    states.push_back(State{std::move(f), dist, h, parent, cand, false});
    queue.push({dist + h, id});
    return id;
  };
  add_state(Frontier{NodeSet(n_), {}, {}}, 0.0, -1, -1);
  double best = options_.upper_bound;  // the best complete plan found so far (or the bound)
  // What a path must (be estimated to) beat to be pursued: plans within `tolerance` of the best
  // are not worth their measurements.
  auto target = [&] { return best * (1 - options_.tolerance); };
  int best_state = -1, most_advanced = 0;
  bool finished = false;
  report(false);
  bool stopped = false;
  while (!queue.empty()) {
    if (past_deadline()) {
      stopped = true;
      break;
    }
    auto [f, s] = queue.top();
    queue.pop();
    if (states[s].settled || f > states[s].dist + states[s].estimate) continue;
    states[s].settled = true;
    const double d = states[s].dist;
    const Frontier here = states[s].frontier;
    if (here.covered.count() == n_) {
      finished = true;
      best_state = s;
      break;
    }
    if (d + states[s].estimate >= target()) continue;  // cannot beat the best plan (as estimated)
    int covered = here.covered.count();
    if (covered > progress_.nodes_covered) {
      progress_.nodes_covered = covered;
      most_advanced = s;
    }
    ++progress_.states_expanded;
    if (++since_report_ >= options_.progress_every) since_report_ = 0, report(false);
    const int u = (NodeSet::all(n_) - here.covered).first();
    for (int c : by_first_[u]) {
      if (d + states[s].estimate >= target() || past_deadline()) break;  // nothing here can beat it
      const Candidate& cand = candidates_[c];
      if (cand.nodes.intersects(here.covered) || !convex(c)) continue;
      if (closes_cycle(here, cand.nodes)) continue;
      Frontier next = extend(here, c);
      const Frontier key = key_of(next);
      auto known = state_of.find(key);
      if (known != state_of.end() && states[known->second].dist <= d)
        continue;  // cannot improve it
      if (options_.optimistic_cost && !costs_[c] &&
          d + options_.optimistic_cost(cand) + estimate(next.covered) >= target())
        continue;  // not worth measuring against the best plan
      const std::optional<Cost>& cost = cost_of(c);
      if (!cost->valid) continue;
      double nd = d + cost->seconds + crossing_cost(here, c);
      if (nd + estimate(next.covered) >= target()) continue;
      known = state_of.find(key);  // (the estimator call does not touch states; keep it simple)
      int id;
      if (known == state_of.end()) {
        bool complete = next.covered.count() == n_;
        id = add_state(std::move(next), nd, s, c);
        if (complete) best = nd, best_state = id;
      } else {
        if (nd >= states[known->second].dist) continue;
        id = known->second;
        states[id].dist = nd, states[id].parent = s, states[id].candidate = c;
        states[id].frontier = std::move(next);
        queue.push({nd + states[id].estimate, id});
        if (states[id].frontier.covered.count() == n_) best = nd, best_state = id;
      }
    }
    if (best < kInfinity) progress_.best_seconds = best;
  }
  result.states_expanded = progress_.states_expanded;
  // Every state left could not beat the best plan: the search is over, as if it had been popped.
  if (!stopped && best_state >= 0) finished = true;
  // Searched to the end without a plan under the bound.
  result.above_bound = !stopped && best_state < 0 && options_.upper_bound < kInfinity;
  result.finished = finished || result.above_bound;
  result.optimal = finished && options_.exact;

  std::vector<int> chosen;
  int from = best_state >= 0 ? best_state : most_advanced;
  for (int s = from; states[s].parent >= 0; s = states[s].parent)
    chosen.push_back(states[s].candidate);
  std::reverse(chosen.begin(), chosen.end());
  if (best_state < 0) {
    result.fallback = true;
    greedy_complete(states[from].frontier, chosen);
  }
  std::vector<PlannedPartition> parts;
  for (int c : chosen) parts.push_back({candidates_[c], *costs_[c]});
  if (options_.merge) parts = merge(std::move(parts), result.merges);

  std::vector<NodeSet> sets;
  for (const PlannedPartition& p : parts) sets.push_back(p.candidate.nodes);
  TESSERA_ASSIGN_OR_RETURN(std::vector<int> order, partition_order(g_, sets));
  for (int i : order) {
    result.seconds += parts[i].cost.valid ? parts[i].cost.seconds : 0;
    result.partitions.push_back(std::move(parts[i]));
  }
  if (options_.transition) {
    result.transition_seconds = plan_transition_seconds(g_, result.partitions, options_.transition);
    result.seconds += result.transition_seconds;
  }
  result.evaluated = std::move(evaluated_);
  progress_.best_seconds = result.seconds;
  report(false);
  return result;
}

// Merges touching partitions of one backend while that makes the plan cheaper, best gain first.
std::vector<PlannedPartition> Searcher::merge(std::vector<PlannedPartition> parts, int& merges) {
  std::map<std::pair<const Backend*, std::vector<int>>, Cost> merged_costs;
  auto usable = [&](const PlannedPartition& p) {
    return p.cost.valid && p.candidate.backend != &ref_backend();
  };
  while (true) {
    report(true);
    std::vector<int> part_of(n_, -1);
    for (size_t i = 0; i < parts.size(); ++i)
      for (int m : parts[i].candidate.nodes) part_of[m] = static_cast<int>(i);
    double best_gain = 0;
    int best_i = -1, best_j = -1;
    Cost best_cost;
    for (size_t i = 0; i < parts.size(); ++i) {
      if (!usable(parts[i])) continue;
      const Backend* b = parts[i].candidate.backend;
      std::vector<int> neighbours;  // partitions i feeds (each pair is looked at from its producer)
      for (int m : parts[i].candidate.nodes)
        for (int v : g_.node(m).outputs) {
          if (v == kNoValue) continue;
          for (int c : g_.value(v).consumers) {
            int j = part_of[c];
            if (j >= 0 && j != static_cast<int>(i) &&
                std::find(neighbours.begin(), neighbours.end(), j) == neighbours.end())
              neighbours.push_back(j);
          }
        }
      std::sort(neighbours.begin(), neighbours.end());
      for (int j : neighbours) {
        if (parts[j].candidate.backend != b || !usable(parts[j])) continue;
        NodeSet nodes = parts[i].candidate.nodes | parts[j].candidate.nodes;
        if (!reach_.is_convex(nodes)) continue;
        SubGraph sg(g_, nodes);
        if (sg.depth() > b->max_fusion_depth() || !b->accepts(sg).ok()) continue;
        std::vector<NodeSet> sets;
        for (size_t k = 0; k < parts.size(); ++k)
          if (static_cast<int>(k) != j)
            sets.push_back(static_cast<int>(k) == static_cast<int>(i) ? nodes
                                                                      : parts[k].candidate.nodes);
        if (!jointly_executable(g_, sets)) continue;
        auto key = std::make_pair(b, nodes.to_vector());
        auto it = merged_costs.find(key);
        if (it == merged_costs.end()) {
          if (past_deadline()) continue;
          Candidate merged{nodes, b, "merge"};
          Cost cost = estimator_.cost(merged);
          evaluated_.push_back({merged, cost});
          it = merged_costs.emplace(std::move(key), cost).first;
        }
        const Cost& cost = it->second;
        double gain = parts[i].cost.seconds + parts[j].cost.seconds - cost.seconds;
        if (cost.valid && gain > best_gain)
          best_gain = gain, best_i = static_cast<int>(i), best_j = j, best_cost = cost;
      }
    }
    if (best_i < 0) return parts;
    parts[best_i].candidate.nodes |= parts[best_j].candidate.nodes;
    parts[best_i].candidate.rule_name = "merge";
    parts[best_i].cost = best_cost;
    parts.erase(parts.begin() + best_j);
    ++merges;
  }
}

}  // namespace

double plan_transition_seconds(const Graph& g, const std::vector<PlannedPartition>& parts,
                               const std::function<double(const Backend*, const Backend*)>& transition) {
  std::vector<int> part_of(g.num_nodes(), -1);
  for (size_t i = 0; i < parts.size(); ++i)
    for (int x : parts[i].candidate.nodes) part_of[x] = static_cast<int>(i);
  std::set<std::pair<int, int>> crossings;  // (tensor, consuming partition)
  double seconds = 0;
  for (int x = 0; x < g.num_nodes(); ++x)
    for_each_edge_into(g, x, [&](int v, int p, int q) {
      if (part_of[p] < 0 || part_of[q] < 0) return;
      const Backend* from = parts[part_of[p]].candidate.backend;
      const Backend* to = parts[part_of[q]].candidate.backend;
      if (from != to && crossings.insert({v, part_of[q]}).second) seconds += transition(from, to);
    });
  return seconds;
}

Result<SearchResult> search_plan(const Graph& g, const std::vector<Candidate>& candidates,
                                 CostEstimator& estimator, const SearchOptions& options) {
  Searcher searcher(g, candidates, estimator, options);
  return searcher.run();
}

}  // namespace tessera
