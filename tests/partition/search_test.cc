// The search: optimal against brute force on random graphs, never a cyclic plan (the deadlock
// counterexample), the measurement cap, anytime behaviour, merging, determinism from a cost
// database.
#include "partition/search.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <random>

#include "partition/cached_estimator.h"
#include "partition/mock_estimator.h"
#include "partition/partition_test_util.h"
#include "partition/rules.h"

namespace tessera {
namespace {

using namespace partition_test;

// Independent of partition/contraction: depth-first search for a cycle among the contracted
// groups.
bool acyclic(const Graph& g, const std::vector<NodeSet>& groups) {
  std::vector<int> group_of(g.num_nodes(), -1);
  for (size_t i = 0; i < groups.size(); ++i)
    for (int n : groups[i]) group_of[n] = static_cast<int>(i);
  std::vector<std::set<int>> succ(groups.size());
  for (int n = 0; n < g.num_nodes(); ++n)
    for (int v : g.node(n).inputs) {
      int p = v == kNoValue ? -1 : g.value(v).producer;
      if (p >= 0 && group_of[p] != group_of[n]) succ[group_of[p]].insert(group_of[n]);
    }
  std::vector<int> color(groups.size(), 0);
  std::function<bool(int)> cyclic = [&](int v) {
    color[v] = 1;
    for (int w : succ[v])
      if (color[w] == 1 || (color[w] == 0 && cyclic(w))) return true;
    color[v] = 2;
    return false;
  };
  for (size_t v = 0; v < groups.size(); ++v)
    if (color[v] == 0 && cyclic(static_cast<int>(v))) return false;
  return true;
}

// The plan covers every node exactly once and runs in the order given.
void expect_valid_plan(const Graph& g, const SearchResult& r) {
  NodeSet covered(g.num_nodes());
  std::vector<NodeSet> groups;
  for (const PlannedPartition& p : r.partitions) {
    EXPECT_FALSE(p.candidate.nodes.intersects(covered)) << p.candidate.describe(g);
    covered |= p.candidate.nodes;
    groups.push_back(p.candidate.nodes);
    // Every input of a partition is produced by an earlier one.
    for (int n : p.candidate.nodes)
      for (int v : g.node(n).inputs) {
        int producer = v == kNoValue ? -1 : g.value(v).producer;
        if (producer >= 0 && !p.candidate.nodes.contains(producer)) {
          EXPECT_TRUE(covered.contains(producer));
        }
      }
  }
  EXPECT_EQ(covered.count(), g.num_nodes());
  EXPECT_TRUE(acyclic(g, groups));
}

// Every valid partitioning, by branch and bound over the same candidates (costs are >= 0, so a
// partial sum at or above the best cannot lead to a better one).
// With `transition`, a complete partitioning also pays plan_transition_seconds.
double brute_force_best(const Graph& g, const std::vector<Candidate>& cs, CostEstimator& est,
                        const std::function<double(const Backend*, const Backend*)>& transition = {}) {
  const int n = g.num_nodes();
  std::vector<std::vector<int>> by_first(n);
  std::vector<Cost> costs;
  for (size_t i = 0; i < cs.size(); ++i) {
    by_first[cs[i].nodes.first()].push_back(static_cast<int>(i));
    costs.push_back(est.cost(cs[i]));
  }
  double best = std::numeric_limits<double>::infinity();
  std::vector<NodeSet> chosen;
  std::vector<PlannedPartition> parts;
  std::function<void(const NodeSet&, double)> visit = [&](const NodeSet& covered, double sum) {
    if (sum >= best) return;
    if (covered.count() == n) {
      if (transition) sum += plan_transition_seconds(g, parts, transition);
      if (sum < best && acyclic(g, chosen)) best = sum;
      return;
    }
    int u = (NodeSet::all(n) - covered).first();
    for (int c : by_first[u]) {
      if (!costs[c].valid || cs[c].nodes.intersects(covered)) continue;
      chosen.push_back(cs[c].nodes);
      parts.push_back({cs[c], costs[c]});
      visit(covered | cs[c].nodes, sum + costs[c].seconds);
      chosen.pop_back();
      parts.pop_back();
    }
  };
  visit(NodeSet(n), 0.0);
  return best;
}

// A random DAG of [4,4] float ops; every value nobody reads is an output.
Graph random_graph(std::mt19937& rng, int num_nodes) {
  const std::vector<std::string> unary = {"Relu", "Neg", "Exp", "Sigmoid", "Transpose", "Softmax"};
  const std::vector<std::string> binary = {"Add", "Mul", "MatMul"};
  Graph g;
  std::vector<int> values = {g.add_input("x", f32({4, 4}))};
  std::vector<char> used = {0};
  auto pick = [&]() {
    // Mostly recent values, so that chains form, sometimes any earlier one (residuals).
    size_t lo = rng() % 10 < 7 && values.size() > 3 ? values.size() - 3 : 0;
    size_t i = lo + rng() % (values.size() - lo);
    used[i] = 1;
    return values[i];
  };
  for (int i = 0; i < num_nodes; ++i) {
    bool is_binary = rng() % 10 < 4;
    std::string op_type = is_binary ? binary[rng() % binary.size()] : unary[rng() % unary.size()];
    std::vector<int> inputs = {pick()};
    if (is_binary) inputs.push_back(pick());
    int out = g.add_value('v' + std::to_string(i));
    g.add_node(op_type, inputs, {out}, {}, 'n' + std::to_string(i));
    values.push_back(out);
    used.push_back(0);
  }
  for (size_t i = 1; i < values.size(); ++i)
    if (!used[i]) g.mark_output(values[i]);
  return finalized(std::move(g));
}

// Layers of 2-3 nodes, each reading one or two values of the layer before: crossings (a->b,
// a->d, c->b, c->d) abound, so groups that feed each other do too.
Graph layered_graph(std::mt19937& rng, int num_nodes) {
  const std::vector<std::string> unary = {"Relu", "Neg", "Exp", "Sigmoid"};
  const std::vector<std::string> binary = {"Add", "Mul", "MatMul"};
  Graph g;
  std::vector<int> previous = {g.add_input("x", f32({4, 4}))};
  std::vector<int> all = previous;
  std::set<int> used;
  for (int made = 0; made < num_nodes;) {
    std::vector<int> layer;
    int width = 2 + static_cast<int>(rng() % 2);
    for (int i = 0; i < width && made < num_nodes; ++i, ++made) {
      bool is_binary = previous.size() > 1 && rng() % 10 < 7;
      std::vector<int> inputs = {previous[rng() % previous.size()]};
      if (is_binary) inputs.push_back(previous[rng() % previous.size()]);
      for (int v : inputs) used.insert(v);
      int out = g.add_value('v' + std::to_string(made));
      g.add_node(is_binary ? binary[rng() % binary.size()] : unary[rng() % unary.size()], inputs,
                 {out}, {}, 'n' + std::to_string(made));
      layer.push_back(out);
      all.push_back(out);
    }
    previous = layer;
  }
  for (size_t i = 1; i < all.size(); ++i)
    if (!used.count(all[i])) g.mark_output(all[i]);
  return finalized(std::move(g));
}

struct World {
  FakeBackend fa{
      "fa", FusionStyle::kArbitrary, {"Relu", "Add", "MatMul", "Exp", "Mul", "Transpose"}, 3};
  FakeBackend fb{
      "fb", FusionStyle::kTvmLike, {"Neg", "Add", "Mul", "Relu", "Transpose", "Sigmoid"}, 4};
  FakeBackend fc{"fc",
                 FusionStyle::kNone,
                 {"Relu", "Neg", "Exp", "Sigmoid", "Transpose", "Add", "Mul", "MatMul"}};

  // fa proposes groups with several exits and taps too, so that plans can deadlock.
  std::vector<Candidate> candidates(const Graph& g) const {
    SubGraphConfig loose;
    loose.max_depth = 3;
    RulePtr fa_rule = accepted_rule(only_valid_rule(
        combine_rule(op_by_kind_rule(), {by_kind_combiner({{OpKind::kOpaque, OpKind::kOpaque}})},
                     {3, 5000}),
        loose));
    std::vector<Candidate> cs = fa_rule->candidates(g, fa);
    for (const Backend* b : std::vector<const Backend*>{&fb, &fc})
      for (Candidate& c : rules_for(*b)->candidates(g, *b)) cs.push_back(std::move(c));
    for (Candidate& c : host_rule()->candidates(g, ref_backend())) cs.push_back(std::move(c));
    return dedupe_candidates(std::move(cs));
  }

  static MockCostModel random_costs(std::mt19937& rng) {
    MockCostModel m;
    std::uniform_real_distribution<double> u(0.5e-3, 2e-3);
    for (const char* b : {"fa", "fb", "fc", "ref"})
      for (const char* op :
           {"Relu", "Neg", "Exp", "Sigmoid", "Transpose", "Softmax", "Add", "Mul", "MatMul"})
        m.op_seconds[b][op] = (std::string(b) == "ref" ? 1.5 : 1.0) * u(rng);
    m.invalid_ops["fb"] = {"Mul"};  // fb computes Mul wrongly: its candidates with Mul are out
    return m;
  }
};

TEST(Search, OptimalAgainstBruteForceOnRandomGraphs) {
  World w;
  int cases_with_groups = 0;
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    std::mt19937 rng(seed);
    Graph g = random_graph(rng, 3 + static_cast<int>(seed % 10));  // 3..12 nodes
    std::vector<Candidate> cs = w.candidates(g);
    MockCostModel model = World::random_costs(rng);
    MockEstimator brute_est(g, model), search_est(g, model);
    double best = brute_force_best(g, cs, brute_est);
    SearchOptions no_merge;
    no_merge.merge = false;
    auto r = search_plan(g, cs, search_est, no_merge);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_TRUE(r->optimal);
    EXPECT_FALSE(r->fallback);
    EXPECT_NEAR(r->seconds, best, 1e-12)
        << "seed " << seed << ", " << g.num_nodes() << " nodes, " << cs.size() << " candidates";
    expect_valid_plan(g, *r);
    for (const PlannedPartition& p : r->partitions)
      cases_with_groups += p.candidate.nodes.count() > 1;
    // One state per covered set (the large-graph mode): still a valid plan, never below the optimum.
    SearchOptions coarse = no_merge;
    coarse.exact = false;
    MockEstimator coarse_est(g, model);
    auto approx = search_plan(g, cs, coarse_est, coarse);
    ASSERT_TRUE(approx.ok());
    EXPECT_TRUE(approx->finished);
    EXPECT_FALSE(approx->optimal);
    EXPECT_GE(approx->seconds, best - 1e-12);
    expect_valid_plan(g, *approx);
    // Merging afterwards never makes the plan worse.
    MockEstimator merge_est(g, model);
    auto merged = search_plan(g, cs, merge_est);
    ASSERT_TRUE(merged.ok());
    EXPECT_LE(merged->seconds, best + 1e-12);
    expect_valid_plan(g, *merged);
  }
  EXPECT_GT(cases_with_groups, 10);  // the plans do use fused groups
}

// Transitions between backends (different prices per pair) change which plan is best; the search
// charges them as a plan pays them (per tensor and consuming partition) and stays optimal.
TEST(Search, OptimalWithTransitionCostsAgainstBruteForce) {
  World w;
  int cases_with_crossings = 0, cases_changed = 0;
  for (uint32_t seed = 1; seed <= 30; ++seed) {
    std::mt19937 rng(seed + 100);
    Graph g = random_graph(rng, 3 + static_cast<int>(seed % 8));  // 3..10 nodes
    std::vector<Candidate> cs = w.candidates(g);
    MockCostModel model = World::random_costs(rng);
    std::uniform_real_distribution<double> u(0.1e-3, 1.5e-3);
    std::map<std::pair<const Backend*, const Backend*>, double> price;
    auto transition = [&](const Backend* from, const Backend* to) {
      EXPECT_NE(from, to);
      auto [it, fresh] = price.try_emplace({from, to}, 0.0);
      if (fresh) it->second = u(rng);
      return it->second;
    };
    MockEstimator brute_est(g, model), search_est(g, model), free_est(g, model);
    double best = brute_force_best(g, cs, brute_est, transition);
    SearchOptions opts;
    opts.merge = false;
    opts.transition = transition;
    auto r = search_plan(g, cs, search_est, opts);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_TRUE(r->optimal);
    EXPECT_NEAR(r->seconds, best, 1e-12) << "seed " << seed << ", " << g.num_nodes() << " nodes";
    EXPECT_NEAR(r->transition_seconds, plan_transition_seconds(g, r->partitions, transition), 1e-15);
    expect_valid_plan(g, *r);
    cases_with_crossings += r->transition_seconds > 0;
    SearchOptions free_opts;
    free_opts.merge = false;
    auto free_plan = search_plan(g, cs, free_est, free_opts);
    ASSERT_TRUE(free_plan.ok());
    cases_changed += plan_transition_seconds(g, free_plan->partitions, transition) + free_plan->seconds > best + 1e-12;
  }
  EXPECT_GT(cases_with_crossings, 3);
  EXPECT_GT(cases_changed, 3);  // ignoring transitions (Collage) picks worse plans
}

// A*: with a consistent estimate (each uncovered node at most the cheapest cost per node of any
// candidate holding it) the plan stays optimal, and fewer candidates are measured.
TEST(Search, AStarWithAConsistentEstimateStaysOptimalAndMeasuresLess) {
  World w;
  int64_t with = 0, without = 0;
  for (uint32_t seed = 1; seed <= 30; ++seed) {
    std::mt19937 rng(seed + 300);
    Graph g = random_graph(rng, 4 + static_cast<int>(seed % 9));
    std::vector<Candidate> cs = w.candidates(g);
    MockCostModel model = World::random_costs(rng);
    MockEstimator probe(g, model);
    std::vector<double> per_node(g.num_nodes(), std::numeric_limits<double>::infinity());
    for (const Candidate& c : cs) {
      Cost cost = probe.cost(c);
      if (!cost.valid) continue;
      for (int n : c.nodes) per_node[n] = std::min(per_node[n], cost.seconds / c.nodes.count());
    }
    for (int n = 0; n < g.num_nodes(); ++n) {  // host singletons the search adds itself
      Cost host = probe.cost(Candidate{NodeSet::of(g.num_nodes(), {n}), &ref_backend(), "host"});
      per_node[n] = std::min(per_node[n], host.seconds);
    }
    MockEstimator brute_est(g, model), plain_est(g, model), astar_est(g, model);
    double best = brute_force_best(g, cs, brute_est);
    SearchOptions plain;
    plain.merge = false;
    SearchOptions astar = plain;
    astar.remaining = [&](const NodeSet& covered) {
      double h = 0;
      for (int n = 0; n < g.num_nodes(); ++n)
        if (!covered.contains(n)) h += per_node[n];
      return h;
    };
    auto r = search_plan(g, cs, astar_est, astar);
    auto p = search_plan(g, cs, plain_est, plain);
    ASSERT_TRUE(r.ok() && p.ok());
    EXPECT_NEAR(r->seconds, best, 1e-12) << "seed " << seed;
    expect_valid_plan(g, *r);
    with += static_cast<int64_t>(r->evaluated.size());
    without += static_cast<int64_t>(p->evaluated.size());
  }
  EXPECT_LT(with, without);
}

// An upper bound from elsewhere: below the optimum the search reports that no plan beats it;
// above, it finds the optimum as before.
TEST(Search, UpperBoundFromAnotherSearch) {
  World w;
  for (uint32_t seed = 1; seed <= 10; ++seed) {
    std::mt19937 rng(seed + 500);
    Graph g = random_graph(rng, 5 + static_cast<int>(seed % 6));
    std::vector<Candidate> cs = w.candidates(g);
    MockCostModel model = World::random_costs(rng);
    MockEstimator e1(g, model), e2(g, model), e3(g, model);
    SearchOptions o;
    o.merge = false;
    auto free = search_plan(g, cs, e1, o);
    ASSERT_TRUE(free.ok());
    o.upper_bound = free->seconds * 0.999;
    auto below = search_plan(g, cs, e2, o);
    ASSERT_TRUE(below.ok());
    EXPECT_TRUE(below->above_bound);
    EXPECT_TRUE(below->finished);
    expect_valid_plan(g, *below);  // still a runnable (greedy) plan
    o.upper_bound = free->seconds * 1.5;
    auto above = search_plan(g, cs, e3, o);
    ASSERT_TRUE(above.ok());
    EXPECT_FALSE(above->above_bound);
    EXPECT_NEAR(above->seconds, free->seconds, 1e-12);
  }
}

// One cheap backend that fuses any convex pair, with any number of exits: many
// tempting groups feed each other, and which grouping of the covered nodes a path chose decides
// which groups may follow.
TEST(Search, OptimalAgainstBruteForceOnLayeredGraphs) {
  FakeBackend fd("fd", FusionStyle::kArbitrary,
                 {"Relu", "Neg", "Exp", "Sigmoid", "Add", "Mul", "MatMul"}, 3);
  // Pairs at most, so that a pair is the best a group can do and crossing pairs tempt.
  fd.accept_fn = [](const SubGraph& sg) {
    return sg.size() <= 2 ? Status() : unimplemented("pairs at most");
  };
  SubGraphConfig loose;
  loose.max_depth = 3;
  RulePtr rule = accepted_rule(only_valid_rule(
      combine_rule(op_by_kind_rule(), {by_kind_combiner({{OpKind::kOpaque, OpKind::kOpaque}})},
                   {3, 20000}),
      loose));
  int cyclic_temptations = 0;
  for (uint32_t seed = 1; seed <= 150; ++seed) {
    std::mt19937 rng(seed * 7919);
    Graph g = layered_graph(rng, 4 + static_cast<int>(seed % 9));  // 4..12 nodes
    std::vector<Candidate> cs = rule->candidates(g, fd);
    for (Candidate& c : host_rule()->candidates(g, ref_backend())) cs.push_back(std::move(c));
    MockCostModel model;
    std::uniform_real_distribution<double> u(0.5e-3, 2e-3);
    for (const char* op : {"Relu", "Neg", "Exp", "Sigmoid", "Add", "Mul", "MatMul"}) {
      model.op_seconds["fd"][op] = u(rng);
      model.op_seconds["ref"][op] = 3 * u(rng);
    }
    model.group_discount = 0.6;
    MockEstimator brute_est(g, model), search_est(g, model);
    double best = brute_force_best(g, cs, brute_est);
    SearchOptions no_merge;
    no_merge.merge = false;
    auto r = search_plan(g, cs, search_est, no_merge);
    ASSERT_TRUE(r.ok()) << "seed " << seed << ": " << r.status().to_string();
    EXPECT_NEAR(r->seconds, best, 1e-12)
        << "seed " << seed << ", " << g.num_nodes() << " nodes, " << cs.size() << " candidates";
    expect_valid_plan(g, *r);
    // Would the cheapest covering ignoring executability have been cyclic?
    MockEstimator any_est(g, model);
    double unconstrained = std::numeric_limits<double>::infinity();
    {
      const int n = g.num_nodes();
      std::vector<std::vector<int>> by_first(n);
      for (size_t i = 0; i < cs.size(); ++i)
        by_first[cs[i].nodes.first()].push_back(static_cast<int>(i));
      std::function<void(const NodeSet&, double)> visit = [&](const NodeSet& covered, double sum) {
        if (sum >= unconstrained) return;
        if (covered.count() == n) {
          unconstrained = sum;
          return;
        }
        int first = (NodeSet::all(n) - covered).first();
        for (int c : by_first[first])
          if (!cs[c].nodes.intersects(covered))
            visit(covered | cs[c].nodes, sum + any_est.cost(cs[c]).seconds);
      };
      visit(NodeSet(n), 0.0);
    }
    cyclic_temptations += unconstrained < best - 1e-12;
  }
  EXPECT_GT(cyclic_temptations, 5);  // the test does exercise the executability check
}

TEST(Search, MutuallyFeedingPartitionsAreNeverBothChosen) {
  Graph g = mutually_feeding();
  FakeBackend fa("fa", FusionStyle::kArbitrary, {"Relu", "Neg", "Add", "Mul"});
  NodeSet p = nodes_named(g, {"A", "D"}), q = nodes_named(g, {"C", "B"});
  Reachability reach(g);
  ASSERT_TRUE(reach.is_convex(p) && reach.is_convex(q));
  std::vector<Candidate> cs = {{p, &fa, "test"}, {q, &fa, "test"}};
  MockCostModel model;
  model.backend_op_seconds = {{"fa", 1e-3}, {"ref", 10e-3}};
  MockEstimator est(g, model);
  auto r = search_plan(g, cs, est);
  ASSERT_TRUE(r.ok());
  expect_valid_plan(g, *r);
  int groups = 0;
  for (const PlannedPartition& part : r->partitions) groups += part.candidate.nodes.count() == 2;
  EXPECT_EQ(groups, 1);
  EXPECT_NEAR(r->seconds, 1.5e-3 + 20e-3,
              1e-12);  // one pair (2 ops at 0.75) and two ref singletons
  EXPECT_TRUE(r->optimal);
}

// Costs from a table by node names ("a,e"); candidates not in it are invalid.
class TableEstimator final : public CostEstimator {
 public:
  TableEstimator(const Graph& g, std::map<std::string, double> table)
      : g_(g), table_(std::move(table)) {}
  Cost cost(const Candidate& c) override {
    auto it = table_.find(names_of(g_, c.nodes));
    return it == table_.end() ? Cost::invalid("not in the table") : Cost::of(it->second);
  }

 private:
  const Graph& g_;
  std::map<std::string, double> table_;
};

// The same covered set {c, a, e}, reached two ways: {c} then {a, e} (cost 2), or {c, e} then {a}
// (cost 2.5). Only the second lets {p, q} follow: with {a, e} chosen, a -> q and p -> e make
// {a, e} and {p, q} feed each other. A search keyed by covered nodes alone would keep the first
// and end at 4; keyed by the open groups too, it finds 3.5.
TEST(Search, StatesRememberHowCoveredNodesWereGrouped) {
  Graph g;
  int x = g.add_input("x", f32({4}));
  int vc = g.add_value("vc"), va = g.add_value("va"), vp = g.add_value("vp"),
      vq = g.add_value("vq"), ve = g.add_value("ve");
  g.add_node("Exp", {x}, {vc}, {}, "c");
  g.add_node("Relu", {x}, {va}, {}, "a");
  g.add_node("Sigmoid", {x}, {vp}, {}, "p");
  g.add_node("Add", {va, vp}, {vq}, {}, "q");
  g.add_node("Add", {vp, vc}, {ve}, {}, "e");
  g.mark_output(vc);  // first, so that c comes first in post-DFS order: c, a, p, q, e
  g.mark_output(vq);
  g.mark_output(ve);
  g = finalized(std::move(g));
  ASSERT_EQ(names_of(g, NodeSet::all(g.num_nodes())), "c,a,p,q,e");
  FakeBackend fd("fd", FusionStyle::kArbitrary, {"Exp", "Relu", "Sigmoid", "Add"});
  std::vector<Candidate> cs;
  for (auto names : {"c", "a", "p", "q", "e", "a,e", "c,e", "p,q"}) {
    NodeSet s(g.num_nodes());
    for (int n = 0; n < g.num_nodes(); ++n)
      if ((',' + std::string(names) + ',').find(',' + g.node(n).name + ',') != std::string::npos)
        s.add(n);
    cs.push_back({s, &fd, "test"});
  }
  TableEstimator est(
      g, {{"c", 1}, {"a", 1}, {"p", 1}, {"q", 1}, {"e", 1}, {"a,e", 1}, {"c,e", 1.5}, {"p,q", 1}});
  SearchOptions no_merge;
  no_merge.merge = false;
  auto r = search_plan(g, cs, est, no_merge);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_DOUBLE_EQ(r->seconds, 3.5);
  expect_valid_plan(g, *r);
}

TEST(Search, MeasurementCapIsHonoured) {
  World w;
  std::mt19937 rng(7);
  Graph g = random_graph(rng, 10);
  std::vector<Candidate> cs = w.candidates(g);
  MockCostModel model = World::random_costs(rng);
  model.max_measurements = 6;
  MockEstimator est(g, model);
  auto r = search_plan(g, cs, est);
  ASSERT_TRUE(r.ok());
  EXPECT_LE(est.measurements(), 6);
  EXPECT_GT(est.refused(), 0);
  expect_valid_plan(g, *r);
  bool reported = false;
  for (const PlannedPartition& e : r->evaluated) reported |= !e.cost.measured;
  EXPECT_TRUE(reported);  // the refusals show up among the evaluated candidates

  model.max_measurements = 100000;
  MockEstimator unlimited(g, model);
  SearchOptions no_merge;
  no_merge.merge = false;
  auto full = search_plan(g, cs, unlimited, no_merge);
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(unlimited.refused(), 0);
  EXPECT_EQ(unlimited.measurements(),
            static_cast<int>(full->evaluated.size()));  // each measured once
}

TEST(Search, MeasuresLazily) {
  // A chain of 8 nodes; fa fuses any 1..8 consecutive ones cheaply, ref is expensive.
  Graph g;
  int v = g.add_input("x", f32({4}));
  for (int i = 0; i < 8; ++i) {
    int out = g.add_value('v' + std::to_string(i));
    g.add_node(i % 2 ? "Neg" : "Relu", {v}, {out}, {}, 'n' + std::to_string(i));
    v = out;
  }
  g.mark_output(v);
  g = finalized(std::move(g));
  FakeBackend fa("fa", FusionStyle::kArbitrary, {"Relu", "Neg"}, 8);
  std::vector<Candidate> cs = rules_for(fa, {8, 10000})->candidates(g, fa);
  EXPECT_EQ(cs.size(), 36u);  // every run of consecutive nodes
  MockCostModel model;
  model.backend_op_seconds = {{"fa", 1e-3}, {"ref", 5e-3}};
  model.group_discount = 1.0;  // a group costs as much as one of its ops: the whole chain wins
  MockEstimator est(g, model);
  auto r = search_plan(g, cs, est);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->partitions.size(), 1u);
  EXPECT_EQ(r->partitions[0].candidate.nodes.count(), 8);
  // The candidates from the first node (8 runs and its reference singleton) must be measured;
  // most others never are: the states they extend already cost as much as the whole chain (up
  // to rounding, which lets a few through).
  EXPECT_GE(est.measurements(), 9);
  EXPECT_LT(est.measurements(), 20);
}

TEST(Search, DeadlineFallsBackToAValidPlan) {
  World w;
  std::mt19937 rng(11);
  Graph g = random_graph(rng, 9);
  std::vector<Candidate> cs = w.candidates(g);
  MockEstimator est(g, World::random_costs(rng));
  SearchOptions options;
  options.deadline = std::chrono::steady_clock::now();
  auto r = search_plan(g, cs, est, options);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->optimal);
  EXPECT_TRUE(r->fallback);
  EXPECT_EQ(est.calls(), 0);
  EXPECT_EQ(static_cast<int>(r->partitions.size()), g.num_nodes());  // reference singletons
  expect_valid_plan(g, *r);

  // Stopped part-way: whatever it has, it returns a valid plan, no better than the optimum.
  for (int budget : {1, 5, 20, 60}) {
    MockEstimator limited(g, World::random_costs(rng));
    SearchOptions stop_early;
    stop_early.stop = [&] { return limited.calls() >= budget; };
    auto partial = search_plan(g, cs, limited, stop_early);
    ASSERT_TRUE(partial.ok());
    expect_valid_plan(g, *partial);
  }
}

TEST(Search, MergesTouchingPartitionsOfOneBackend) {
  Graph g = diamond();
  FakeBackend fa("fa", FusionStyle::kArbitrary, {"Relu", "Neg", "Exp", "Add"});
  std::vector<Candidate> cs = op_by_kind_rule()->candidates(g, fa);  // singletons only
  MockCostModel model;
  model.backend_op_seconds = {{"fa", 1e-3}, {"ref", 10e-3}};
  MockEstimator est(g, model);
  std::vector<SearchProgress> seen;
  SearchOptions options;
  options.progress = [&](const SearchProgress& p) { seen.push_back(p); };
  auto r = search_plan(g, cs, est, options);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->partitions.size(), 1u);  // four singletons merged step by step
  EXPECT_EQ(r->merges, 3);
  EXPECT_EQ(r->partitions[0].candidate.rule_name, "merge");
  EXPECT_NEAR(r->seconds, 4e-3 * (1 - 0.5 * 0.75), 1e-12);
  ASSERT_FALSE(seen.empty());
  EXPECT_NEAR(seen.back().best_seconds, r->seconds, 1e-15);
  EXPECT_EQ(seen.back().num_nodes, 4);

  // A backend that refuses groups keeps its singletons.
  fa.accept_fn = [](const SubGraph& sg) {
    return sg.size() == 1 ? Status() : unimplemented("singles");
  };
  MockEstimator est2(g, model);
  auto singles = search_plan(g, cs, est2);
  ASSERT_TRUE(singles.ok());
  EXPECT_EQ(singles->partitions.size(), 4u);
  EXPECT_EQ(singles->merges, 0);
}

std::string plan_text(const Graph& g, const SearchResult& r) {
  std::string s;
  for (const PlannedPartition& p : r.partitions) s += p.candidate.describe(g) + "; ";
  return s;
}

TEST(Search, DeterministicGivenACostDatabase) {
  std::string path =
      testing::TempDir() + "/search_determinism_" + std::to_string(::getpid()) + ".sqlite";
  std::filesystem::remove(path);
  World w;
  std::mt19937 rng(5);
  Graph g = random_graph(rng, 12);
  std::vector<Candidate> cs = w.candidates(g);
  MockCostModel model = World::random_costs(rng);
  std::string first;
  int measured = 0;
  {
    auto db = CostDatabase::open(path);
    ASSERT_TRUE(db.ok()) << db.status().to_string();
    MockEstimator mock(g, model);
    CachedEstimator cached(g, db->get(), mock, 2, "test cpu");
    auto r = search_plan(g, cs, cached);
    ASSERT_TRUE(r.ok());
    first = plan_text(g, *r);
    measured = mock.measurements();
    EXPECT_GT(measured, 0);
  }
  for (int run = 0; run < 2; ++run) {
    auto db = CostDatabase::open(path);
    ASSERT_TRUE(db.ok());
    MockCostModel other = World::random_costs(rng);  // different costs: must not be consulted
    MockEstimator mock(g, other);
    CachedEstimator cached(g, db->get(), mock, 2, "test cpu");
    auto r = search_plan(g, cs, cached);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(plan_text(g, *r), first);
    EXPECT_EQ(mock.calls(), 0);  // a second optimize measures nothing new
    EXPECT_GT(cached.hits(), 0);
  }
  // Another thread count is another key: measured afresh.
  auto db = CostDatabase::open(path);
  ASSERT_TRUE(db.ok());
  MockEstimator mock(g, model);
  CachedEstimator cached(g, db->get(), mock, 4, "test cpu");
  ASSERT_TRUE(search_plan(g, cs, cached).ok());
  EXPECT_GT(mock.calls(), 0);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace tessera
