// Whole-model placements timed end to end (alone, step by step, or several in turns), and the
// refinement of a placement by moves judged that way.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <optional>

#include "ir/subgraph.h"
#include "runtime/buffer_pool.h"
#include "runtime/executor.h"
#include "runtime/optimizer.h"
#include "runtime/timing_records.h"

namespace tessera {

using Clock = std::chrono::steady_clock;

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

std::vector<int> owners_of(const Graph& g, const std::vector<Partition>& parts) {
  std::vector<int> owner(g.num_nodes(), -1);
  for (size_t i = 0; i < parts.size(); ++i)
    for (int n : parts[i].nodes) owner[n] = static_cast<int>(i);
  return owner;
}

Result<PlanTiming> time_partitions(const Graph& g, const std::vector<Partition>& partitions,
                                   const std::vector<Tensor>& inputs, const MeasureOptions& options,
                                   const std::vector<int>& owner, int num_owners) {
  CompileOptions copts;
  copts.threads = options.threads;
  copts.layout = options.layout;
  TESSERA_ASSIGN_OR_RETURN(GraphExecutor exec, GraphExecutor::create(g, partitions, copts));
  BufferPool buffers;
  ThreadPool pool(options.threads);
  std::vector<std::vector<double>> step_times(exec.num_steps());
  auto run = [&]() -> Status {
    RunStats stats;
    stats.profile = true;
    TESSERA_ASSIGN_OR_RETURN(std::vector<Tensor> out, exec.run(inputs, {}, buffers, &pool, stats));
    for (Tensor& t : out) buffers.detach(t);
    for (int s = 0; s < exec.num_steps(); ++s) step_times[s].push_back(stats.step_seconds[s]);
    return Status();
  };
  PlanTiming timing;
  timing.total = time_repeatedly(run, options);
  if (!timing.total.valid) return internal_error("running the plan: " + timing.total.reason);
  timing.per_owner.assign(num_owners, 0.0);
  timing.per_node.assign(g.num_nodes(), 0.0);
  for (int s = 0; s < exec.num_steps(); ++s) {
    std::vector<int> nodes = exec.step_nodes(s);
    double t = median(step_times[s]);
    int o = owner[nodes.front()];
    if (o >= 0) timing.per_owner[o] += t;
    for (int n : nodes) timing.per_node[n] = t / static_cast<double>(nodes.size());
  }
  return timing;
}

std::vector<std::vector<double>> take_turns(int count, const std::function<std::optional<double>(int)>& run,
                                            const MeasureOptions& options) {
  std::vector<std::vector<double>> times(count);
  std::vector<double> total(count, 0.0);
  std::vector<char> failed(count, 0);
  auto once = [&](int i) -> std::optional<double> {
    std::optional<double> seconds = run(i);
    if (!seconds) failed[i] = 1;
    return seconds;
  };
  for (int w = 0; w < options.warmup_runs; ++w)
    for (int i = 0; i < count; ++i)
      if (!failed[i]) once(i);
  auto wants_more = [&](int i) {
    const int n = static_cast<int>(times[i].size());
    return !failed[i] && n < options.max_runs && (n < options.min_runs || total[i] < options.min_total_seconds);
  };
  for (bool more = true; more;) {
    more = false;
    for (int i = 0; i < count; ++i) {
      if (!wants_more(i)) continue;
      more = true;
      // A run that takes long pays for the switch within its noise: no untimed run before it.
      double run_seconds = times[i].empty() ? 0.0 : times[i].back();
      if (times[i].empty() || run_seconds < kUntimedRunBelowSeconds) {
        const std::optional<double> untimed = once(i);
        if (!untimed) continue;
        run_seconds = *untimed;
      }
      const double block_seconds = std::max(kMinBlockSeconds, kRunsPerBlock * run_seconds);
      for (double block = 0; wants_more(i) && block < block_seconds;) {
        const std::optional<double> seconds = once(i);
        if (!seconds) break;
        times[i].push_back(*seconds);
        total[i] += *seconds;
        block += *seconds;
      }
    }
  }
  return times;
}

std::vector<Cost> time_in_turns(const Graph& g, const std::vector<Result<std::vector<Partition>>>& placements,
                                const std::vector<Tensor>& inputs, const MeasureOptions& options,
                                const std::vector<TensorLayout>& layouts) {
  struct Timed {
    std::optional<GraphExecutor> exec;
    BufferPool buffers;
    std::string error;
  };
  std::vector<std::unique_ptr<Timed>> timed;
  for (size_t i = 0; i < placements.size(); ++i) {
    const Result<std::vector<Partition>>& parts = placements[i];
    auto t = std::make_unique<Timed>();
    if (!parts.ok()) {
      t->error = parts.status().message();
    } else {
      CompileOptions copts;
      copts.threads = options.threads;
      copts.layout = i < layouts.size() ? layouts[i] : options.layout;
      auto exec = GraphExecutor::create(g, *parts, copts);
      if (exec.ok()) t->exec.emplace(std::move(*exec));
      else t->error = exec.status().message();
    }
    timed.push_back(std::move(t));
  }
  ThreadPool pool(options.threads);
  auto run_once = [&](int i) -> std::optional<double> {
    Timed& t = *timed[i];
    if (!t.exec) return std::nullopt;
    RunStats stats;
    const auto t0 = Clock::now();
    auto got = t.exec->run(inputs, {}, t.buffers, &pool, stats);
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!got.ok()) {
      t.error = "running the plan: " + got.status().message();
      t.exec.reset();
      return std::nullopt;
    }
    for (Tensor& out_tensor : *got) t.buffers.detach(out_tensor);
    return seconds;
  };
  const std::vector<std::vector<double>> times = take_turns(static_cast<int>(timed.size()), run_once, options);
  std::vector<Cost> out;
  for (size_t i = 0; i < timed.size(); ++i)
    out.push_back(timed[i]->exec ? median_cost(times[i]) : Cost::invalid(timed[i]->error));
  return out;
}

std::vector<PlacementTiming> time_placements(const Graph& g, const Plan* plan, const std::map<std::string, Tensor>& given,
                                             const MeasureOptions& options, uint64_t seed, bool with_ref,
                                             const std::map<std::string, double>& known) {
  std::vector<PlacementTiming> out;
  std::vector<Tensor> inputs;
  for (int v : g.inputs()) {
    const Value& val = g.value(v);
    if (auto it = given.find(val.name); it != given.end()) {
      inputs.push_back(it->second);
    } else if (val.type.is_static()) {
      inputs.push_back(random_input_tensor(val.type.dtype, val.type.static_dims(), seed + inputs.size()));
    } else {
      out.push_back({"inputs", Cost::invalid("input '" + val.name + "' has dynamic dims: give its shape")});
      return out;
    }
  }
  std::vector<std::string> names;
  std::vector<Result<std::vector<Partition>>> placements;
  if (plan) names.push_back("plan"), placements.push_back(place_by_plan(g, *plan));
  for (const Backend* b : all_backends()) {
    if (b == &ref_backend()) {
      if (with_ref) names.push_back("ref"), placements.push_back(std::vector<Partition>{});
    } else if (b->available().ok() && !known.count(b->name())) {
      names.push_back(b->name()), placements.push_back(place_on_backend(g, *b));
    }
  }
  std::vector<TensorLayout> layouts(placements.size(), TensorLayout::kRowMajor);  // `run --backend`'s
  if (plan) {
    auto layout = parse_layout(plan->layout);
    if (!layout.ok()) return {{"plan", Cost::invalid(layout.status().message())}};
    layouts[0] = *layout;
  }
  std::vector<Cost> costs = time_in_turns(g, placements, inputs, options, layouts);
  for (size_t i = 0; i < names.size(); ++i) out.push_back({names[i], costs[i]});
  for (const auto& [name, seconds] : known) out.push_back({name, Cost::of(seconds)});
  return out;
}

namespace {
// Bytes of a value of static shape (0 for a constant, which each side holds anyway).
double value_bytes(const Graph& g, int v) {
  const Value& val = g.value(v);
  if (val.constant || !val.type.is_static()) return 0;
  const std::vector<int64_t> dims = val.type.static_dims();
  return static_cast<double>(shape_numel(dims)) * static_cast<double>(dtype_size(val.type.dtype));
}
}  // namespace

// A region `to` may take over: node n and everything downstream of it (when `to` runs all of it),
// grown upstream by producers whose consumers are all inside, that shrink the region's boundary
// (they read fewer bytes from outside than they write: a Resize that upsamples, a Concat of
// upsampled tensors; not an Add of two large tensors) and that `to` is expected to run at most
// kAbsorbSlower times slower. Downstream-closed, so nothing flows from the region back to the base
// placement. Empty when some node of it has no time in `theirs` (`to`'s placement runs its nodes as
// they come: `to` where it can, ref elsewhere; `theirs` holds ref's times for the latter).
NodeSet downstream_region(const Graph& g, const Reachability& reach, int n, const std::vector<double>& mine,
                          const std::vector<double>& theirs) {
  // A producer joins when what it is expected to cost more on the other backend is less than what
  // the smaller boundary saves: a conversion between two backends' layouts reads and writes every
  // byte of a boundary tensor, taken here at 10 GB/s (0.1 ms a megabyte: det's upsampling Resizes,
  // expected 0.02-0.03 ms slower on native than on oneDNN, shrink the boundary by megabytes).
  constexpr double kBoundaryBytesPerSecond = 10e9;
  NodeSet region = reach.descendants(n);
  region.add(n);
  for (int m : region)
    if (!std::isfinite(theirs[m])) return NodeSet(g.num_nodes());
  auto absorbs = [&](int p) {
    if (!std::isfinite(theirs[p]) || !std::isfinite(mine[p])) return false;
    double written = 0, read = 0;
    for (int out : g.node(p).outputs) {
      if (out == kNoValue) continue;
      if (g.value(out).is_graph_output) return false;
      for (int c : g.value(out).consumers)
        if (!region.contains(c)) return false;
      written += value_bytes(g, out);
    }
    for (int in : g.node(p).inputs)
      if (in != kNoValue) read += value_bytes(g, in);
    return read < written && theirs[p] - mine[p] <= (written - read) / kBoundaryBytesPerSecond;
  };
  for (bool grew = true; grew;) {
    grew = false;
    for (int m = region.first(); m >= 0; m = region.next(m)) {
      for (int v : g.node(m).inputs) {
        if (v == kNoValue) continue;
        const int p = g.value(v).producer;
        if (p < 0 || region.contains(p) || !absorbs(p)) continue;
        region.add(p);
        grew = true;
      }
    }
  }
  return region;
}

namespace {

struct Move {
  NodeSet nodes;  // what leaves the base placement
  const Backend* to;
  double saving;  // expected, from the per-node times
  std::string label = {};  // a class move's: its groups' ops and how many ("9 x Mul+Conv+...")
};

// Class moves: the groups `to`'s own placement forms alike (the same ops in the same order, one per
// repeated block of a model, two or more of them) whose nodes the base runs too, moved together. One
// such group saves too little to stand out of a shared machine's noise end to end, and the per-node
// times miss what its fusion saves: cls's nine squeeze-excitation tails (Mul + Conv +
// BatchNormalization [+ Add]) run on native with the scale folded into the weights, where oneDNN
// runs the Mul as a binary primitive of its own (9 us each), 0.362 against 0.393 ms for the whole
// model channels-last, while the per-node times expected native's Conv to be slower.
// A group's ops in order, a Conv with its kernel and whether it is depthwise ("Conv[3x3 dw]"): a
// depthwise and a 1x1 convolution with the same tail are groups of different kinds.
std::string class_key(const Graph& g, const NodeSet& nodes) {
  std::string key;
  for (int n : nodes) {
    const Node& node = g.node(n);
    key += (key.empty() ? "" : "+") + node.op_type;
    if (node.op_type != "Conv" || node.inputs.size() < 2 || node.inputs[1] == kNoValue) continue;
    const std::vector<int64_t> w = g.value(node.inputs[1]).type.static_dims();
    if (w.size() != 4) continue;
    const int64_t group = node.attr_int("group", 1);
    key += "[" + std::to_string(w[2]) + "x" + std::to_string(w[3]) + (group > 1 && w[1] == 1 ? " dw" : "") + "]";
  }
  return key;
}

std::vector<Move> class_moves(const Graph& g, const Backend& to, const std::vector<double>& mine,
                              const std::vector<double>& theirs) {
  auto placed = place_on_backend(g, to);
  if (!placed.ok()) return {};
  std::map<std::string, std::pair<NodeSet, int>> classes;  // label -> (nodes, groups)
  for (const Partition& p : *placed) {
    if (p.nodes.count() < 2) continue;
    bool base_runs_all = true;
    for (int n : p.nodes) base_runs_all = base_runs_all && std::isfinite(mine[n]);
    if (!base_runs_all) continue;
    auto [it, fresh] = classes.try_emplace(class_key(g, p.nodes), NodeSet(g.num_nodes()), 0);
    it->second.first |= p.nodes;
    ++it->second.second;
  }
  std::vector<Move> moves;
  for (auto& [label, c] : classes) {
    if (c.second < 2) continue;
    double saving = 0;
    for (int n : c.first) saving += mine[n] - (std::isfinite(theirs[n]) ? theirs[n] : mine[n]);
    moves.push_back({std::move(c.first), &to, saving, std::to_string(c.second) + " x " + label});
  }
  return moves;
}

// Nodes in one set and not the other.
int difference(const NodeSet& a, const NodeSet& b) { return (a | b).count() - (a & b).count(); }

}  // namespace

Refinement refine_placement(const Graph& g, const Backend& base, const std::vector<const Backend*>& backends,
                            const std::map<const Backend*, std::vector<double>>& node_seconds,
                            const std::vector<Tensor>& inputs, const MeasureOptions& measure,
                            const OptimizeOptions& options, Clock::time_point deadline, const MoveMemory* memory,
                            TimingRecords* records) {
  Refinement out;
  TimingRecords unrecorded(nullptr, g, measure.threads);  // without `records`: every timing is taken
  TimingRecords& timings = records ? *records : unrecorded;
  auto placed = place_on_backend(g, base);
  if (!placed.ok()) return out;
  out.partitions = *placed;
  // A placement leaves the nodes its backend cannot run to ref: what a node costs there is ref's
  // time. (Counted as free, rec's fifteen Transposes and Slices on ref, 0.4 ms of its 5.3 ms on
  // oneDNN, stood in no move's saving, and no region could take its neck and head: native runs
  // them, but not their Reshapes, which ref runs for either.)
  const auto ref_it = node_seconds.find(&ref_backend());
  const auto as_placed = [&](const Backend* b) {
    std::vector<double> t = node_seconds.at(b);
    if (ref_it != node_seconds.end() && b != &ref_backend())
      for (size_t n = 0; n < t.size(); ++n)
        if (!std::isfinite(t[n])) t[n] = ref_it->second[n];
    return t;
  };
  if (!node_seconds.count(&base)) return out;
  const std::vector<double> mine = as_placed(&base);
  double total = 0;
  for (double t : mine) total += std::isfinite(t) ? t : 0;
  const double min_saving = options.refine_min_saving * total;
  std::vector<Move> moves;
  // Backends with their own thread runtime (OpenMP, ...) spin against each other: unless
  // --mix-runtimes, the plan keeps to tessera's pool and at most one other runtime (the base's,
  // or the first one a kept move brings in).
  std::string foreign = base.thread_runtime() == "tessera" ? "" : base.thread_runtime();
  const auto runtime_allowed = [&](const Backend& o) {
    const std::string runtime = o.thread_runtime();
    return options.mix_runtimes || runtime == "tessera" || foreign.empty() || runtime == foreign;
  };
  // Single nodes: each to the backend expected to run it fastest.
  for (int n = 0; n < g.num_nodes(); ++n) {
    if (!std::isfinite(mine[n])) continue;
    Move best{NodeSet::of(g.num_nodes(), {n}), nullptr, min_saving};
    for (const Backend* o : backends) {
      auto theirs = node_seconds.find(o);
      if (o == &base || theirs == node_seconds.end() || !std::isfinite(theirs->second[n])) continue;
      if (!runtime_allowed(*o)) continue;
      if (mine[n] - theirs->second[n] > best.saving) best = {best.nodes, o, mine[n] - theirs->second[n]};
    }
    if (best.to) moves.push_back(best);
  }
  // Regions: a node and what is downstream of it, to a backend that runs all of it. A single node
  // moved alone often loses to the layout conversions at both of its new boundaries; a region has
  // one side only, and its inner tensors stay in the other backend's hands.
  Reachability reach(g);
  for (const Backend* o : backends) {
    auto theirs_it = node_seconds.find(o);
    if (o == &base || theirs_it == node_seconds.end() || !runtime_allowed(*o)) continue;
    const std::vector<double> theirs = as_placed(o);
    std::vector<NodeSet> seen;
    for (int n = 0; n < g.num_nodes(); ++n) {
      if (!std::isfinite(mine[n])) continue;
      NodeSet region = downstream_region(g, reach, n, mine, theirs);
      if (region.count() < 2 || std::find(seen.begin(), seen.end(), region) != seen.end()) continue;
      seen.push_back(region);
      double saving = 0, share = 0;
      for (int m : region) {
        saving += (std::isfinite(mine[m]) ? mine[m] : 0) - theirs[m];
        share += std::isfinite(mine[m]) ? mine[m] : 0;
      }
      if (share > options.refine_max_region_share * total) continue;
      if (saving > min_saving) moves.push_back({std::move(region), o, saving});
    }
  }
  std::stable_sort(moves.begin(), moves.end(), [](const Move& a, const Move& b) { return a.saving > b.saving; });
  // Class moves go first, each tried whatever its expected saving, at most refine_max_class_tries
  // of them (in the order of that saving); the other moves have refine_max_tries of their own.
  std::vector<Move> classes;
  for (const Backend* o : backends) {
    auto theirs_it = node_seconds.find(o);
    if (o == &base || theirs_it == node_seconds.end() || !runtime_allowed(*o)) continue;
    for (Move& m : class_moves(g, *o, mine, theirs_it->second)) classes.push_back(std::move(m));
  }
  std::stable_sort(classes.begin(), classes.end(), [](const Move& a, const Move& b) { return a.saving > b.saving; });
  if (classes.size() > static_cast<size_t>(options.refine_max_class_tries)) classes.resize(options.refine_max_class_tries);
  const size_t class_count = classes.size();
  moves.insert(moves.begin(), std::make_move_iterator(classes.begin()), std::make_move_iterator(classes.end()));
  NodeSet moved(g.num_nodes());
  struct KeptMove {
    NodeSet nodes;
    std::vector<Partition> partitions;
  };
  std::vector<KeptMove> kept;
  std::vector<const Move*> lost_regions;
  int recalled_lost = 0;
  // Each move is judged against the plan so far, the two timed in turns (a shared machine's drift
  // then shifts both alike).
  MeasureOptions paired = measure;
  paired.min_runs = std::max(measure.min_runs, 7);
  paired.min_total_seconds = std::max(measure.min_total_seconds, 0.15);
  int class_tried = 0;  // class moves tried or recalled as lost: the others' tries count from there
  for (size_t i = 0; i < moves.size(); ++i) {
    const Move& m = moves[i];
    if (i == class_count) class_tried = out.tried + recalled_lost;
    // Moves remembered as lost count against the tries: a later run with the same database
    // considers the same most promising moves and times none of them again.
    if ((i >= class_count && out.tried + recalled_lost - class_tried >= options.refine_max_tries) ||
        Clock::now() >= deadline || (options.stop && options.stop()))
      break;
    // A move may take in kept moves whole (a region grown upstream around a kept one: a Resize
    // that shrinks the boundary, say) and replaces them if it wins; one that cuts into a kept move
    // is not tried.
    std::vector<bool> subsumed(kept.size(), false);
    NodeSet taken_in(g.num_nodes());
    for (size_t k = 0; k < kept.size(); ++k) {
      if (!kept[k].nodes.intersects(m.nodes)) continue;
      if (!(kept[k].nodes - m.nodes).empty()) break;
      subsumed[k] = true;
      taken_in |= kept[k].nodes;
    }
    if ((m.nodes & moved) != taken_in) continue;
    // A region that differs from one that lost by a node, or by a sixteenth of its nodes, would
    // lose too (the regions of a chain of nodes differ by a node each; rec's backbone offered twenty
    // regions of 206-246 nodes, a conv block apart, and timing them took every try); one that
    // leaves out more (a Resize and an Add: a large boundary tensor) may not.
    const bool like_lost = std::any_of(lost_regions.begin(), lost_regions.end(), [&](const Move* l) {
      return l->to == m.to && difference(l->nodes, m.nodes) <= std::max(1, l->nodes.count() / 16);
    });
    if (like_lost) continue;
    const std::optional<bool> recalled = memory ? memory->recall(m.nodes, *m.to) : std::nullopt;
    if (recalled == false) {
      ++recalled_lost;
      // As when it lost in this run: the regions one node away are skipped. (They were not, and a
      // warm det run timed the 11 regions between those the cold run had timed: 18 s instead of 4.)
      if (m.nodes.count() > 1) lost_regions.push_back(&m);
      continue;
    }
    if (!runtime_allowed(*m.to)) continue;  // another runtime came in with a kept move
    const NodeSet others = NodeSet::all(g.num_nodes()) - m.nodes;
    auto theirs = place_on_backend(g, *m.to, &others);
    const NodeSet leaving = moved | m.nodes;
    auto carved = place_on_backend(g, base, &leaving);
    ++out.tried;
    TriedMove tried;
    tried.to = m.to->name();
    tried.nodes = m.nodes.count();
    tried.label = !m.label.empty()       ? m.label
                  : m.nodes.count() == 1 ? g.node(m.nodes.first()).op_type
                                         : g.node(m.nodes.first()).op_type + " and " +
                                               std::to_string(m.nodes.count() - 1) + " nodes downstream";
    tried.expected_saving = m.saving;
    bool wins = false;
    if (carved.ok() && theirs.ok()) {
      std::vector<Partition> parts = *carved;
      for (size_t k = 0; k < kept.size(); ++k)
        if (!subsumed[k]) parts.insert(parts.end(), kept[k].partitions.begin(), kept[k].partitions.end());
      parts.insert(parts.end(), theirs->begin(), theirs->end());
      // A first win is timed once more, in turns again, and stands only if it wins again: on a
      // shared machine a few percent come and go between one timing and the next (det's head region
      // grew by noise into the backbone, each step "winning" 1-5%). A move remembered as kept is
      // timed once.
      int round = 0;
      const auto move_wins = [&] {
        const std::string purpose = ++round == 1 ? "move" : "move again";
        std::vector<Cost> costs = timings.time_in_turns({out.partitions, parts}, inputs, paired, purpose);
        tried.before_seconds = costs[0].valid ? costs[0].seconds : -1;
        tried.after_seconds = costs[1].valid ? costs[1].seconds : -1;
        return costs[0].valid && costs[1].valid && costs[1].seconds < costs[0].seconds * (1 - options.refine_min_gain);
      };
      wins = move_wins() && (recalled == true || move_wins());
      if (wins) {
        if (m.to->thread_runtime() != "tessera") foreign = m.to->thread_runtime();
        std::vector<KeptMove> still;
        for (size_t k = 0; k < kept.size(); ++k)
          if (!subsumed[k]) still.push_back(std::move(kept[k]));
        still.push_back({m.nodes, *theirs});
        kept = std::move(still);
        moved |= m.nodes;
        out.partitions = std::move(parts);
      }
    }
    tried.kept = wins;
    out.log.push_back(std::move(tried));
    if (memory) memory->remember(m.nodes, *m.to, wins);
    if (!wins && m.nodes.count() > 1) lost_regions.push_back(&m);
  }
  out.improved = !kept.empty();
  out.moves = static_cast<int>(kept.size());
  return out;
}

}  // namespace tessera
