// The search: the cheapest covering of a graph by disjoint candidates that can run one after
// another (Collage's shortest path, with its gaps closed).
//
// Dijkstra over search states with a priority queue. A state is the set of nodes covered so far;
// from a state, only candidates containing its first uncovered node are tried (each covering is
// reached by exactly one path, so commutative duplicates never arise). Costs are asked of the
// estimator lazily, when a candidate is first relaxed, and a candidate is not measured at all
// when the path to it already costs as much as the best known complete plan.
//
// Joint executability: the chosen partitions, contracted, must form a DAG (contraction.h). A
// candidate that would close a cycle with the partitions already chosen (uncovered nodes counting
// as single vertices) is skipped; such a cycle survives any completion, so nothing valid is lost.
// Whether a later candidate closes a cycle depends on how the covered nodes were grouped, though,
// not only on which are covered (contracting a group creates paths between its nodes). A state is
// therefore the covered set *and* the "open" groups: the chosen partitions that some uncovered
// node reaches in the contracted graph. A closed group can never lie on a future cycle, and the
// open ones decide every future cycle, so paths with equal states have the same valid
// completions and Dijkstra over these states stays exact.
//
// Anytime: at the deadline the search returns the best complete plan it has found, or completes
// the most advanced state greedily with already-measured candidates and reference singletons.
// Finally, touching partitions of the same backend are merged where the backend accepts the
// union, it is convex, the plan stays a DAG and the merged kernel costs less than the two.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <vector>

#include "partition/candidate.h"
#include "partition/cost_estimator.h"

namespace tessera {

struct SearchProgress {
  int64_t states_expanded = 0;
  int64_t candidates_costed = 0;  // distinct candidates the estimator was asked about
  int nodes_covered = 0;          // the most nodes covered by any state expanded so far
  int num_nodes = 0;
  double best_seconds = -1;  // the best complete plan so far; -1 while there is none
  double elapsed_seconds = 0;
  bool merging = false;  // the final merge phase
};

struct SearchOptions {
  std::optional<std::chrono::steady_clock::time_point> deadline;
  // Asked as often as the deadline: returning true ends the search the same way (Ctrl-C, tests).
  std::function<bool()> stop;
  // Called every `progress_every` expansions, after each new cost, and once at the end.
  std::function<void(const SearchProgress&)> progress;
  int progress_every = 256;
  bool merge = true;  // merge touching partitions of one backend at the end
  // Exact: a state is the covered set and how its boundary was grouped (see above), and the
  // plan is optimal over the candidates. Otherwise a state is the covered set alone, keeping the
  // grouping of its cheapest path (Collage's search): plans are still valid (every step is
  // checked against that grouping) but may miss a cheaper plan; for large graphs, where exact
  // states multiply.
  bool exact = true;
  // An estimate of what covering the nodes outside `covered` costs at least (A*): states are
  // expanded by cost + estimate, and neither expanded nor measured when that reaches the best
  // plan's cost. An estimate above the true cost can miss the optimum but measures far fewer
  // candidates. Unset: 0 (Dijkstra).
  std::function<double(const NodeSet& covered)> remaining;
  // A cost a candidate is not expected to beat (a fraction of what its nodes took in a
  // single-backend run, say): a candidate whose optimistic cost cannot lead to a better plan is
  // not measured at all. Unset: every candidate that could win is measured.
  std::function<double(const Candidate& c)> optimistic_cost;
  // Paths are pursued only while they may beat the best plan by more than this fraction (0: any
  // improvement). Above 0 the plan is within that fraction of the best over the candidates.
  double tolerance = 0;
  // Only plans cheaper than this are looked for (another search's result, say).
  double upper_bound = std::numeric_limits<double>::infinity();
  // The cost of handing a tensor from a partition on `from` to one on `to` (called only for
  // different backends); charged once per tensor and consuming backend where the plan crosses.
  // Unset: transitions are free (Collage's model). With it, a state also remembers the backend
  // of every covered node next to an uncovered one, which decides its future transitions.
  std::function<double(const Backend* from, const Backend* to)> transition;
};

struct PlannedPartition {
  Candidate candidate;
  Cost cost;
};

struct SearchResult {
  // Disjoint, covering every node, in an order they can run in. After a fallback, some may carry
  // a cost that is not valid (never measured, or refused by the estimator).
  std::vector<PlannedPartition> partitions;
  double seconds = 0;     // predicted: the sum of the valid partition costs and the transitions
  double transition_seconds = 0;  // the part of `seconds` spent crossing between backends
  bool finished = false;  // the search ended before the deadline
  bool optimal = false;   // an exact search finished (optimal over the candidates)
  bool fallback = false;  // no complete plan by the deadline: completed greedily
  // The search ended without a plan under options.upper_bound (partitions: a greedy completion).
  bool above_bound = false;
  int merges = 0;
  int64_t states_expanded = 0;
  // Every candidate the estimator was asked about, in the order asked (merged groups included),
  // for reports: the alternatives that lost and the invalid ones with their reasons.
  std::vector<PlannedPartition> evaluated;
};

// `candidates` must be of `g`; the reference backend's singletons are added for nodes without a
// candidate, so a plan always exists (with unmeasured costs if the estimator refuses them).
// The transitions of a plan (disjoint partitions of g): once per tensor and consuming backend
// where a tensor crosses from one backend to another.
double plan_transition_seconds(const Graph& g, const std::vector<PlannedPartition>& parts,
                               const std::function<double(const Backend*, const Backend*)>& transition);

Result<SearchResult> search_plan(const Graph& g, const std::vector<Candidate>& candidates,
                                 CostEstimator& estimator, const SearchOptions& options = {});

}  // namespace tessera
