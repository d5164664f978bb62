// The optimizer behind `tessera optimize`: candidates of every backend, measured on the machine
// (through the persistent cost database), the cheapest covering by shortest-path search, then
// the plan measured end to end.
//
//   1. one reference run keeps every intermediate tensor (the measuring estimator's inputs);
//   2. candidates_for(): each available backend's partition rules;
//   3. search_plan() with a CachedEstimator over a MeasuringEstimator, transitions between
//      backends measured per pair (and cached too), within the wall-clock budget (anytime);
//   4. the plan is run end to end, partition by partition timed, and compared with the prediction.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/subgraph.h"
#include "partition/plan.h"
#include "partition/rules.h"
#include "partition/search.h"
#include "runtime/measuring_estimator.h"
#include "runtime/placement.h"

namespace tessera {

class TimingRecords;

struct OptimizeOptions {
  int threads = 1;
  std::vector<std::string> backends;  // names to consider; empty: every available backend
  double budget_seconds = 600;        // wall clock for the whole optimization (the search: 95% of it)
  std::string cost_db;                // "" : CostDatabase::default_path()
  bool use_cost_db = true;
  // Whole-model timings (contenders end to end, the refinement's paired timings, the finals) are
  // kept in the cost database too and recalled by a later run; false times them all again.
  bool recall_timings = true;
  std::map<std::string, Tensor> inputs;  // the rest are random (seeded)
  uint64_t seed = 1;
  RuleOptions rules;
  MeasureOptions measure;  // threads are overridden by `threads`
  bool transitions = true;  // measure and charge transitions between backends
  // With backends of two or more own thread runtimes (OpenMP, ...), each runtime is
  // searched alone with the tessera-thread backends. Mixing them in one plan is searched too
  // only when this is set: their idle threads spin on the same cores, and on a 2-core machine a
  // mixed det plan predicted at 28 ms from its parts measured 345 ms end to end, after a search
  // that took most of the budget.
  bool mix_runtimes = false;
  // Each backend's whole-model placement is timed end to end after the search and becomes the
  // plan when it runs faster than the searched plans.
  bool placements = true;
  // Then the fastest placement (and the next ones measured within `finalist_factor` of it, up to
  // `max_refine_bases` in all)
  // is refined by moves to other backends: classes (the groups another backend's placement forms
  // alike, two or more, moved together: refine_max_class_tries of them, first), single nodes and
  // regions (a node, everything downstream of it, and the producers only they consume) expected to
  // run faster there,
  // each kept only when the whole model runs at least `refine_min_gain` faster end to end (at most
  // `refine_max_tries` moves considered per base, each timed end to end or recalled from the cost database
  // as lost before; moves expected to save under `refine_min_saving` of the placement's time are
  // not tried). 0 tries: no refinement.
  // A placement whose nodes' expected times add up to more than this many times the best plan so far
  // is not timed (nor compared again at the end).
  double hopeless_factor = 3;
  // The contenders measured within this factor of the fastest (at most `max_finalists`) are timed
  // once more side by side, taking turns, and the fastest there becomes the plan. Contenders timed
  // one after another, seconds or minutes apart, are otherwise chosen by when they ran: on a shared
  // machine the same det placement measured 33 ms in one phase and 61 ms in another. (Also how far
  // the second placement may fall behind the fastest and still be refined.) A searched plan is near
  // when its prediction is: its one timing alone may have caught a slow spell (rec's oneDNN-native-
  // XNNPACK plan: 8.3 ms alone in one run, 4.9 ms side by side in another, against oneDNN's 5.4).
  double finalist_factor = 1.3;
  int max_finalists = 4;
  int refine_max_tries = 24;
  // Placements refined: the fastest and those measured within finalist_factor of it, at most this many.
  int max_refine_bases = 2;
  // Class moves (the groups another backend's placement forms alike, moved together) tried per
  // base before the others, whatever their expected saving.
  int refine_max_class_tries = 4;
  double refine_min_gain = 0.015;
  double refine_min_saving = 0.002;
  // A region holding more than this share of the base placement's time is not a move: moving most
  // of the model is the other backend's own placement, which is timed (and refined) on its own.
  // (det: regions of 309-329 of 330 nodes, expected to save 9 ms from per-node times, saved 0-0.8
  // ms end to end and, kept first, left no room for the head region that saved 8.)
  double refine_max_region_share = 0.5;
  int max_exact_nodes = 40;  // larger graphs are searched with one state per covered set
  // Larger graphs are also searched as A*. Each backend first runs every node it supports as its
  // own kernel, and its fused single-backend placement, in whole-model runs; the single-node times
  // scaled by the fused/unfused ratio are each node's expected time on that backend. The rest of
  // a plan is estimated at this fraction of the cheapest expected time per node ...
  double estimate_fraction = 0.85;
  // ... and a candidate is not measured when even this fraction of its nodes' expected time on
  // its backend cannot lead to a better plan.
  double optimistic_fraction = 0.7;
  double tolerance = 0.02;  // large graphs: improvements under 2% are not pursued
  std::string model_name;   // recorded in the plan
  std::map<std::string, std::vector<int64_t>> input_shapes;  // recorded in the plan
  // Called often from the search (phase "search", "merge"), and at phase changes ("reference",
  // "candidates", "end-to-end").
  std::function<void(const std::string& phase, const SearchProgress&)> progress;
  std::function<bool()> stop;  // true ends the search early (as the budget does)
};

// One move the refinement timed: the placement so far and the placement with the move, in turns.
struct TriedMove {
  std::string to;                 // the backend the nodes went to
  std::string label;              // "Conv+Relu" or "Concat and 10 nodes downstream"
  int nodes = 0;
  double expected_saving = 0;     // from the per-node times
  double before_seconds = -1, after_seconds = -1;  // -1: could not be built or run
  bool kept = false;
};

// A partition of the plan as it ran inside the whole plan.
struct PartitionTiming {
  double stored_seconds = -1;    // the cost the search used (from the cost database or this run)
  // Measured alone once more right after the end-to-end runs (-1: could not be): the cost
  // database may hold a time taken while the machine was busier or quieter than now.
  double isolated_seconds = -1;
  double in_plan_seconds = 0;  // median over the end-to-end runs
};

// One search over a set of backends, its plan measured end to end. Backends whose kernels run on
// their own thread runtimes (Backend::thread_runtime) interfere when mixed, which the additive
// cost model cannot see; so with two or more such runtimes available, the optimizer searches once
// per runtime (that runtime's backends with the tessera-thread ones) and once with everything,
// and keeps the variant that measures fastest end to end.
struct PlanVariant {
  std::string name;  // "openmp+tessera", "all"; "placement:onednn" for a backend's own placement
  std::vector<std::string> backends;
  double predicted_seconds = 0;  // -1: not predicted (a placement that lost)
  double measured_seconds = -1;  // -1: it could not be run
  // The finalists (contenders measured near the fastest) are timed once more side by side, taking
  // turns; the fastest there is chosen. -1: not a finalist.
  double final_seconds = -1;
  // The placements measured within twice the fastest are timed again side by side to choose the
  // ones refined (OptimizeOptions::max_refine_bases); -1: not among them.
  double base_seconds = -1;
  // A searched set pursues only plans predicted under this: an earlier set's best, or the fastest
  // end-to-end time of its backends' placements (large graphs); -1: no bound.
  double bound_seconds = -1;
  // A placement's measured time is one whole-model timing of it, which the plan's prediction is
  // made of: true when that timing came from the cost database (an earlier run).
  bool timing_recalled = false;
  // How its rank-4 tensors pass between steps: placements and their refinements are timed in
  // both layouts (searched sets in row-major only).
  TensorLayout layout = TensorLayout::kRowMajor;
  std::string error;
};

struct OptimizeResult {
  Plan plan;
  SearchResult search;  // of the chosen variant
  std::vector<PlanVariant> variants;
  int chosen_variant = 0;
  std::vector<PartitionTiming> timings;  // by plan partition
  std::vector<TriedMove> refinement_moves;  // the refinement's tries (none without one)
  int num_candidates = 0;
  int costed = 0;           // candidates given a cost, summed over the search variants
  int states_expanded = 0;  // search states, over every search variant
  int measured = 0;    // candidates compiled and timed in this run
  int cache_hits = 0;  // costs found in the cost database
  // Whole-model timings (contenders end to end, paired and side-by-side timings) recalled from
  // the cost database, and taken in this run.
  int timings_recalled = 0, timings_taken = 0;
  int db_errors = 0;
  std::string cost_db_path;  // "" without a database
  std::string db_warning;    // the database was unusable or moved aside
  double measured_noise = 0;
  // The chosen plan is a placement whose recalled timing was over 15% off this run's end-to-end
  // time: it was timed again (and stored in place of the old one), and the plan predicts from
  // that. This is the old prediction; -1 when nothing was timed again.
  double stale_predicted_seconds = -1;
  double elapsed_seconds = 0;
  bool out_of_budget = false;  // the search stopped at the budget (the plan may not be optimal)
};

Result<OptimizeResult> optimize_graph(const Graph& g, const OptimizeOptions& options);

// The fastest single-backend placement, refined by moves judged end to end: the groups another
// backend's own placement forms alike (one per repeated block: cls's squeeze-excitation tails) leave
// together for that backend; a node that another
// backend is expected to run faster alone (its per-node estimates) leaves the placement's groups for
// a kernel of its own there; a region (a node and everything downstream of it, grown upstream by the
// producers only the region consumes) that another backend runs whole leaves for that backend's own
// grouping of it. A move stays only if the whole model then runs faster. Where the additive model
// misjudges (a moved node breaks a fused kernel, converts layouts at both new boundaries, wakes
// other threads), the end-to-end time does not. Backends of another thread runtime are not moved
// to unless `mix_runtimes`.
struct Refinement {
  std::vector<Partition> partitions;  // the placement with the kept moves
  bool improved = false;              // a move was kept
  int moves = 0, tried = 0;
  std::vector<TriedMove> log;         // in the order tried
};
// Outcomes of moves tried before (the optimizer keeps them in the cost database): a move found
// losing is not tried again. `recall` answers true (kept), false (lost) or nullopt (never tried).
// A move is the set of nodes that leaves the placement for `to`.
struct MoveMemory {
  std::function<std::optional<bool>(const NodeSet& nodes, const Backend& to)> recall;
  std::function<void(const NodeSet& nodes, const Backend& to, bool kept)> remember;
};
// The region of a refinement move (see refine_placement): node n and everything downstream of it,
// when `theirs` (the other backend's expected time per node, infinity where it cannot run one)
// covers all of it, grown upstream by producers whose consumers are all inside, that read fewer
// bytes from outside than they write (so the boundary shrinks), and whose expected extra time on the
// other backend (`theirs` - `mine`) is below what converting the bytes they save at the boundary
// would cost (at 10 GB/s). Empty when the other backend cannot run it.
NodeSet downstream_region(const Graph& g, const Reachability& reach, int n, const std::vector<double>& mine,
                          const std::vector<double>& theirs);
// `node_seconds`: each backend's expected time per node (infinity where it cannot run the node);
// moves are tried in the order of their expected saving, within `deadline` and options.refine_*.
// With `records`, the paired timings go through the cost database (timing_records.h).
Refinement refine_placement(const Graph& g, const Backend& base, const std::vector<const Backend*>& backends,
                            const std::map<const Backend*, std::vector<double>>& node_seconds,
                            const std::vector<Tensor>& inputs, const MeasureOptions& measure,
                            const OptimizeOptions& options, std::chrono::steady_clock::time_point deadline,
                            const MoveMemory* memory = nullptr, TimingRecords* records = nullptr);

// A whole-model placement timed end to end: a plan, or one backend (`tessera run --backend`).
struct PlacementTiming {
  std::string name;  // "plan", "onednn", "ref", ...
  Cost cost;         // invalid (with the reason) if it could not be built or run
};

// Times every available backend's single-backend placement (that backend plus ref for the rest;
// "ref" alone too, unless !with_ref) and `plan` when given, side by side in one process, on the same inputs:
// all compiled first, then taking turns in blocks of runs (options' warm-up, minimum runs and time per placement).
// Seeded random inputs for those not in `inputs`.
// Backends named in `known` are not timed again: their row carries the time given there (a
// placement timed earlier and far slower than the others, say).
std::vector<PlacementTiming> time_placements(const Graph& g, const Plan* plan, const std::map<std::string, Tensor>& inputs,
                                             const MeasureOptions& options, uint64_t seed = 1, bool with_ref = true,
                                             const std::map<std::string, double>& known = {});

// The order in which time_in_turns runs its contenders, apart from what a run is: `run(i)` runs
// contender i once and returns its seconds, or nullopt when it failed (it takes no more turns).
// Every contender runs options.warmup_runs times first. Then they take turns, a short block each
// per round: one untimed run (it pays for the switch from the contender before: another thread
// runtime still spinning, other weights in the caches; left out when the contender's runs take
// kUntimedRunBelowSeconds or more), then timed runs until the block has lasted
// kMinBlockSeconds and kRunsPerBlock times a run, until each contender has
// options.min_runs runs and options.min_total_seconds of them (or options.max_runs). Short
// blocks matter on a shared machine: its slow spells (seconds, or a neighbour's on-off cycle)
// then fall on every contender alike instead of on whichever had its turn. (Blocks of 50 ms,
// rounds of 200 ms and more, once measured two identical placements of the cls model 2.1x
// apart.) Returns each contender's timed runs.
constexpr double kMinBlockSeconds = 0.005;
constexpr double kRunsPerBlock = 2;
constexpr double kUntimedRunBelowSeconds = 0.05;
std::vector<std::vector<double>> take_turns(int count, const std::function<std::optional<double>(int)>& run,
                                            const MeasureOptions& options);

// Times whole-model placements (each a list of partitions; the rest of the nodes on ref) side by
// side: all compiled first, then taking turns (take_turns), so that a machine whose speed drifts
// shifts them alike. One cost per placement (invalid, with the reason, when it could not be
// built or run); `inputs` by graph input order. layouts[i], where given, is placement i's tensor
// layout (else options.layout).
std::vector<Cost> time_in_turns(const Graph& g, const std::vector<Result<std::vector<Partition>>>& placements,
                                const std::vector<Tensor>& inputs, const MeasureOptions& options,
                                const std::vector<TensorLayout>& layouts = {});

// Runs g with `partitions` end to end on `inputs` (by graph input order): the median and IQR of
// whole runs, and the median time of each executor step (partition or reference node) by the
// partition index it belongs to (`owner` maps node -> index into the result's per-partition list).
struct PlanTiming {
  Cost total;
  std::vector<double> per_owner;
  std::vector<double> per_node;  // each step's median time spread evenly over its nodes
};
// Per node, the index of the partition in `parts` that holds it (-1: a node left to ref): the
// `owner` map time_partitions takes.
std::vector<int> owners_of(const Graph& g, const std::vector<Partition>& parts);
Result<PlanTiming> time_partitions(const Graph& g, const std::vector<Partition>& partitions,
                                   const std::vector<Tensor>& inputs, const MeasureOptions& options,
                                   const std::vector<int>& owner, int num_owners);

}  // namespace tessera
