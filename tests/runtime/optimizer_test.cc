// The measuring estimator, plans and the optimizer on small graphs with the real backends.
#include "runtime/optimizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <filesystem>
#include <random>
#include <set>

#include <sqlite3.h>
#include <unistd.h>

#include "backends/test_graph.h"
#include "ir/tensor_compare.h"
#include "partition/cost_db.h"
#include "runtime/session.h"
#include "runtime/timing_records.h"

namespace tessera {
namespace {

using testing_graph::Dims;
using testing_graph::TestGraph;

// A backend that runs Relu wrongly (as the identity), or fails to compile anything.
class BrokenBackend final : public Backend {
 public:
  explicit BrokenBackend(bool compiles) : compiles_(compiles) {}
  std::string name() const override { return compiles_ ? "wrong" : "nobuild"; }
  std::string version() const override { return "0"; }
  Status available() const override { return Status(); }
  FusionStyle fusion_style() const override { return FusionStyle::kNone; }
  Status supports(const Graph& g, int n) const override {
    return g.node(n).op_type == "Relu" ? Status() : unimplemented("Relu only");
  }
  std::vector<std::string> claimed_patterns() const override { return {"Relu"}; }
  Result<std::unique_ptr<Kernel>> compile(const SubGraph&, const CompileOptions&) const override {
    if (!compiles_) return unimplemented("no kernel for this shape");
    struct Identity final : Kernel {
      Status run(const std::vector<const Tensor*>& in, std::vector<Tensor>& out, KernelRunContext& ctx) override {
        out[0] = ctx.alloc.allocate(DType::kFloat32, in[0]->dims());
        std::copy(in[0]->data<float>(), in[0]->data<float>() + in[0]->numel(), out[0].data<float>());
        return Status();
      }
    };
    return std::unique_ptr<Kernel>(new Identity());
  }

 private:
  bool compiles_;
};

// Applies Relu / Sigmoid in order to its one input, like ref, then spins for `seconds`.
struct SpinKernel final : Kernel {
  SpinKernel(std::vector<std::string> ops, double seconds) : ops(std::move(ops)), seconds(seconds) {}
  Status run(const std::vector<const Tensor*>& in, std::vector<Tensor>& out, KernelRunContext& ctx) override {
    out[0] = ctx.alloc.allocate(DType::kFloat32, in[0]->dims());
    const float* x = in[0]->data<float>();
    float* y = out[0].data<float>();
    for (int64_t i = 0; i < in[0]->numel(); ++i) {
      float v = x[i];
      for (const std::string& op : ops) v = op == "Relu" ? std::max(v, 0.f) : 1.f / (1.f + std::exp(-v));
      y[i] = v;
    }
    for (auto t0 = std::chrono::steady_clock::now();
         std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds;) {
    }
    return Status();
  }
  std::vector<std::string> ops;
  double seconds;
};

// A backend of unary ops whose kernels compute them like ref and then spin for a set time per op
// type: a controllable "slow" or "fast" backend for the refinement (op names listed are supported).
class TimedBackend final : public Backend {
 public:
  TimedBackend(std::string name, std::map<std::string, double> seconds, std::string runtime = "tessera")
      : name_(std::move(name)), seconds_(std::move(seconds)), runtime_(std::move(runtime)) {}
  std::string name() const override { return name_; }
  std::string thread_runtime() const override { return runtime_; }
  std::string version() const override { return "0"; }
  Status available() const override { return Status(); }
  FusionStyle fusion_style() const override { return FusionStyle::kNone; }
  Status supports(const Graph& g, int n) const override {
    return seconds_.count(g.node(n).op_type) ? Status() : unimplemented("not listed");
  }
  std::vector<std::string> claimed_patterns() const override { return {}; }
  Result<std::unique_ptr<Kernel>> compile(const SubGraph& sg, const CompileOptions&) const override {
    const std::string& op = sg.graph().node(sg.nodes().first()).op_type;
    return std::unique_ptr<Kernel>(new SpinKernel({op}, seconds_.at(op)));
  }

 private:
  std::string name_;
  std::map<std::string, double> seconds_;
  std::string runtime_;
};

// Fuses a Relu with the Sigmoid it feeds into one kernel of `pair_seconds`; single nodes take
// `node_seconds` each. Both compute Sigmoid(Relu(x)) or the single op for real.
class PairFusingBackend final : public Backend {
 public:
  PairFusingBackend(double pair_seconds, double node_seconds)
      : pair_seconds_(pair_seconds), node_seconds_(node_seconds) {}
  std::string name() const override { return "fuser"; }
  std::string version() const override { return "0"; }
  Status available() const override { return Status(); }
  FusionStyle fusion_style() const override { return FusionStyle::kArbitrary; }
  Status supports(const Graph& g, int n) const override {
    const std::string& op = g.node(n).op_type;
    return op == "Relu" || op == "Sigmoid" ? Status() : unimplemented("not listed");
  }
  Status accepts(const SubGraph& sg) const override {
    if (sg.size() == 1) return Status();
    const Graph& g = sg.graph();
    const int first = sg.nodes().first();
    if (sg.size() == 2 && g.node(first).op_type == "Relu" &&
        g.node(sg.nodes().to_vector()[1]).op_type == "Sigmoid" && sg.outputs().size() == 1)
      return Status();
    return unimplemented("a Relu and its Sigmoid only");
  }
  std::vector<std::string> claimed_patterns() const override { return {}; }
  Result<std::unique_ptr<Kernel>> compile(const SubGraph& sg, const CompileOptions&) const override {
    std::vector<std::string> ops;
    for (int n : sg.nodes()) ops.push_back(sg.graph().node(n).op_type);
    return std::unique_ptr<Kernel>(new SpinKernel(ops, sg.size() == 1 ? node_seconds_ : pair_seconds_));
  }

 private:
  double pair_seconds_, node_seconds_;
};

// x -> Conv -> Relu -> Conv -> Add(residual) -> Sigmoid -> GlobalAveragePool, plus a MatMul branch.
TestGraph small_net() {
  TestGraph t;
  int x = t.input({1, 8, 12, 12});
  int c1 = t.op("Conv", {x, t.constant({8, 8, 3, 3}, -0.3f, 0.3f), t.constant({8})}, {{"pads", Attribute::of_ints({1, 1, 1, 1})}});
  int r = t.op("Relu", {c1});
  int c2 = t.op("Conv", {r, t.constant({8, 8, 3, 3}, -0.3f, 0.3f)}, {{"pads", Attribute::of_ints({1, 1, 1, 1})}});
  int a = t.op("Add", {c2, x});
  int s = t.op("Sigmoid", {a});
  int p = t.op("GlobalAveragePool", {s});
  int m = t.op("MatMul", {t.op("Reshape", {p, t.ints({1, 8})}), t.constant({8, 16})});
  t.finish({m, t.op("Relu", {a})});
  return t;
}

MeasureOptions quick(int threads = 1) {
  MeasureOptions m;
  m.threads = threads;
  m.warmup_runs = 1;
  m.min_runs = 3;
  m.min_total_seconds = 0.001;
  return m;
}

std::map<std::string, Tensor> named_inputs(const TestGraph& t) {
  std::map<std::string, Tensor> m;
  for (size_t i = 0; i < t.g.inputs().size(); ++i) m[t.g.value(t.g.inputs()[i]).name] = t.inputs[i];
  return m;
}

std::string temp_path(const std::string& name) {
  auto p = std::filesystem::temp_directory_path() / ("tessera_optimizer_test_" + name + "_" + std::to_string(getpid()));
  std::filesystem::remove(p);
  return p.string();
}

TEST(MeasuringEstimator, CapturesEveryValueOfTheReferenceRun) {
  TestGraph t = small_net();
  auto values = capture_reference_values(t.g, named_inputs(t), 1);
  ASSERT_TRUE(values.ok()) << values.status().to_string();
  std::vector<Tensor> want = testing_graph::run_ref(t);
  for (size_t o = 0; o < t.g.outputs().size(); ++o)
    EXPECT_TRUE(compare_tensors((*values)[t.g.outputs()[o]], want[o], 0, 0).ok());
  for (int v = 0; v < t.g.num_values(); ++v) EXPECT_TRUE((*values)[v].defined()) << t.g.value(v).name;
}

TEST(MeasuringEstimator, TimesValidCandidatesOnTheirRealInputs) {
  TestGraph t = small_net();
  auto values = capture_reference_values(t.g, named_inputs(t), 1);
  ASSERT_TRUE(values.ok());
  MeasuringEstimator est(t.g, *values, quick());
  int timed = 0;
  for (const Backend* b : all_backends()) {
    if (!b->available().ok()) continue;
    for (const Candidate& c : candidates_for(t.g, {b})) {
      if (c.backend != b) continue;
      Cost cost = est.cost(c);
      if (!cost.valid) {
        // A backend may refuse a shape at compile time; it must never compute wrongly.
        EXPECT_EQ(cost.reason.find("differs"), std::string::npos) << c.describe(t.g) << ": " << cost.reason;
        continue;
      }
      EXPECT_GT(cost.seconds, 0) << c.describe(t.g);
      EXPECT_GE(cost.noise, 0);
      ++timed;
    }
  }
  EXPECT_GT(timed, 10);
  EXPECT_GE(est.measured(), timed);  // every compiled candidate is counted
}

TEST(MeasuringEstimator, WrongResultsAndFailedBuildsMakeCandidatesInvalid) {
  TestGraph t = small_net();
  auto values = capture_reference_values(t.g, named_inputs(t), 1);
  ASSERT_TRUE(values.ok());
  MeasuringEstimator est(t.g, *values, quick());
  BrokenBackend wrong(true), nobuild(false);
  int relu = -1;
  for (int n = 0; n < t.g.num_nodes(); ++n)
    if (t.g.node(n).op_type == "Relu") relu = n;
  ASSERT_GE(relu, 0);
  Cost c1 = est.cost(Candidate{NodeSet::of(t.g.num_nodes(), {relu}), &wrong, "test"});
  EXPECT_FALSE(c1.valid);
  EXPECT_NE(c1.reason.find("differs from the reference"), std::string::npos) << c1.reason;
  Cost c2 = est.cost(Candidate{NodeSet::of(t.g.num_nodes(), {relu}), &nobuild, "test"});
  EXPECT_FALSE(c2.valid);
  EXPECT_NE(c2.reason.find("does not build"), std::string::npos) << c2.reason;
  // The reference backend itself always matches.
  Cost c3 = est.cost(Candidate{NodeSet::of(t.g.num_nodes(), {relu}), &ref_backend(), "host"});
  EXPECT_TRUE(c3.valid) << c3.reason;
}

TEST(MeasuringEstimator, TransitionsAreZeroWithinABackendAndNeverNegative) {
  TestGraph t = small_net();
  auto values = capture_reference_values(t.g, named_inputs(t), 2);
  ASSERT_TRUE(values.ok());
  MeasuringEstimator est(t.g, *values, quick(2));
  for (const Backend* a : all_backends())
    for (const Backend* b : all_backends()) {
      if (!a->available().ok() || !b->available().ok()) continue;
      double s = est.transition_seconds(a, b);
      if (a == b) {
        EXPECT_EQ(s, 0);
      }
      EXPECT_GE(s, 0);
      EXPECT_LT(s, 0.5);
      EXPECT_EQ(s, est.transition_seconds(b, a));  // measured once per pair, both ways
    }
}

TEST(Plan, JsonRoundTripAndRefusals) {
  Plan p;
  p.model = "m.onnx";
  p.model_hash = "0123456789abcdef";
  p.threads = 2;
  p.cpu = "cpu";
  p.input_shapes["x"] = {1, 3, 8, 8};
  p.predicted_seconds = 0.01;
  p.measured_seconds = 0.011;
  p.partitions.push_back({"native", {0, 1, 2}, "Conv+Relu+Add", "merge", 0.004, 0.0001});
  p.partitions.push_back({"ref", {3}, "Sigmoid", "host", -1, 0});
  auto back = plan_from_json(plan_to_json(p));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->model_hash, p.model_hash);
  EXPECT_EQ(back->threads, 2);
  EXPECT_EQ(back->input_shapes, p.input_shapes);
  ASSERT_EQ(back->partitions.size(), 2u);
  EXPECT_EQ(back->partitions[0].nodes, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(back->partitions[1].backend, "ref");
  EXPECT_DOUBLE_EQ(back->partitions[0].seconds, 0.004);
  for (const char* bad : {"", "[]", "{\"format\": 7}", "{\"format\": 1}", "{\"format\": 1, \"model_hash\": 3}",
                          "{\"format\": 1, \"model_hash\": \"x\", \"partitions\": [{\"nodes\": [1]}]}"}) {
    auto r = plan_from_json(bad);
    EXPECT_FALSE(r.ok()) << bad;
  }
  EXPECT_FALSE(read_plan(temp_path("missing.json")).ok());
}

// Options for optimizing t at one thread with quick measurements; db "": no cost database.
OptimizeOptions small_options(const TestGraph& t, const std::string& db) {
  OptimizeOptions o;
  o.threads = 1;
  o.cost_db = db;
  o.use_cost_db = !db.empty();
  o.budget_seconds = 120;
  o.measure = quick();
  o.inputs = named_inputs(t);
  return o;
}

// "backend:nodes" per partition of a plan.
std::vector<std::string> partition_list(const Plan& plan) {
  std::vector<std::string> out;
  for (const PlanPartition& p : plan.partitions) {
    std::string s = p.backend + ":";
    for (int n : p.nodes) s += " " + std::to_string(n);
    out.push_back(s);
  }
  return out;
}

TEST(Optimizer, PlansMeasuresOnceAndReplays) {
  TestGraph t = small_net();
  std::string db = temp_path("costs.sqlite");
  OptimizeOptions o = small_options(t, db);
  o.model_name = "small_net";
  o.placements = false;  // the searched plan itself (placements contend in ChoosesTheFastestContenderEndToEnd)
  auto first = optimize_graph(t.g, o);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  EXPECT_GT(first->measured, 0);
  EXPECT_TRUE(first->search.optimal);
  EXPECT_GT(first->plan.measured_seconds, 0);
  ASSERT_EQ(first->timings.size(), first->plan.partitions.size());
  for (size_t i = 0; i < first->timings.size(); ++i) {
    // The cost the search used, and the partition measured alone again after the end-to-end runs.
    EXPECT_DOUBLE_EQ(first->timings[i].stored_seconds, first->plan.partitions[i].seconds);
    EXPECT_GT(first->timings[i].isolated_seconds, 0) << first->plan.partitions[i].label;
  }
  std::vector<int> covered(t.g.num_nodes(), 0);
  for (const PlanPartition& p : first->plan.partitions)
    for (int n : p.nodes) ++covered[n];
  for (int n = 0; n < t.g.num_nodes(); ++n) EXPECT_EQ(covered[n], 1) << t.g.node(n).describe();

  // A second optimization of the same graph measures nothing new, times nothing end to end again
  // (the contenders' timings are recalled too) and chooses the same plan.
  EXPECT_GT(first->timings_taken, 0);
  auto second = optimize_graph(t.g, o);
  ASSERT_TRUE(second.ok()) << second.status().to_string();
  EXPECT_EQ(second->measured, 0);
  EXPECT_GT(second->cache_hits, 0);
  EXPECT_EQ(second->timings_taken, 0);
  EXPECT_EQ(second->timings_recalled, first->timings_taken + first->timings_recalled);
  EXPECT_EQ(partition_list(second->plan), partition_list(first->plan));
  for (const PartitionTiming& timing : second->timings) EXPECT_GT(timing.isolated_seconds, 0);

  // The plan, through JSON and a Session, computes what the reference kernels compute.
  auto plan = plan_from_json(plan_to_json(first->plan));
  ASSERT_TRUE(plan.ok());
  SessionOptions so;
  so.plan = *plan;
  Graph copy = t.g;
  auto session = Session::from_graph(std::move(copy), so);
  ASSERT_TRUE(session.ok()) << session.status().to_string();
  auto out = (*session)->run(named_inputs(t));
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  std::vector<Tensor> want = testing_graph::run_ref(t);
  for (size_t i = 0; i < want.size(); ++i) {
    const Tensor& got = out->at(t.g.value(t.g.outputs()[i]).name);
    EXPECT_TRUE(compare_tensors(got, want[i], 1e-4, 1e-4 * std::max(1.0, max_abs(want[i]))).ok());
  }
  std::filesystem::remove(db);
}

// With placements, refinement and finals, a second run on the same database recalls every
// whole-model timing and so makes the same choices; --retime (recall_timings false) times them again.
TEST(Optimizer, SecondRunRecallsEveryWholeModelTiming) {
  TestGraph t = small_net();
  std::string db = temp_path("recall.sqlite");
  OptimizeOptions o = small_options(t, db);
  auto first = optimize_graph(t.g, o);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  EXPECT_GT(first->timings_taken, 1);  // every placement at least
  auto second = optimize_graph(t.g, o);
  ASSERT_TRUE(second.ok()) << second.status().to_string();
  // (Refinement moves that lost are not tried again, so there may be fewer timings to recall.) The
  // one timing a second run may take: its chosen placement's again, when the recalled one is over
  // 15% off its end-to-end time (AStalePlacementTimingIsTakenAgainAndReplaced).
  EXPECT_EQ(second->timings_taken, second->stale_predicted_seconds >= 0 ? 1 : 0);
  EXPECT_GT(second->timings_recalled, 0);
  EXPECT_LE(second->timings_recalled, first->timings_taken + first->timings_recalled);
  EXPECT_EQ(second->chosen_variant, first->chosen_variant);
  EXPECT_EQ(partition_list(second->plan), partition_list(first->plan));
  ASSERT_EQ(second->variants.size(), first->variants.size());
  for (size_t k = 0; k < first->variants.size(); ++k) {
    EXPECT_EQ(second->variants[k].measured_seconds, first->variants[k].measured_seconds) << first->variants[k].name;
    EXPECT_EQ(second->variants[k].final_seconds, first->variants[k].final_seconds) << first->variants[k].name;
  }
  o.recall_timings = false;
  auto third = optimize_graph(t.g, o);
  ASSERT_TRUE(third.ok()) << third.status().to_string();
  EXPECT_EQ(third->timings_recalled, 0);
  EXPECT_GT(third->timings_taken, 1);
  std::filesystem::remove(db);
}

// Runs one SQL statement on a cost database file; returns the rows it changed.
int exec_sql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* error = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK) << (error ? error : "");
  sqlite3_free(error);
  const int changed = sqlite3_changes(db);
  sqlite3_close(db);
  return changed;
}

// A placement's prediction is a whole-model timing of it, recalled by later runs. One stored in a
// slower spell of the machine (here: the stored timings made 100x slower, far beyond what a
// loaded machine's noise can undo) is over 15% off the run's end-to-end time: the placement is
// timed again, the plan predicts from that, and it replaces the stored timing, so the run after
// predicts from it too.
TEST(Optimizer, AStalePlacementTimingIsTakenAgainAndReplaced) {
  TestGraph t = small_net();
  std::string db = temp_path("stale.sqlite");
  OptimizeOptions o = small_options(t, db);
  // Backends of tessera's threads only: one search variant, whose plan the second run finds and
  // recalls again. (With oneDNN too, a later variant is searched under the bound of the earlier
  // ones' end-to-end times; made 10000x slower, they could let it search a plan the first run
  // never timed, timed afresh and chosen on a loaded machine.)
  o.backends = {"native", "xnnpack"};
  // Finals of the chosen and the refined placements only: the searched plan, near the fastest by
  // its prediction whatever its stored timing, would be a finalist and win there.
  o.max_finalists = 1;
  auto first = optimize_graph(t.g, o);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  EXPECT_LT(first->stale_predicted_seconds, 0);  // nothing was recalled
  // Searched plans' timings (no per-partition times: "e2e:<id>:0:...") 10000x slower, the
  // placements' 100x: the next run chooses a placement, predicted 100x too slow.
  EXPECT_GT(exec_sql(db, "UPDATE costs SET seconds = seconds * 10000 WHERE subgraph_hash LIKE 'timing:%:e2e:%:0:%'"), 0);
  EXPECT_GT(exec_sql(db, "UPDATE costs SET seconds = seconds * 100 WHERE subgraph_hash LIKE 'timing:%:e2e:%' "
                         "AND subgraph_hash NOT LIKE 'timing:%:e2e:%:0:%'"),
            0);
  auto second = optimize_graph(t.g, o);
  ASSERT_TRUE(second.ok()) << second.status().to_string();
  const std::string chosen = second->variants[second->chosen_variant].name;
  ASSERT_TRUE(chosen.rfind("placement:", 0) == 0 || chosen.rfind("refined:", 0) == 0) << chosen;
  ASSERT_GT(second->stale_predicted_seconds, 0);
  EXPECT_GT(second->stale_predicted_seconds, 1.15 * second->plan.measured_seconds);
  EXPECT_LT(second->plan.predicted_seconds, 0.5 * second->stale_predicted_seconds);
  double parts = second->plan.transition_seconds;
  for (const PlanPartition& p : second->plan.partitions) parts += p.seconds;
  EXPECT_NEAR(parts, second->plan.predicted_seconds, 1e-9 + 1e-6 * parts);  // the parts were replaced too
  auto third = optimize_graph(t.g, o);
  ASSERT_TRUE(third.ok()) << third.status().to_string();
  EXPECT_EQ(third->variants[third->chosen_variant].name, chosen);
  EXPECT_LT(third->plan.predicted_seconds, 0.5 * second->stale_predicted_seconds);
  std::filesystem::remove(db);
}

// Large graphs (searched with estimates) are bounded from the start by the fastest end-to-end time of
// their backends' placements, taken with the node times and kept in the database: a second run
// bounds its searches the same way, so it prunes the same candidates and measures nothing.
TEST(Optimizer, LargeGraphSearchesAreBoundedByThePlacementsAndRecallTheBound) {
  TestGraph t = small_net();
  std::string db = temp_path("bound.sqlite");
  OptimizeOptions o = small_options(t, db);
  o.max_exact_nodes = 0;  // small_net searched as a large graph
  auto first = optimize_graph(t.g, o);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  auto second = optimize_graph(t.g, o);
  ASSERT_TRUE(second.ok()) << second.status().to_string();
  EXPECT_EQ(second->measured, 0);
  EXPECT_EQ(partition_list(second->plan), partition_list(first->plan));
  ASSERT_EQ(second->variants.size(), first->variants.size());
  int searched = 0;
  for (size_t k = 0; k < first->variants.size(); ++k) {
    const PlanVariant& v = first->variants[k];
    if (v.name.find(':') != std::string::npos) continue;  // placements and refinements are not searched
    ++searched;
    EXPECT_GT(v.bound_seconds, 0) << v.name;
    EXPECT_EQ(second->variants[k].bound_seconds, v.bound_seconds) << v.name;
    if (v.error.empty()) {
      EXPECT_LT(v.predicted_seconds, v.bound_seconds) << v.name;
    } else {
      EXPECT_NE(v.error.find("no plan predicted under"), std::string::npos) << v.error;
    }
  }
  EXPECT_GT(searched, 0);
  // Without placements to fall back on, the first set is searched without a bound.
  o.placements = false;
  o.use_cost_db = false;
  auto unbounded = optimize_graph(t.g, o);
  ASSERT_TRUE(unbounded.ok()) << unbounded.status().to_string();
  ASSERT_FALSE(unbounded->variants.empty());
  EXPECT_EQ(unbounded->variants[0].bound_seconds, -1);
  EXPECT_TRUE(unbounded->variants[0].error.empty()) << unbounded->variants[0].error;
  std::filesystem::remove(db);
}

// Whole-model timings through the cost database: recalled by the placement timed (backends and
// nodes) and, for timings in turns, by what they were for; taken again for anything else.
TEST(TimingRecords, RecallsWhatWasTimedForTheSamePlacementsAndPurpose) {
  TestGraph t = small_net();
  TimedBackend slow("spinning", {{"Relu", 0.0004}, {"Sigmoid", 0.0001}});
  std::vector<Partition> parts;  // both Relus and the Sigmoid on `slow`, the rest on ref
  for (int n = 0; n < t.g.num_nodes(); ++n)
    if (slow.supports(t.g, n).ok()) parts.push_back(Partition{NodeSet::of(t.g.num_nodes(), {n}), &slow});
  ASSERT_EQ(parts.size(), 3u);
  const std::vector<int> owner = owners_of(t.g, parts);
  const std::string path = temp_path("records.sqlite");
  auto db = CostDatabase::open(path);
  ASSERT_TRUE(db.ok()) << db.status().to_string();

  TimingRecords first(db->get(), t.g, 1);
  auto timed = first.time_partitions(parts, t.inputs, quick(), owner, 3);
  ASSERT_TRUE(timed.ok()) << timed.status().to_string();
  EXPECT_EQ(first.taken(), 1);
  for (size_t i = 0; i < parts.size(); ++i) {
    const bool relu = t.g.node(parts[i].nodes.first()).op_type == "Relu";
    EXPECT_GE(timed->per_owner[i], relu ? 0.0004 : 0.0001) << i;
  }
  TimingRecords second(db->get(), t.g, 1);
  auto recalled = second.time_partitions(parts, t.inputs, quick(), owner, 3);
  ASSERT_TRUE(recalled.ok()) << recalled.status().to_string();
  EXPECT_EQ(second.recalled(), 1);
  EXPECT_EQ(second.taken(), 0);
  EXPECT_EQ(recalled->total.seconds, timed->total.seconds);
  EXPECT_EQ(recalled->total.noise, timed->total.noise);
  EXPECT_EQ(recalled->per_owner, timed->per_owner);
  for (int n = 0; n < t.g.num_nodes(); ++n) {
    if (owner[n] < 0) {
      EXPECT_EQ(recalled->per_node[n], timed->per_node[n]) << t.g.node(n).describe();
    }
  }
  // Other partitions (one fewer), or more owners than were stored: timed.
  std::vector<Partition> fewer(parts.begin(), parts.end() - 1);
  ASSERT_TRUE(second.time_partitions(fewer, t.inputs, quick(), owners_of(t.g, fewer), 2).ok());
  EXPECT_EQ(second.taken(), 1);

  const std::vector<Result<std::vector<Partition>>> pair = {parts, fewer};
  const std::vector<Cost> finals = second.time_in_turns(pair, t.inputs, quick(), "finals");
  EXPECT_EQ(second.taken(), 2);
  TimingRecords third(db->get(), t.g, 1);
  const std::vector<Cost> again = third.time_in_turns(pair, t.inputs, quick(), "finals");
  ASSERT_EQ(again.size(), 2u);
  EXPECT_EQ(third.recalled(), 1);
  for (size_t i = 0; i < 2; ++i) EXPECT_EQ(again[i].seconds, finals[i].seconds) << i;
  third.time_in_turns(pair, t.inputs, quick(), "move");  // another purpose
  third.time_in_turns({fewer, parts}, t.inputs, quick(), "finals");  // another order
  EXPECT_EQ(third.taken(), 2);
  // A placement that could not be made is recalled as the same failure.
  const std::vector<Result<std::vector<Partition>>> broken = {parts, Result<std::vector<Partition>>(internal_error("no"))};
  EXPECT_FALSE(third.time_in_turns(broken, t.inputs, quick(), "finals")[1].valid);
  TimingRecords fourth(db->get(), t.g, 1);
  EXPECT_FALSE(fourth.time_in_turns(broken, t.inputs, quick(), "finals")[1].valid);
  EXPECT_EQ(fourth.recalled(), 1);

  // Without a database, or told not to recall, everything is timed.
  TimingRecords none(nullptr, t.g, 1);
  ASSERT_TRUE(none.time_partitions(parts, t.inputs, quick(), owner, 3).ok());
  ASSERT_TRUE(none.time_partitions(parts, t.inputs, quick(), owner, 3).ok());
  EXPECT_EQ(none.taken(), 2);
  TimingRecords retime(db->get(), t.g, 1, /*recall=*/false);
  ASSERT_TRUE(retime.time_partitions(parts, t.inputs, quick(), owner, 3).ok());
  EXPECT_EQ(retime.recalled(), 0);
  std::filesystem::remove(path);
}

TEST(Optimizer, ChoosesTheFastestContenderEndToEnd) {
  TestGraph t = small_net();
  OptimizeOptions o = small_options(t, "");
  auto r = optimize_graph(t.g, o);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  // Every available backend's own placement contended, timed end to end.
  int placements = 0;
  for (const Backend* b : all_backends()) {
    if (b == &ref_backend() || !b->available().ok()) continue;
    auto it = std::find_if(r->variants.begin(), r->variants.end(),
                           [&](const PlanVariant& v) { return v.name == "placement:" + b->name(); });
    ASSERT_NE(it, r->variants.end()) << b->name();
    EXPECT_GT(it->measured_seconds, 0) << b->name() << ": " << it->error;
    ++placements;
  }
  EXPECT_GT(placements, 0);
  // The contenders measured near the fastest (and the refined placement) are the finalists, timed
  // again side by side; the chosen one ran fastest there. Its plan covers every node once.
  ASSERT_GE(r->chosen_variant, 0);
  ASSERT_LT(r->chosen_variant, static_cast<int>(r->variants.size()));
  double fastest = -1;
  for (const PlanVariant& v : r->variants)
    if (v.measured_seconds >= 0 && (fastest < 0 || v.measured_seconds < fastest)) fastest = v.measured_seconds;
  // Near: measured, or for a searched plan predicted, within finalist_factor of the fastest.
  auto nearness = [](const PlanVariant& v) {
    return v.predicted_seconds >= 0 ? std::min(v.measured_seconds, v.predicted_seconds) : v.measured_seconds;
  };
  int near_fastest = 0;
  for (const PlanVariant& v : r->variants) {
    near_fastest += v.measured_seconds >= 0 &&
                    (nearness(v) <= o.finalist_factor * fastest || v.name.rfind("refined:", 0) == 0);
  }
  // (With no other contender near the fastest there are no finals: on a loaded machine the
  // others may all measure more than finalist_factor slower.)
  int finalists = 0;
  for (const PlanVariant& v : r->variants) {
    if (v.measured_seconds < 0) continue;
    finalists += v.final_seconds >= 0;
    if (v.measured_seconds == fastest && near_fastest > 1) {
      EXPECT_GE(v.final_seconds, 0) << v.name << ": the fastest is a finalist (" << near_fastest
                                    << " contenders near it; " << v.error << ")";
    }
    if (nearness(v) > o.finalist_factor * fastest && v.name.rfind("refined:", 0) != 0) {
      EXPECT_LT(v.final_seconds, 0) << v.name;
    }
  }
  EXPECT_EQ(finalists, near_fastest > 1 ? std::min(near_fastest, o.max_finalists) : 0);
  const PlanVariant& chosen = r->variants[r->chosen_variant];
  if (finalists > 1) {
    ASSERT_GE(chosen.final_seconds, 0);
    for (const PlanVariant& v : r->variants) {
      if (v.final_seconds >= 0) {
        EXPECT_LE(chosen.final_seconds, v.final_seconds) << v.name;
      }
    }
  } else {
    EXPECT_EQ(chosen.measured_seconds, fastest);
  }
  std::vector<int> covered(t.g.num_nodes(), 0);
  for (const PlanPartition& p : r->plan.partitions)
    for (int n : p.nodes) ++covered[n];
  for (int n = 0; n < t.g.num_nodes(); ++n) EXPECT_EQ(covered[n], 1) << t.g.node(n).describe();
  // With a backend on its own thread runtime (oneDNN's OpenMP), the backends on tessera's pool are
  // also searched alone, so that a plan free of the other runtime's idle threads contends.
  bool own_runtime = false;
  for (const Backend* b : all_backends())
    own_runtime |= b != &ref_backend() && b->available().ok() && b->thread_runtime() != "tessera";
  auto pool_only = std::find_if(r->variants.begin(), r->variants.end(), [](const PlanVariant& v) { return v.name == "tessera"; });
  EXPECT_EQ(pool_only != r->variants.end(), own_runtime);
  if (pool_only != r->variants.end()) {
    for (const std::string& name : pool_only->backends) EXPECT_EQ(find_backend(name)->thread_runtime(), "tessera") << name;
  }
  // Without placements, only searched backend sets contend.
  o.placements = false;
  auto searched = optimize_graph(t.g, o);
  ASSERT_TRUE(searched.ok()) << searched.status().to_string();
  for (const PlanVariant& v : searched->variants) EXPECT_EQ(v.name.rfind("placement:", 0), std::string::npos) << v.name;
}

// The refinement starts from the fastest placement and from the next ones when they measured near
// the fastest, up to max_refine_bases (single timings on a shared machine cannot tell close
// placements apart).
TEST(Optimizer, RefinementStartsFromThePlacementsNearTheFastest) {
  TestGraph t = small_net();
  OptimizeOptions o = small_options(t, "");
  auto r = optimize_graph(t.g, o);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  // Timed again side by side (those within twice the fastest), or once.
  std::vector<std::pair<double, std::string>> placements;
  bool in_turns = false;
  for (const PlanVariant& v : r->variants) in_turns |= v.base_seconds >= 0;
  for (const PlanVariant& v : r->variants) {
    if (v.name.rfind("placement:", 0) != 0 || v.measured_seconds < 0 || (in_turns && v.base_seconds < 0)) continue;
    placements.emplace_back(in_turns ? v.base_seconds : v.measured_seconds, v.name.substr(10));
  }
  ASSERT_FALSE(placements.empty());
  std::sort(placements.begin(), placements.end());
  std::set<std::string> want;
  for (const auto& [seconds, name] : placements)
    if (seconds <= o.finalist_factor * placements[0].first && static_cast<int>(want.size()) < o.max_refine_bases)
      want.insert(name);
  std::set<std::string> refined;
  for (const PlanVariant& v : r->variants)
    if (v.name.rfind("refined:", 0) == 0) refined.insert(v.name.substr(8));
  EXPECT_EQ(refined, want);
}

// The refinement keeps a move only when the whole model runs faster with it, whatever the
// per-node estimates promised.
TEST(Optimizer, RefinementKeepsOnlyMovesThatWinEndToEnd) {
  TestGraph t;
  int x = t.input({4, 64});
  t.finish({t.op("Sigmoid", {t.op("Relu", {x})})});
  const int relu = 0, sigmoid = 1;
  ASSERT_EQ(t.g.node(relu).op_type, "Relu");
  TimedBackend base("base", {{"Relu", 0.004}, {"Sigmoid", 0.0}});
  TimedBackend fast("fast", {{"Relu", 0.0}});
  TimedBackend liar("liar", {{"Sigmoid", 0.004}});  // estimated fast, runs slow
  const double inf = std::numeric_limits<double>::infinity();
  std::map<const Backend*, std::vector<double>> node_seconds = {
      {&base, {0.004, 0.002}}, {&fast, {1e-6, inf}}, {&liar, {inf, 1e-6}}};
  std::vector<Tensor> inputs = t.inputs;
  OptimizeOptions o;
  Refinement r = refine_placement(t.g, base, {&base, &fast, &liar}, node_seconds, inputs, quick(), o,
                                  std::chrono::steady_clock::now() + std::chrono::seconds(60));
  EXPECT_EQ(r.tried, 2);  // both moves promise a saving
  EXPECT_EQ(r.moves, 1);
  ASSERT_TRUE(r.improved);
  std::map<int, std::string> on;
  for (const Partition& p : r.partitions)
    for (int n : p.nodes) on[n] = p.backend->name();
  EXPECT_EQ(on[relu], "fast");
  EXPECT_EQ(on[sigmoid], "base");
  // Moves remembered as lost are not tried again; the outcomes of tried ones are remembered.
  std::map<std::pair<int, std::string>, bool> remembered;
  MoveMemory memory;
  memory.recall = [](const NodeSet& nodes, const Backend&) -> std::optional<bool> {
    if (nodes.count() == 1 && nodes.first() == 0) return false;  // the Relu move lost before
    return std::nullopt;
  };
  memory.remember = [&](const NodeSet& nodes, const Backend& to, bool kept) {
    EXPECT_EQ(nodes.count(), 1);
    remembered[{nodes.first(), to.name()}] = kept;
  };
  Refinement recalled = refine_placement(t.g, base, {&base, &fast, &liar}, node_seconds, inputs, quick(), o,
                                         std::chrono::steady_clock::now() + std::chrono::seconds(60), &memory);
  EXPECT_EQ(recalled.tried, 1);
  EXPECT_FALSE(recalled.improved);
  ASSERT_EQ(remembered.size(), 1u);
  EXPECT_FALSE(remembered.begin()->second);  // the liar's move lost
  EXPECT_EQ(remembered.begin()->first, std::make_pair(sigmoid, std::string("liar")));
  // A move recalled as lost counts against the tries: with one try, the most promising move (the
  // Relu's, lost before) uses it up, and a later run times nothing again.
  o.refine_max_tries = 1;
  remembered.clear();
  Refinement one = refine_placement(t.g, base, {&base, &fast, &liar}, node_seconds, inputs, quick(), o,
                                    std::chrono::steady_clock::now() + std::chrono::seconds(60), &memory);
  EXPECT_EQ(one.tried, 0);
  EXPECT_TRUE(remembered.empty());
  // No tries allowed: the placement as it was.
  o.refine_max_tries = 0;
  Refinement none = refine_placement(t.g, base, {&base, &fast, &liar}, node_seconds, inputs, quick(), o,
                                     std::chrono::steady_clock::now() + std::chrono::seconds(60));
  EXPECT_FALSE(none.improved);
  EXPECT_EQ(none.tried, 0);
  ASSERT_EQ(none.partitions.size(), 2u);
  for (const Partition& p : none.partitions) EXPECT_EQ(p.backend, &base);
}

// A region (a node and everything downstream of it) moves as a whole when its nodes' expected
// savings add up, though none of them alone is worth a try; the producer that a graph output
// also reads, and that the other backend is expected to run slower, stays.
// A plan on tessera's pool may take moves to one other thread runtime (native's placement moving
// nodes to oneDNN); once one is in, moves to a third runtime are not tried unless mixing is allowed.
TEST(Optimizer, RefinementBringsInAtMostOneOtherThreadRuntime) {
  TestGraph t;
  t.finish({t.op("Sigmoid", {t.op("Relu", {t.input({4, 64})})})});
  ASSERT_EQ(t.g.node(0).op_type, "Relu");
  TimedBackend base("base", {{"Relu", 0.004}, {"Sigmoid", 0.004}});
  TimedBackend omp("omp", {{"Relu", 0.0}}, "openmp");
  TimedBackend pool("pool", {{"Sigmoid", 0.0}}, "pthreadpool");
  const double inf = std::numeric_limits<double>::infinity();
  std::map<const Backend*, std::vector<double>> node_seconds = {
      {&base, {0.004, 0.004}}, {&omp, {1e-6, inf}}, {&pool, {inf, 2e-6}}};
  for (bool mix : {false, true}) {
    OptimizeOptions o;
    o.mix_runtimes = mix;
    Refinement r = refine_placement(t.g, base, {&base, &omp, &pool}, node_seconds, t.inputs, quick(), o,
                                    std::chrono::steady_clock::now() + std::chrono::seconds(60));
    EXPECT_EQ(r.tried, mix ? 2 : 1) << "mix " << mix;
    EXPECT_EQ(r.moves, mix ? 2 : 1) << "mix " << mix;
    std::map<int, std::string> on;
    for (const Partition& p : r.partitions)
      for (int n : p.nodes) on[n] = p.backend->name();
    EXPECT_EQ(on[0], "omp");
    EXPECT_EQ(on[1], mix ? "pool" : "base");
  }
  // A base on its own runtime never moves nodes to another one.
  TimedBackend omp_base("omp_base", {{"Relu", 0.004}, {"Sigmoid", 0.004}}, "openmp");
  node_seconds[&omp_base] = {0.004, 0.004};
  Refinement r = refine_placement(t.g, omp_base, {&omp_base, &pool}, node_seconds, t.inputs, quick(), OptimizeOptions{},
                                  std::chrono::steady_clock::now() + std::chrono::seconds(60));
  EXPECT_EQ(r.tried, 0);
}

TEST(Optimizer, RefinementMovesDownstreamRegions) {
  TestGraph t;
  int x = t.input({4, 64});
  int a = t.op("Relu", {x});
  int b = t.op("Sigmoid", {a});
  t.finish({a, t.op("Relu", {b})});
  std::map<int, std::string> name_of;  // node -> "a", "b", "c"
  for (int n = 0; n < t.g.num_nodes(); ++n) {
    const int in = t.g.node(n).inputs[0];
    name_of[n] = in == x ? "a" : t.g.node(n).op_type == "Sigmoid" ? "b" : "c";
  }
  TimedBackend base("base", {{"Relu", 0.003}, {"Sigmoid", 0.003}});
  TimedBackend fast("fast", {{"Relu", 0.0}, {"Sigmoid", 0.0}});
  std::vector<double> mine(3), theirs(3);
  for (int n = 0; n < 3; ++n) {
    mine[n] = 0.004;
    theirs[n] = name_of[n] == "a" ? 0.010 : 0.003;  // a: expected slower there
  }
  std::map<const Backend*, std::vector<double>> node_seconds = {{&base, mine}, {&fast, theirs}};
  OptimizeOptions o;
  o.refine_min_saving = 0.1;  // 1.2 ms: no single node's 1 ms saving is tried
  o.refine_max_region_share = 1;  // the region is 2 of 3 nodes: most of this small model
  std::vector<NodeSet> remembered;
  MoveMemory memory;
  memory.recall = [](const NodeSet&, const Backend&) -> std::optional<bool> { return std::nullopt; };
  memory.remember = [&](const NodeSet& nodes, const Backend&, bool kept) {
    EXPECT_TRUE(kept);
    remembered.push_back(nodes);
  };
  Refinement r = refine_placement(t.g, base, {&base, &fast}, node_seconds, t.inputs, quick(), o,
                                  std::chrono::steady_clock::now() + std::chrono::seconds(60), &memory);
  EXPECT_EQ(r.tried, 1);
  ASSERT_TRUE(r.improved);
  std::map<std::string, std::string> on;
  for (const Partition& p : r.partitions)
    for (int n : p.nodes) on[name_of[n]] = p.backend->name();
  EXPECT_EQ(on["a"], "base");
  EXPECT_EQ(on["b"], "fast");
  EXPECT_EQ(on["c"], "fast");
  ASSERT_EQ(remembered.size(), 1u);
  EXPECT_EQ(remembered[0].count(), 2);
  // The try is logged for the report, with both end-to-end times.
  ASSERT_EQ(r.log.size(), 1u);
  EXPECT_TRUE(r.log[0].kept);
  EXPECT_EQ(r.log[0].nodes, 2);
  EXPECT_EQ(r.log[0].to, "fast");
  EXPECT_NEAR(r.log[0].expected_saving, 0.002, 1e-9);
  EXPECT_GT(r.log[0].before_seconds, r.log[0].after_seconds);
}

// Nodes the base placement leaves to ref cost ref's time there, and a region may hold nodes only
// ref runs (rec's neck: Reshapes on ref either way, Transposes on ref under oneDNN, on native
// after a move). Chain a: Relu -> b: Identity (ref for both) -> c: Sigmoid (ref under the base,
// expected 4 ms there) -> d: Relu (3 ms a run on the base). Counted as free, c promised no saving
// and b's lack of a time on `fast` emptied every region through it: only d alone was left, below
// the minimum saving.
TEST(Optimizer, RefinementCountsNodesLeftToRefAtRefsTime) {
  TestGraph t;
  int x = t.input({4, 64});
  int a = t.op("Relu", {x});
  int c = t.op("Sigmoid", {t.op("Identity", {a})});
  t.finish({t.op("Relu", {c})});
  TimedBackend base("base", {{"Relu", 0.003}});
  TimedBackend fast("fast", {{"Relu", 0.0}, {"Sigmoid", 0.0}});
  const double inf = std::numeric_limits<double>::infinity();
  std::map<const Backend*, std::vector<double>> node_seconds = {
      {&base, {0.001, inf, inf, 0.001}}, {&fast, {0.0, inf, 0.0, 0.0}}, {&ref_backend(), {0.001, 1e-4, 0.004, 0.001}}};
  OptimizeOptions o;
  o.refine_min_saving = 0.6;         // of the 6.1 ms expected: d alone (1 ms) is not tried
  o.refine_max_region_share = 0.9;  // the whole chain is not a move
  Refinement r = refine_placement(t.g, base, {&base, &fast}, node_seconds, t.inputs, quick(), o,
                                  std::chrono::steady_clock::now() + std::chrono::seconds(60));
  ASSERT_TRUE(r.improved);
  ASSERT_FALSE(r.log.empty());
  EXPECT_NEAR(r.log[0].expected_saving, 0.005, 1e-9);  // c: 4 ms on ref, d: 1 ms on the base
  std::map<std::string, std::string> on;  // op -> backend ("" : ref)
  for (const Partition& p : r.partitions)
    for (int n : p.nodes) on[t.g.node(n).op_type + std::to_string(n)] = p.backend->name();
  EXPECT_EQ(on["Relu0"], "base");
  EXPECT_EQ(on["Sigmoid2"], "fast");
  EXPECT_EQ(on["Relu3"], "fast");
}

// The groups another backend's placement forms alike move together, first, whatever the per-node
// times expect: three Relu + Sigmoid blocks, 1 ms a node on the base, 3 ms a node alone on the
// other backend (no single node or region promises a saving) but 0.2 ms a fused pair there.
TEST(Optimizer, RefinementMovesClassesOfLikeGroupsTogether) {
  TestGraph t;
  int v = t.input({4, 64});
  for (int i = 0; i < 3; ++i) v = t.op("Sigmoid", {t.op("Relu", {v})});
  t.finish({v});
  TimedBackend base("base", {{"Relu", 0.001}, {"Sigmoid", 0.001}});
  PairFusingBackend fuser(0.0002, 0.003);
  std::map<const Backend*, std::vector<double>> node_seconds = {{&base, std::vector<double>(6, 0.001)},
                                                                {&fuser, std::vector<double>(6, 0.003)}};
  OptimizeOptions o;
  Refinement r = refine_placement(t.g, base, {&base, &fuser}, node_seconds, t.inputs, quick(), o,
                                  std::chrono::steady_clock::now() + std::chrono::seconds(60));
  EXPECT_EQ(r.tried, 1);
  ASSERT_TRUE(r.improved);
  ASSERT_EQ(r.partitions.size(), 3u);
  for (const Partition& p : r.partitions) {
    EXPECT_EQ(p.backend, &fuser);
    EXPECT_EQ(p.nodes.count(), 2);
  }
  ASSERT_EQ(r.log.size(), 1u);
  EXPECT_EQ(r.log[0].label, "3 x Relu+Sigmoid");
  EXPECT_EQ(r.log[0].nodes, 6);
  EXPECT_LT(r.log[0].expected_saving, 0);
  EXPECT_GT(r.log[0].before_seconds, 2 * r.log[0].after_seconds);
  // Without class moves nothing is worth a try.
  o.refine_max_class_tries = 0;
  Refinement none = refine_placement(t.g, base, {&base, &fuser}, node_seconds, t.inputs, quick(), o,
                                     std::chrono::steady_clock::now() + std::chrono::seconds(60));
  EXPECT_EQ(none.tried, 0);
  EXPECT_FALSE(none.improved);
}

// The sizes of the regions refine_placement times on a chain of `blocks` Relu + Sigmoid pairs (4 ms
// a node expected on the base, 3 ms on `fast`) whose whole was recalled as lost. Regions only: the
// minimum saving, a tenth of the chain's expected time, is more than a single node saves.
std::vector<int> region_sizes_tried_after_the_chain_lost(int blocks, int max_tries, int* tried) {
  TestGraph t;
  int v = t.input({4, 64});
  for (int i = 0; i < blocks; ++i) v = t.op("Sigmoid", {t.op("Relu", {v})});
  t.finish({v});
  const int nodes = 2 * blocks;
  TimedBackend base("base", {{"Relu", 0.0}, {"Sigmoid", 0.0}});
  TimedBackend fast("fast", {{"Relu", 0.0}, {"Sigmoid", 0.0}});
  std::map<const Backend*, std::vector<double>> node_seconds = {{&base, std::vector<double>(nodes, 0.004)},
                                                                {&fast, std::vector<double>(nodes, 0.003)}};
  OptimizeOptions o;
  o.refine_min_saving = 0.1;
  o.refine_max_region_share = 1;  // the whole model is a region here
  o.refine_max_tries = max_tries;  // the recalled loss counts as one
  std::vector<int> sizes;
  MoveMemory memory;
  memory.recall = [nodes](const NodeSet& set, const Backend&) -> std::optional<bool> {
    if (set.count() == nodes) return false;
    return std::nullopt;
  };
  memory.remember = [&](const NodeSet& set, const Backend&, bool) { sizes.push_back(set.count()); };
  Refinement r = refine_placement(t.g, base, {&base, &fast}, node_seconds, t.inputs, quick(), o,
                                  std::chrono::steady_clock::now() + std::chrono::seconds(60), &memory);
  *tried = r.tried;
  return sizes;
}

// A region recalled as lost (an earlier run timed it) is as one that lost in this run: the regions
// one node away from it are not tried, so a warm run times no move the cold run did not. Four
// nodes: regions of 2, 3 and 4; the 3-node one is one node from the lost one.
TEST(Optimizer, RefinementSkipsRegionsNextToOnesRecalledAsLost) {
  int tried = 0;
  EXPECT_EQ(region_sizes_tried_after_the_chain_lost(2, 24, &tried), std::vector<int>{2});
  EXPECT_EQ(tried, 1);
}

// On long chains the regions near a lost one differ from it by a sixteenth of its nodes: a chain
// of 34 nodes whose whole (34 nodes) lost before: the regions of 33 and 32 nodes are skipped, and
// the first one tried has 31 (the rule of one node tried 32).
TEST(Optimizer, RefinementSkipsRegionsWithinASixteenthOfALostOne) {
  int tried = 0;
  EXPECT_EQ(region_sizes_tried_after_the_chain_lost(17, 2, &tried), std::vector<int>{31});
}

// A region holding most of the base placement's time is the other backend's placement, timed
// on its own: not a move.
TEST(Optimizer, RefinementLeavesRegionsOfMostOfTheModelToTheOtherPlacement) {
  TestGraph t;
  int x = t.input({4, 64});
  int a = t.op("Relu", {x});
  t.finish({t.op("Relu", {t.op("Sigmoid", {a})})});
  TimedBackend base("base", {{"Relu", 0.003}, {"Sigmoid", 0.003}});
  TimedBackend fast("fast", {{"Relu", 0.0}, {"Sigmoid", 0.0}});
  // Per node 4 ms on base; on fast, a 10 ms (its region would not pay), b and c 3 ms: the region
  // {b, c} promises 2 ms and holds 8 of base's 12 ms.
  std::vector<double> mine(3, 0.004), theirs(3, 0.003);
  for (int n = 0; n < 3; ++n)
    if (t.g.node(n).inputs[0] == x) theirs[n] = 0.010;
  std::map<const Backend*, std::vector<double>> node_seconds = {{&base, mine}, {&fast, theirs}};
  for (double share : {0.5, 0.7}) {
    OptimizeOptions o;
    o.refine_min_saving = 0.1;  // no single node's 1 ms saving is tried
    o.refine_max_region_share = share;
    Refinement r = refine_placement(t.g, base, {&base, &fast}, node_seconds, t.inputs, quick(), o,
                                    std::chrono::steady_clock::now() + std::chrono::seconds(60), nullptr);
    EXPECT_EQ(r.tried, share < 2.0 / 3 ? 0 : 1) << share;
    EXPECT_EQ(r.improved, share > 2.0 / 3) << share;
  }
}

// A region that takes in a kept one whole is still tried, and replaces it when the model runs
// faster again (on det: the Resizes upstream of a kept head region, which shrink its boundary).
TEST(Optimizer, RefinementGrowsAKeptRegion) {
  TestGraph t;
  const int x = t.input({4, 64});
  const int a = t.op("Sigmoid", {x});
  t.finish({t.op("Sigmoid", {t.op("Relu", {a})})});
  TimedBackend base("base", {{"Relu", 0.003}, {"Sigmoid", 0.003}});
  TimedBackend fast("fast", {{"Relu", 0.0}, {"Sigmoid", 0.0}});
  // a is expected a little slower on fast (its region then promises less than b's and c's alone),
  // though it runs faster there.
  std::vector<double> mine(3, 0.003), theirs(3, 0.0);
  for (int n = 0; n < 3; ++n)
    if (t.g.node(n).inputs[0] == x) theirs[n] = 0.004;
  std::map<const Backend*, std::vector<double>> node_seconds = {{&base, mine}, {&fast, theirs}};
  OptimizeOptions o;
  o.refine_max_region_share = 1;  // regions of 2 and 3 of 3 nodes
  o.refine_min_saving = 0.45;  // 4 ms: single nodes (3 ms) are not tried, the two regions are
  Refinement r = refine_placement(t.g, base, {&base, &fast}, node_seconds, t.inputs, quick(), o,
                                  std::chrono::steady_clock::now() + std::chrono::seconds(60));
  ASSERT_EQ(r.log.size(), 2u);
  EXPECT_EQ(r.log[0].nodes, 2);  // b and c, 6 ms expected
  EXPECT_TRUE(r.log[0].kept);
  EXPECT_EQ(r.log[1].nodes, 3);  // a, b and c, 5 ms expected, around the kept one
  EXPECT_TRUE(r.log[1].kept);
  EXPECT_EQ(r.moves, 1);  // the grown region replaced the first
  for (const Partition& p : r.partitions) EXPECT_EQ(p.backend, &fast) << SubGraph(t.g, p.nodes).label();
  int covered = 0;
  for (const Partition& p : r.partitions) covered += p.nodes.count();
  EXPECT_EQ(covered, 3);
}

// A region grows upstream only by producers that shrink its boundary: an upsampling Resize read
// only inside joins; an Add of two large tensors, a producer a graph output also reads, and one the
// other backend is expected to run far slower stay out.
TEST(Optimizer, DownstreamRegionsAbsorbProducersThatShrinkTheBoundary) {
  TestGraph t;
  const int small = t.input({1, 4, 2, 2}), big_a = t.input({1, 4, 8, 8}), big_b = t.input({1, 4, 8, 8});
  const int scales = t.constant(Tensor::from_vector<float>({4}, {1, 1, 4, 4}));
  const int up = t.op("Resize", {small, kNoValue, scales}, {{"mode", Attribute::of_string("nearest")}});
  const int slow_up = t.op("Resize", {small, kNoValue, scales}, {{"mode", Attribute::of_string("nearest")}});
  const int sum = t.op("Add", {big_a, big_b});
  const int seen = t.op("Relu", {big_a});  // a graph output reads it too
  const int cat = t.op("Concat", {up, slow_up, sum, seen}, {{"axis", Attribute::of_int(1)}});
  const int head = t.op("Sigmoid", {cat});
  t.finish({head, seen});
  auto producer = [&](int v) {
    for (int n = 0; n < t.g.num_nodes(); ++n)
      if (t.g.node(n).outputs[0] == t.g.find_value(t.g.value(v).name).value()) return n;
    return -1;
  };
  // Values keep their ids across finalize(); nodes are renumbered, so find them by output.
  const int n_up = producer(up), n_slow = producer(slow_up), n_sum = producer(sum), n_seen = producer(seen),
            n_cat = producer(cat), n_head = producer(head);
  std::vector<double> mine(t.g.num_nodes(), 0.001), theirs(t.g.num_nodes(), 0.001);
  theirs[n_slow] = 0.01;  // ten times slower there
  Reachability reach(t.g);
  NodeSet region = downstream_region(t.g, reach, n_cat, mine, theirs);
  EXPECT_EQ(region, NodeSet::of(t.g.num_nodes(), {n_cat, n_head, n_up})) << region.to_string();
  EXPECT_FALSE(region.contains(n_slow));
  EXPECT_FALSE(region.contains(n_sum));
  EXPECT_FALSE(region.contains(n_seen));
  // A backend that cannot run a node downstream gets no region.
  theirs[n_head] = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(downstream_region(t.g, reach, n_cat, mine, theirs).empty());
}

TEST(Optimizer, PlanForAnotherModelIsRefused) {
  TestGraph a = small_net();
  TestGraph b;
  int x = b.input({1, 8, 12, 12});
  b.finish({b.op("Relu", {x})});
  Plan p;
  p.model = "a.onnx";
  p.model_hash = graph_hash(a.g);
  p.partitions.push_back({"ref", {0}, "Relu", "host", -1, 0});
  EXPECT_NE(graph_hash(a.g), graph_hash(b.g));
  SessionOptions so;
  so.plan = p;
  Graph copy = b.g;
  auto session = Session::from_graph(std::move(copy), so);
  ASSERT_FALSE(session.ok());
  EXPECT_NE(session.status().message().find("another model"), std::string::npos) << session.status().to_string();
  // Same model, but a plan naming a backend this build lacks.
  p.model_hash = graph_hash(b.g);
  p.partitions[0].backend = "tpu";
  so.plan = p;
  Graph copy2 = b.g;
  auto s2 = Session::from_graph(std::move(copy2), so);
  ASSERT_FALSE(s2.ok());
  EXPECT_NE(s2.status().message().find("tpu"), std::string::npos);
}

TEST(Optimizer, SingleBackendPlacementsAreTimedSideBySide) {
  TestGraph t = small_net();
  auto rows = time_placements(t.g, nullptr, named_inputs(t), quick());
  ASSERT_FALSE(rows.empty());
  EXPECT_EQ(rows.front().name, "ref");
  for (const PlacementTiming& r : rows) {
    EXPECT_TRUE(r.cost.valid) << r.name << ": " << r.cost.reason;
    EXPECT_GT(r.cost.seconds, 0) << r.name;
  }
  // A plan that cannot be placed is a row with the reason; the others are still timed.
  Plan bad;
  bad.model_hash = graph_hash(t.g);
  std::vector<int> all(t.g.num_nodes());
  for (int n = 0; n < t.g.num_nodes(); ++n) all[n] = n;
  bad.partitions.push_back({"tpu", all, "all", "host", -1, 0});
  auto with_plan = time_placements(t.g, &bad, named_inputs(t), quick());
  ASSERT_EQ(with_plan.size(), rows.size() + 1);
  EXPECT_EQ(with_plan.front().name, "plan");
  EXPECT_FALSE(with_plan.front().cost.valid);
  EXPECT_NE(with_plan.front().cost.reason.find("tpu"), std::string::npos) << with_plan.front().cost.reason;
  for (size_t i = 1; i < with_plan.size(); ++i) EXPECT_TRUE(with_plan[i].cost.valid) << with_plan[i].name;
}

}  // namespace
}  // namespace tessera
