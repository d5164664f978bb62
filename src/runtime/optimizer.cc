#include "runtime/optimizer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>

#include "ir/subgraph.h"
#include "partition/cached_estimator.h"
#include "partition/cost_db.h"
#include "partition/structural_hash.h"
#include "runtime/buffer_pool.h"
#include "runtime/executor.h"
#include "runtime/timing_records.h"

namespace tessera {

using Clock = std::chrono::steady_clock;

namespace {

Result<std::vector<const Backend*>> chosen_backends(const std::vector<std::string>& names) {
  std::vector<const Backend*> out;
  if (names.empty()) {
    for (const Backend* b : all_backends())
      if (b != &ref_backend() && b->available().ok()) out.push_back(b);
    return out;
  }
  for (const std::string& name : names) {
    const Backend* b = find_backend(name);
    if (!b) return invalid_argument("unknown backend '" + name + "' (this build has: " + backend_names() + ")");
    if (Status st = b->available(); !st.ok())
      return Status(st.code(), "backend '" + name + "' is not available: " + st.message());
    if (b != &ref_backend()) out.push_back(b);
  }
  return out;
}

// Transition costs through the cost database: measured once per pair of backends, thread count
// and CPU, then remembered like any candidate's cost.
class TransitionCosts {
 public:
  TransitionCosts(MeasuringEstimator& measuring, CostDatabase* db, int threads)
      : measuring_(measuring), db_(db), threads_(threads), cpu_(cpu_model()) {}

  double operator()(const Backend* from, const Backend* to) {
    if (from == to) return 0;
    auto [it, fresh] = known_.try_emplace({from, to}, 0.0);
    if (!fresh) return it->second;
    // Measured with the pool's loops on the own-thread runtime of either, as plans run them.
    const bool shared_threads = from->region_runner() || to->region_runner();
    CostKey key{"transition", from->name() + "->" + to->name(),
                from->version() + " | " + to->version() + (shared_threads ? " | shared threads" : ""), threads_, cpu_};
    if (db_) {
      auto stored = db_->lookup(key);
      if (stored.ok() && *stored && (*stored)->valid) return it->second = (**stored).seconds;
    }
    double seconds = measuring_.transition_seconds(from, to);
    if (db_) (void)db_->store(key, Cost::of(seconds), "transition " + key.backend);
    return it->second = seconds;
  }

 private:
  MeasuringEstimator& measuring_;
  CostDatabase* db_;
  int threads_;
  std::string cpu_;
  std::map<std::pair<const Backend*, const Backend*>, double> known_;
};

}  // namespace

namespace {

// Costs asked again by a later search variant come from memory, with or without a database.
class MemoEstimator final : public CostEstimator {
 public:
  explicit MemoEstimator(CostEstimator& inner) : inner_(inner) {}
  Cost cost(const Candidate& c) override {
    auto key = std::make_pair(c.backend, c.nodes.to_vector());
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    Cost cost = inner_.cost(c);
    if (cost.measured) memo_.emplace(std::move(key), cost);
    return cost;
  }

 private:
  CostEstimator& inner_;
  std::map<std::pair<const Backend*, std::vector<int>>, Cost> memo_;
};

// The backend sets to search: with backends of their own thread runtimes, first the backends on
// tessera's pool alone (no other runtime's idle threads in the way: a plan from it runs near its
// prediction, and it bounds what the later sets must predict), then each own runtime with them,
// then everything together only when `mix_runtimes` (two or more own runtimes); else everything.
// cls: a plan mixing oneDNN (OpenMP) and tessera-pool kernels predicted at 0.54 ms ran 3.8 ms.
std::vector<std::pair<std::string, std::vector<const Backend*>>> search_variants(
    const std::vector<const Backend*>& backends, bool mix_runtimes) {
  std::vector<const Backend*> shared;
  std::map<std::string, std::vector<const Backend*>> own;
  for (const Backend* b : backends) {
    if (b->thread_runtime() == "tessera") {
      shared.push_back(b);
    } else {
      own[b->thread_runtime()].push_back(b);
    }
  }
  std::vector<std::pair<std::string, std::vector<const Backend*>>> variants;
  if (!own.empty() && !shared.empty()) variants.emplace_back("tessera", shared);
  for (const auto& [runtime, bs] : own) {
    std::vector<const Backend*> v = shared;
    v.insert(v.end(), bs.begin(), bs.end());
    variants.emplace_back(runtime + "+tessera", v);
  }
  if (variants.empty() || (own.size() >= 2 && mix_runtimes)) variants.emplace_back("all", backends);
  return variants;
}

// Per-node times kept in the cost database like costs (one row per node): a second optimization
// then prunes exactly as the first did and asks only for costs the database has. `nodes` are
// the nodes to time; `measure` times them (infinity for the others).
std::vector<double> cached_node_times(CostDatabase* db, const Graph& g, const Backend& b, int threads,
                                      const std::vector<int>& nodes,
                                      const std::function<std::optional<std::vector<double>>()>& measure) {
  const std::string model = graph_hash(g), cpu = cpu_model();
  auto key = [&](int n) {
    return CostKey{"estimate:" + model + ":" + std::to_string(n), b.name(), b.version(), threads, cpu};
  };
  std::vector<double> times(g.num_nodes(), std::numeric_limits<double>::infinity());
  bool stored = db != nullptr;
  for (size_t i = 0; stored && i < nodes.size(); ++i) {
    auto c = db->lookup(key(nodes[i]));
    stored = c.ok() && *c;
    if (stored) times[nodes[i]] = (*c)->seconds;
  }
  if (stored) return times;
  std::optional<std::vector<double>> measured = measure();
  if (!measured) return {};
  for (int n : nodes)
    if (db && std::isfinite((*measured)[n])) (void)db->store(key(n), Cost::of((*measured)[n]), "estimate " + g.node(n).op_type);
  return *measured;
}

// Each backend's expected time per node (for large graphs' A*): it runs every node it supports as
// its own kernel in one whole-model run, and its fused single-backend placement in another; the
// single-node times, scaled by how much faster the fused placement ran than their sum, are what
// its nodes are expected to take. Once per backend (kept in `node_seconds` and the database).
void measure_node_times(const Graph& g, const std::vector<const Backend*>& backends, const std::vector<Tensor>& inputs,
                        const MeasureOptions& measure, CostDatabase* db,
                        std::map<const Backend*, std::vector<double>>& node_seconds,
                        std::map<const Backend*, double>& placement_seconds) {
  std::vector<int> no_owner(g.num_nodes(), -1);
  for (const Backend* b : backends) {
    if (node_seconds.count(b)) continue;
    std::vector<int> supported;
    std::vector<Partition> singles;
    for (int n = 0; n < g.num_nodes(); ++n) {
      if (!b->supports(g, n).ok()) continue;
      supported.push_back(n);
      singles.push_back(Partition{NodeSet::of(g.num_nodes(), {n}), b});
    }
    double placed_total = std::numeric_limits<double>::infinity();
    auto times = cached_node_times(db, g, *b, measure.threads, supported, [&]() -> std::optional<std::vector<double>> {
      auto alone = time_partitions(g, singles, inputs, measure, no_owner, 0);
      auto placed = place_on_backend(g, *b);
      if (!alone.ok() || !placed.ok()) return std::nullopt;  // no estimates for this backend
      auto fused = time_partitions(g, *placed, inputs, measure, no_owner, 0);
      if (fused.ok() && fused->total.valid) placed_total = fused->total.seconds;
      double sum_alone = 0, sum_fused = 0;
      for (const Partition& p : *placed)
        for (int n : p.nodes) sum_alone += alone->per_node[n], sum_fused += fused.ok() ? fused->per_node[n] : 0;
      double scale = sum_alone > 0 && sum_fused > 0 ? std::min(1.0, sum_fused / sum_alone) : 1.0;
      std::vector<double> mine(g.num_nodes(), std::numeric_limits<double>::infinity());
      for (int n : supported) mine[n] = scale * alone->per_node[n];
      return mine;
    });
    if (!times.empty()) node_seconds[b] = std::move(times);
    // The fused placement's end-to-end time, kept beside the node times.
    const CostKey key{"estimate:" + graph_hash(g) + ":placement", b->name(), b->version(), measure.threads,
                      cpu_model()};
    if (std::isfinite(placed_total)) {
      if (db) (void)db->store(key, Cost::of(placed_total), "estimate placement");
    } else if (auto stored = db ? db->lookup(key) : Result<std::optional<Cost>>(std::nullopt);
               stored.ok() && *stored && (*stored)->valid) {
      placed_total = (*stored)->seconds;
    }
    if (std::isfinite(placed_total)) placement_seconds[b] = placed_total;
  }
}

// A*'s estimate of the rest of a plan (the cheapest expected time per node, ref included) and
// each candidate's optimistic cost (a fraction of its nodes' expected time on its backend).
void use_estimates(SearchOptions& so, const Graph& g, const std::vector<const Backend*>& backends,
                   const std::map<const Backend*, std::vector<double>>& node_seconds, const OptimizeOptions& options) {
  std::vector<double> per_node = node_seconds.at(&ref_backend());
  for (const Backend* b : backends)
    if (auto it = node_seconds.find(b); it != node_seconds.end())
      for (int n = 0; n < g.num_nodes(); ++n) per_node[n] = std::min(per_node[n], it->second[n]);
  double total = 0;
  for (double& x : per_node) total += (x *= options.estimate_fraction);
  so.remaining = [per_node, total](const NodeSet& covered) {
    double rest = total;
    for (int n : covered) rest -= per_node[n];
    return std::max(0.0, rest);
  };
  so.tolerance = options.tolerance;
  so.optimistic_cost = [&node_seconds, fraction = options.optimistic_fraction](const Candidate& c) {
    auto it = node_seconds.find(c.backend);
    if (it == node_seconds.end()) return 0.0;
    double sum = 0;
    for (int n : c.nodes) sum += std::isfinite(it->second[n]) ? it->second[n] : 0.0;
    return fraction * sum;
  };
}

// The groups of each single-backend placement (`run --backend`) are candidates too: they fuse
// deeper than the rules' depth cap, and with them the plan can do at least as well as the best
// single backend. With per-node estimates, each placement is also made once more without the
// nodes another backend is expected to run in under half the time (a "carved" placement): its
// big groups then leave those nodes to the other backend, which the rules' small groups could
// not (covering a whole-model group's nodes with small ones loses what the big kernel fuses).
void add_placement_candidates(const Graph& g, const std::vector<const Backend*>& backends,
                              const std::map<const Backend*, std::vector<double>>* node_seconds,
                              std::vector<Candidate>& candidates) {
  auto add = [&](const Backend* b, const NodeSet* excluded, const char* rule) {
    auto placed = place_on_backend(g, *b, excluded);
    if (!placed.ok()) return;
    for (const Partition& p : *placed)
      if (p.nodes.count() > 1) candidates.push_back(Candidate{p.nodes, b, rule});
  };
  for (const Backend* b : backends) {
    add(b, nullptr, "placement");
    if (!node_seconds || !node_seconds->count(b)) continue;
    const std::vector<double>& mine = node_seconds->at(b);
    double total = 0;
    for (double t : mine) total += std::isfinite(t) ? t : 0;
    NodeSet carved(g.num_nodes());
    for (int n = 0; n < g.num_nodes(); ++n) {
      if (!std::isfinite(mine[n])) continue;
      for (const Backend* o : backends) {
        if (o == b || !node_seconds->count(o)) continue;
        const double theirs = node_seconds->at(o)[n];
        if (std::isfinite(theirs) && theirs < 0.5 * mine[n] && mine[n] - theirs > 0.005 * total) carved.add(n);
      }
    }
    if (!carved.empty()) add(b, &carved, "carved placement");
  }
}
using TransitionFn = std::function<double(const Backend*, const Backend*)>;

// The layouts placements are timed in: channels-last too when some rank-4 value passes between
// nodes (a convolutional network) and no node holds a subgraph (control flow runs row-major).
std::vector<TensorLayout> placement_layouts(const Graph& g) {
  bool four_d = false;
  for (int n = 0; n < g.num_nodes(); ++n) {
    const Node& node = g.node(n);
    for (const auto& [key, a] : node.attrs)
      if (a.type == Attribute::Type::kGraph) return {TensorLayout::kRowMajor};
    for (int v : node.outputs)
      four_d = four_d || (v != kNoValue && g.value(v).type.rank() == 4 && !g.value(v).consumers.empty());
  }
  if (!four_d) return {TensorLayout::kRowMajor};
  return {TensorLayout::kRowMajor, TensorLayout::kChannelsLast};
}

// " (channels-last)" for names of variants in that layout.
std::string layout_suffix(TensorLayout layout) {
  return layout == TensorLayout::kChannelsLast ? " (channels-last)" : "";
}

// A placement as a search result: its groups, and every other node on the reference backend, with
// the times they took inside the placement's end-to-end runs (nothing is measured again) and the
// transitions between them.
SearchResult placement_search_result(const Graph& g, const std::vector<Partition>& placed, const PlanTiming& timing,
                                     const TransitionFn& transition, const char* rule) {
  SearchResult out;
  NodeSet covered(g.num_nodes());
  auto add = [&](Candidate c, double seconds) {
    out.seconds += seconds;
    covered |= c.nodes;
    out.partitions.push_back({std::move(c), Cost::of(seconds)});
  };
  for (size_t i = 0; i < placed.size(); ++i)
    add(Candidate{placed[i].nodes, placed[i].backend, rule}, timing.per_owner[i]);
  for (int n = 0; n < g.num_nodes(); ++n)
    if (!covered.contains(n)) add(Candidate{NodeSet::of(g.num_nodes(), {n}), &ref_backend(), "host"}, timing.per_node[n]);
  std::sort(out.partitions.begin(), out.partitions.end(), [](const PlannedPartition& a, const PlannedPartition& b) {
    return a.candidate.nodes.first() < b.candidate.nodes.first();
  });
  if (transition) {
    out.transition_seconds = plan_transition_seconds(g, out.partitions, transition);
    out.seconds += out.transition_seconds;
  }
  out.finished = true;
  return out;
}

// What b's placement should take: its per-node times where it runs a node, ref's elsewhere
// (-1 without per-node times for both).
double expected_placement_seconds(const Graph& g, const Backend& b,
                                  const std::map<const Backend*, std::vector<double>>& node_seconds) {
  auto mine = node_seconds.find(&b), ref = node_seconds.find(&ref_backend());
  if (mine == node_seconds.end() || ref == node_seconds.end()) return -1;
  double sum = 0;
  for (int n = 0; n < g.num_nodes(); ++n) sum += std::isfinite(mine->second[n]) ? mine->second[n] : ref->second[n];
  return sum;
}

// The finals (OptimizeOptions::finalist_factor): the contenders measured near the fastest, the
// chosen one and the refined placements (`refined`: their moves won paired timings, and one slow
// timing must not drop them) always among them, are timed once more side by side, taking
// turns, and the fastest there is chosen.
void choose_in_turns(const Graph& g, const std::vector<std::vector<Partition>>& parts,
                     const std::vector<Tensor>& inputs, const MeasureOptions& measure, const OptimizeOptions& options,
                     const std::vector<int>& refined, TimingRecords& records, OptimizeResult& result,
                     const std::function<void(const std::string&)>& phase) {
  double fastest = result.variants[result.chosen_variant].measured_seconds;
  for (const PlanVariant& v : result.variants)
    if (v.measured_seconds >= 0) fastest = std::min(fastest, v.measured_seconds);
  std::vector<int> finalists = {result.chosen_variant};
  for (int k : refined)
    if (k != result.chosen_variant) finalists.push_back(k);
  // How near a contender is: its timing alone, or its prediction where it has one (a searched plan).
  auto nearness = [&](int k) {
    const PlanVariant& v = result.variants[k];
    return v.predicted_seconds >= 0 && v.measured_seconds >= 0 ? std::min(v.measured_seconds, v.predicted_seconds)
                                                               : v.measured_seconds;
  };
  std::vector<int> others;
  for (size_t k = 0; k < result.variants.size(); ++k) {
    const double t = nearness(static_cast<int>(k));
    if (std::find(finalists.begin(), finalists.end(), static_cast<int>(k)) == finalists.end() && !parts[k].empty() &&
        t >= 0 && t <= options.finalist_factor * fastest)
      others.push_back(static_cast<int>(k));
  }
  std::sort(others.begin(), others.end(), [&](int a, int b) { return nearness(a) < nearness(b); });
  for (int k : others)
    if (static_cast<int>(finalists.size()) < options.max_finalists) finalists.push_back(k);
  if (finalists.size() < 2) return;
  phase("finals");
  std::vector<Result<std::vector<Partition>>> placements;
  for (int k : finalists) placements.emplace_back(parts[k]);
  MeasureOptions side_by_side = measure;
  // About 0.6 s each: with 0.3 s, one finalist caught a slow spell of the machine (det's refined
  // placement: 46.7 ms there, 28.6 ms against native's 34.0 ms in `bench`).
  side_by_side.min_runs = std::max(measure.min_runs, 7);
  side_by_side.min_total_seconds = std::max(measure.min_total_seconds, 0.6);
  std::vector<TensorLayout> layouts;
  for (int k : finalists) layouts.push_back(result.variants[k].layout);
  const std::vector<Cost> costs = records.time_in_turns(placements, inputs, side_by_side, "finals", layouts);
  int chosen = -1;
  for (size_t i = 0; i < finalists.size(); ++i) {
    if (!costs[i].valid) continue;
    result.variants[finalists[i]].final_seconds = costs[i].seconds;
    if (chosen < 0 || costs[i].seconds < result.variants[chosen].final_seconds) chosen = finalists[i];
  }
  if (chosen >= 0) result.chosen_variant = chosen;
}

// A placement's prediction is one whole-model timing of it. Recalled from an earlier run, it may
// come from a slower or faster spell of the machine: `make demo` predicted 49.3 ms from a timing
// stored in a slow spell for a plan that ran 28.7 ms, and would have on every later run. When it
// is more than kStalePrediction off this run's end-to-end time, the placement is timed again, the
// new timing replaces the stored one, and the plan predicts from it.
constexpr double kStalePrediction = 0.15;

void refresh_stale_prediction(const Graph& g, const std::vector<Partition>& placed, const std::vector<Tensor>& inputs,
                              const MeasureOptions& measure, const TransitionFn& transition, TimingRecords& records,
                              OptimizeResult& result) {
  Plan& plan = result.plan;
  const PlanVariant& chosen = result.variants[result.chosen_variant];
  if (!chosen.timing_recalled || placed.empty() ||
      std::fabs(plan.predicted_seconds - plan.measured_seconds) <= kStalePrediction * plan.measured_seconds)
    return;
  MeasureOptions in_layout = measure;
  in_layout.layout = chosen.layout;
  auto fresh = records.time_partitions(placed, inputs, in_layout, owners_of(g, placed), static_cast<int>(placed.size()),
                                       /*retake=*/true);
  if (!fresh.ok()) return;  // the stored prediction stands; the summary shows how far off it is
  const char* rule = chosen.name.rfind("refined:", 0) == 0 ? "refined placement" : "placement";
  SearchResult search = placement_search_result(g, placed, *fresh, transition, rule);
  if (search.partitions.size() != plan.partitions.size()) return;
  result.stale_predicted_seconds = plan.predicted_seconds;
  for (size_t i = 0; i < plan.partitions.size(); ++i) {
    const Cost& c = search.partitions[i].cost;
    plan.partitions[i].seconds = c.seconds;
    plan.partitions[i].noise = c.noise;
  }
  plan.predicted_seconds = search.seconds;
  plan.transition_seconds = search.transition_seconds;
  result.search = std::move(search);
}

}  // namespace

Result<OptimizeResult> optimize_graph(const Graph& g, const OptimizeOptions& options) {
  const auto started = Clock::now();
  // The search and the refinement stop early enough to leave the final measurements (the plan end
  // to end, its partitions alone, the comparison with each backend) inside the budget: 5% of it.
  const auto deadline = started + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(0.95 * std::max(0.0, options.budget_seconds)));
  auto phase = [&](const std::string& name) {
    if (!options.progress) return;
    SearchProgress p;
    p.num_nodes = g.num_nodes();
    p.elapsed_seconds = std::chrono::duration<double>(Clock::now() - started).count();
    options.progress(name, p);
  };
  OptimizeResult result;
  TESSERA_ASSIGN_OR_RETURN(std::vector<const Backend*> backends, chosen_backends(options.backends));

  phase("reference");
  std::vector<double> ref_node_seconds;
  TESSERA_ASSIGN_OR_RETURN(std::vector<Tensor> values, capture_reference_values(g, options.inputs, options.threads,
                                                                                options.seed, &ref_node_seconds));
  // Per backend, the time of each node it ran in a whole-model run (for large graphs' A*).
  std::map<const Backend*, std::vector<double>> node_seconds;
  std::map<const Backend*, double> placement_seconds;  // each backend's placement, end to end (large graphs)
  std::vector<Tensor> inputs;
  for (int v : g.inputs()) inputs.push_back(values[v]);

  MeasureOptions measure = options.measure;
  measure.threads = options.threads;
  MeasuringEstimator measuring(g, values, measure);
  std::unique_ptr<CostDatabase> db;
  if (options.use_cost_db) {
    auto opened = CostDatabase::open(options.cost_db);
    if (opened.ok()) {
      db = std::move(*opened);
      result.cost_db_path = db->path();
      if (!db->moved_aside().empty()) result.db_warning = "a corrupt cost database was moved to " + db->moved_aside();
    } else {
      result.db_warning = "cost database not used: " + opened.status().message();
    }
  }
  std::vector<int> all_nodes(g.num_nodes());
  for (int n = 0; n < g.num_nodes(); ++n) all_nodes[n] = n;
  node_seconds[&ref_backend()] = cached_node_times(db.get(), g, ref_backend(), options.threads, all_nodes,
                                                   [&] { return std::optional(ref_node_seconds); });
  CachedEstimator cached(g, db.get(), measuring, options.threads);
  TimingRecords records(db.get(), g, options.threads, options.recall_timings);
  MemoEstimator memo(cached);
  TransitionCosts transitions(measuring, db.get(), options.threads);

  TransitionFn charged_transition;  // unset: transitions are free
  if (options.transitions) charged_transition = std::ref(transitions);
  auto variants = search_variants(backends, options.mix_runtimes);
  std::vector<SearchResult> searches;
  std::vector<std::vector<Partition>> contender_parts;  // by variant: what ran end to end (empty: nothing)
  double best = -1;  // measured end to end
  double best_predicted = std::numeric_limits<double>::infinity();
  for (size_t k = 0; k < variants.size(); ++k) {
    const auto& [name, variant_backends] = variants[k];
    std::string label = variants.size() > 1 ? " " + std::to_string(k + 1) + "/" + std::to_string(variants.size()) : "";
    SearchOptions so;
    so.exact = g.num_nodes() <= options.max_exact_nodes;
    if (!so.exact) {
      phase("estimates" + label);
      measure_node_times(g, variant_backends, inputs, measure, db.get(), node_seconds, placement_seconds);
      use_estimates(so, g, variant_backends, node_seconds, options);
    }
    phase("candidates" + label);
    std::vector<Candidate> candidates = candidates_for(g, variant_backends, options.rules);
    add_placement_candidates(g, variant_backends, so.exact ? nullptr : &node_seconds, candidates);
    candidates = dedupe_candidates(std::move(candidates));
    result.num_candidates = std::max(result.num_candidates, static_cast<int>(candidates.size()));
    // The first set may use two shares of the search's part of the budget, each later one a share
    // of what is left: later sets reuse the costs the earlier ones measured (det from an empty
    // database: 279 s for the first search, 125 s for the second). With placements, the last 15%
    // are theirs and their refinement's (det: 37 s for placements, refinements and finals).
    const auto search_end = options.placements ? started + (deadline - started) * 17 / 20 : deadline;
    const auto now = Clock::now();
    const int shares_left = static_cast<int>(variants.size() - k) + (k == 0 ? 1 : 0);
    const int my_shares = k == 0 ? 2 : 1;
    so.deadline = now + std::max(Clock::duration::zero(), search_end - now) * my_shares / shares_left;
    so.stop = options.stop;
    so.progress = [&](const SearchProgress& p) {
      if (options.progress) options.progress((p.merging ? "merge" : "search") + label, p);
    };
    so.transition = charged_transition;
    // A later set is searched only for plans predicted cheaper than the earlier sets' best: their
    // best prediction, or their best end-to-end time where that is higher (mixed plans are often
    // predicted too low: det's tessera-pool plan predicted at 25.0 ms ran 39.2 ms, and with that
    // bound the oneDNN set found nothing, though its plans ran faster).
    double bound = best > 0 ? std::max(best_predicted, best) : best_predicted;
    std::string bound_source = "an earlier set's";
    // The placements contend end to end later: with their times from the node-time runs, a plan
    // that cannot beat the fastest of this set's needs no measurements from the start (without a
    // bound nothing is pruned until the first complete plan). On det it did not cut the first
    // search's measurements measurably (4632 XNNPACK candidates against 4643): their optimistic
    // costs are too low to exclude them until a path's cost nears the bound.
    if (options.placements)
      for (const Backend* b : variant_backends)
        if (auto it = placement_seconds.find(b); it != placement_seconds.end() && it->second < bound)
          bound = it->second, bound_source = b->name() + "'s placement";
    so.upper_bound = bound;
    TESSERA_ASSIGN_OR_RETURN(SearchResult search, search_plan(g, candidates, memo, so));

    PlanVariant pv;
    pv.name = name;
    for (const Backend* b : variant_backends) pv.backends.push_back(b->name());
    pv.predicted_seconds = search.seconds;
    if (std::isfinite(bound)) pv.bound_seconds = bound;
    if (search.above_bound) {
      pv.error = "no plan predicted under " + std::to_string(bound * 1e3) + " ms (" + bound_source + ")";
      result.variants.push_back(std::move(pv));
      searches.push_back(std::move(search));
      contender_parts.emplace_back();
      continue;
    }
    // A plan completed greedily at the deadline counts its unmeasured parts as free: no bound.
    if (!search.fallback) best_predicted = std::min(best_predicted, search.seconds);
    std::vector<Partition> partitions;
    for (const PlannedPartition& p : search.partitions) partitions.push_back(Partition{p.candidate.nodes, p.candidate.backend});
    phase("end-to-end" + label);
    std::vector<int> no_owner(g.num_nodes(), -1);
    auto timing = records.time_partitions(partitions, inputs, measure, no_owner, 0);
    if (timing.ok()) {
      pv.measured_seconds = timing->total.seconds;
      if (best < 0 || pv.measured_seconds < best) best = pv.measured_seconds, result.chosen_variant = static_cast<int>(k);
    } else {
      pv.error = timing.status().message();
      partitions.clear();
    }
    result.variants.push_back(std::move(pv));
    searches.push_back(std::move(search));
    contender_parts.push_back(std::move(partitions));
  }
  // Each backend's own placement (`run --backend`) contends end to end too: the parts of a plan
  // interact (caches, idle threads of other runtimes, layout conversions at every boundary), and a
  // plan predicted cheaper from its parts can run slower than one whole-model kernel (det: a
  // searched plan predicted 43 ms ran 55-61 ms; oneDNN's placement, one kernel, 31 ms).
  const Backend* fastest_placement = nullptr;
  double fastest_placement_seconds = -1;
  std::vector<std::pair<const Backend*, int>> timed_placements;  // (backend, its variant), run end to end
  if (options.placements) {
    for (const Backend* b : backends)
    for (TensorLayout layout : placement_layouts(g)) {
      if (options.stop && options.stop()) break;
      auto placed = place_on_backend(g, *b);
      if (!placed.ok() || placed->empty()) continue;
      PlanVariant pv;
      pv.name = "placement:" + b->name() + layout_suffix(layout);
      pv.backends = {b->name(), "ref"};
      pv.layout = layout;
      MeasureOptions in_layout = measure;
      in_layout.layout = layout;
      pv.predicted_seconds = -1;  // not searched
      // Not timed when its nodes' expected times (from whole-model runs) add up to several times
      // the best plan so far.
      if (const double expected = expected_placement_seconds(g, *b, node_seconds);
          best > 0 && expected > options.hopeless_factor * best) {
        pv.predicted_seconds = expected;
        pv.error = "not timed: expected " + std::to_string(expected * 1e3) + " ms from per-node times";
        result.variants.push_back(std::move(pv));
        searches.emplace_back();
        contender_parts.emplace_back();
        continue;
      }
      phase("placement " + b->name() + layout_suffix(layout));
      auto timing =
          records.time_partitions(*placed, inputs, in_layout, owners_of(g, *placed), static_cast<int>(placed->size()));
      SearchResult search;
      std::vector<Partition> parts;
      if (!timing.ok()) {
        pv.error = timing.status().message();
      } else {
        pv.measured_seconds = timing->total.seconds;
        pv.timing_recalled = records.last_recalled();
        search = placement_search_result(g, *placed, *timing, charged_transition, "placement");
        parts = *placed;
        timed_placements.emplace_back(b, static_cast<int>(result.variants.size()));
        if (!fastest_placement || pv.measured_seconds < fastest_placement_seconds) {
          fastest_placement = b, fastest_placement_seconds = pv.measured_seconds;
        }
        if (best < 0 || pv.measured_seconds < best) {
          best = pv.measured_seconds;
          result.chosen_variant = static_cast<int>(result.variants.size());
        }
      }
      result.variants.push_back(std::move(pv));
      searches.push_back(std::move(search));
      contender_parts.push_back(std::move(parts));
    }
  }
  // The refinement starts from the fastest placement and from the next one when it measured near
  // it (finalist_factor; at most max_refine_bases, each with a share of the time): det's oneDNN
  // placements (both layouts) and native's run within a few percent of each other, single timings
  // of any came out 50% slow at times, and only oneDNN's row-major base has the move that wins (the
  // head region to native; with bases chosen from single timings, native's and oneDNN's
  // channels-last ones were refined once and the plan ran 29 ms instead of 24). (Three bases
  // left a cold det run's refinement unfinished at the budget's share: the next run timed 22 more
  // moves, 35 s.)
  // The placements within twice the fastest are timed once more side by side, taking turns, and
  // those times choose: one timing each, taken one after another, let a slow spell of the machine
  // drop det's oneDNN row-major placement (52.7 ms there, 33-35 ms in turns with the others).
  std::vector<std::pair<const Backend*, int>> bases;  // (backend, its placement's variant)
  if (fastest_placement && options.refine_max_tries > 0) {
    std::vector<std::pair<double, std::pair<const Backend*, int>>> near;
    for (const auto& placement : timed_placements) {
      const double t = result.variants[placement.second].measured_seconds;
      if (t <= 2 * fastest_placement_seconds) near.emplace_back(t, placement);
    }
    if (near.size() > 1) {
      std::vector<Result<std::vector<Partition>>> placed;
      std::vector<TensorLayout> layouts;
      for (const auto& [t, placement] : near) {
        placed.emplace_back(contender_parts[placement.second]);
        layouts.push_back(result.variants[placement.second].layout);
      }
      MeasureOptions in_turns = measure;
      in_turns.min_runs = std::max(measure.min_runs, 5);
      in_turns.min_total_seconds = std::max(measure.min_total_seconds, 0.3);
      phase("placements in turns");
      const std::vector<Cost> costs = records.time_in_turns(placed, inputs, in_turns, "bases", layouts);
      for (size_t i = 0; i < near.size(); ++i) {
        near[i].first = costs[i].valid ? costs[i].seconds : HUGE_VAL;
        if (costs[i].valid) result.variants[near[i].second.second].base_seconds = costs[i].seconds;
      }
    }
    std::stable_sort(near.begin(), near.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [t, placement] : near)
      if (static_cast<int>(bases.size()) < options.max_refine_bases && t <= options.finalist_factor * near[0].first)
        bases.push_back(placement);
  }
  std::vector<int> refined_variants;
  for (size_t i = 0; i < bases.size(); ++i) {
    const auto [base, base_variant] = bases[i];
    const TensorLayout layout = result.variants[base_variant].layout;
    MeasureOptions in_layout = measure;
    in_layout.layout = layout;
    if (options.stop && options.stop()) break;
    phase("refine " + base->name() + layout_suffix(layout));
    measure_node_times(g, backends, inputs, measure, db.get(), node_seconds, placement_seconds);
    // Outcomes of moves by model, nodes moved (one node by its index, a region by a hash of its
    // indices), the two backends, thread count and CPU.
    auto move_key = [&](const NodeSet& nodes, const Backend& to) {
      std::string moved = std::to_string(nodes.first());
      if (nodes.count() > 1) {
        const std::vector<int> ids = nodes.to_vector();
        char hex[24];
        snprintf(hex, sizeof hex, "r%016llx",
                 static_cast<unsigned long long>(fnv1a64(ids.data(), ids.size() * sizeof(int))));
        moved = hex;
      }
      if (layout == TensorLayout::kChannelsLast) moved += ":channels-last";
      return CostKey{"move:" + graph_hash(g) + ":" + moved, base->name() + "->" + to.name(),
                     base->version() + " | " + to.version(), options.threads, cpu_model()};
    };
    MoveMemory memory;
    memory.recall = [&](const NodeSet& nodes, const Backend& to) -> std::optional<bool> {
      if (!db) return std::nullopt;
      auto stored = db->lookup(move_key(nodes, to));
      if (!stored.ok() || !*stored) return std::nullopt;
      return (**stored).valid;
    };
    memory.remember = [&](const NodeSet& nodes, const Backend& to, bool kept) {
      if (db) (void)db->store(move_key(nodes, to), kept ? Cost::of(0) : Cost::invalid("lost end to end"), "move");
    };
    const auto now = Clock::now();
    const auto base_deadline = now + std::max(Clock::duration::zero(), deadline - now) / static_cast<int>(bases.size() - i);
    Refinement refined = refine_placement(g, *base, backends, node_seconds, inputs, in_layout, options, base_deadline,
                                          &memory, &records);
    PlanVariant pv;
    pv.name = "refined:" + base->name() + layout_suffix(layout);
    pv.layout = layout;
    pv.predicted_seconds = -1;
    for (const Partition& p : refined.partitions)
      if (std::find(pv.backends.begin(), pv.backends.end(), p.backend->name()) == pv.backends.end())
        pv.backends.push_back(p.backend->name());
    pv.error = std::to_string(refined.moves) + " of " + std::to_string(refined.tried) + " moves kept";
    result.refinement_moves.insert(result.refinement_moves.end(), refined.log.begin(), refined.log.end());
    SearchResult search;
    std::vector<Partition> parts;
    std::optional<PlanTiming> timing;
    if (refined.improved) {
      auto timed = records.time_partitions(refined.partitions, inputs, in_layout, owners_of(g, refined.partitions),
                                           static_cast<int>(refined.partitions.size()));
      if (timed.ok()) timing = std::move(*timed), pv.timing_recalled = records.last_recalled();
      else pv.error = timed.status().message();
    }
    if (timing) {
      pv.measured_seconds = timing->total.seconds;
      // Its moves beat the placement in paired timings; against a searched plan, the end-to-end times decide.
      const bool placement_chosen = result.chosen_variant == base_variant;
      search = placement_search_result(g, refined.partitions, *timing, charged_transition, "refined placement");
      parts = refined.partitions;
      refined_variants.push_back(static_cast<int>(result.variants.size()));
      if (best < 0 || placement_chosen || pv.measured_seconds < best) {
        best = pv.measured_seconds;
        result.chosen_variant = static_cast<int>(result.variants.size());
      }
    }
    result.variants.push_back(std::move(pv));
    searches.push_back(std::move(search));
    contender_parts.push_back(std::move(parts));
  }
  if (best > 0) choose_in_turns(g, contender_parts, inputs, measure, options, refined_variants, records, result, phase);
  if (best < 0) return internal_error("no plan could be run: " + result.variants.back().error);
  for (const SearchResult& search : searches) {
    result.costed += static_cast<int>(search.evaluated.size());
    result.states_expanded += search.states_expanded;
  }
  result.search = std::move(searches[result.chosen_variant]);
  result.measured = measuring.measured();
  result.cache_hits = cached.hits();
  result.db_errors = cached.errors();
  result.out_of_budget = !result.search.finished;

  Plan& plan = result.plan;
  plan.model = options.model_name;
  plan.model_hash = graph_hash(g);
  plan.threads = options.threads;
  plan.cpu = cpu_model();
  plan.input_shapes = options.input_shapes;
  plan.layout = layout_name(result.variants[result.chosen_variant].layout);
  measure.layout = result.variants[result.chosen_variant].layout;  // the chosen plan's, from here on
  plan.predicted_seconds = result.search.seconds;
  plan.transition_seconds = result.search.transition_seconds;
  std::vector<Partition> partitions;
  std::vector<int> owner(g.num_nodes(), -1);
  for (const PlannedPartition& p : result.search.partitions) {
    const Candidate& c = p.candidate;
    PlanPartition pp;
    pp.backend = c.backend->name();
    pp.nodes = c.nodes.to_vector();
    pp.label = SubGraph(g, c.nodes).label();
    pp.rule = c.rule_name;
    if (p.cost.valid) pp.seconds = p.cost.seconds, pp.noise = p.cost.noise;
    plan.backend_versions[pp.backend] = c.backend->version();
    for (int n : pp.nodes) owner[n] = static_cast<int>(plan.partitions.size());
    plan.partitions.push_back(std::move(pp));
    partitions.push_back(Partition{c.nodes, c.backend});
  }

  // The chosen plan once more, partition by partition, for the report.
  phase("end-to-end");
  TESSERA_ASSIGN_OR_RETURN(PlanTiming timing, time_partitions(g, partitions, inputs, measure, owner,
                                                              static_cast<int>(plan.partitions.size())));
  plan.measured_seconds = timing.total.seconds;
  result.measured_noise = timing.total.noise;
  refresh_stale_prediction(g, contender_parts[result.chosen_variant], inputs, measure, charged_transition, records,
                           result);
  // Counted after the refresh, which may take one timing again.
  result.timings_recalled = records.recalled();
  result.timings_taken = records.taken();
  phase("partitions alone");
  // Only a check of the stored costs' drift for the report: shorter runs than a measurement's.
  MeasureOptions again = measure;
  again.min_total_seconds = std::min(measure.min_total_seconds, 0.004);
  MeasuringEstimator measuring_again(g, values, again);
  for (size_t i = 0; i < plan.partitions.size(); ++i) {
    const Cost now = measuring_again.cost(result.search.partitions[i].candidate);
    result.timings.push_back(
        {plan.partitions[i].seconds, now.valid ? now.seconds : -1.0, timing.per_owner[i]});
  }
  result.elapsed_seconds = std::chrono::duration<double>(Clock::now() - started).count();
  return result;
}

}  // namespace tessera
