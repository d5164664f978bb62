// Placement and execution of partitions: greedy grouping keeps groups convex, the executor runs
// compiled partitions in dependency order and refuses partitions that feed each other.
#include "runtime/placement.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <random>
#include <set>

#include "runtime/executor.h"

namespace tessera {
namespace {

// A test backend that runs any group of its ops by evaluating the nodes one after another with
// the reference kernels, and counts how many kernels it compiled.
class GroupingBackend final : public Backend {
 public:
  explicit GroupingBackend(std::set<std::string> ops) : ops_(std::move(ops)) {}
  std::string name() const override { return "grouping"; }
  std::string version() const override { return "test"; }
  Status available() const override { return Status(); }
  FusionStyle fusion_style() const override { return FusionStyle::kArbitrary; }
  Status supports(const Graph& g, int n) const override {
    return ops_.count(g.node(n).op_type) ? Status() : unimplemented("not a grouping op");
  }
  Status accepts(const SubGraph&) const override { return Status(); }
  std::vector<std::string> claimed_patterns() const override { return {}; }
  Result<std::unique_ptr<Kernel>> compile(const SubGraph& sg, const CompileOptions&) const override {
    ++compiled;
    return std::unique_ptr<Kernel>(new GroupKernel(sg));
  }
  RegionRunner region_runner() const override { return runner; }
  mutable int compiled = 0;
  RegionRunner runner = nullptr;  // as if its kernels ran on threads of their own
  // The pool's region runner as each kernel run saw it.
  static inline std::vector<RegionRunner> runners_seen;

 private:
  class GroupKernel final : public Kernel {
   public:
    explicit GroupKernel(const SubGraph& sg) : sg_(sg) {}
    Status run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs,
               KernelRunContext& ctx) override {
      const Graph& g = sg_.graph();
      runners_seen.push_back(ctx.pool ? ctx.pool->region_runner() : nullptr);
      std::map<int, Tensor> vals;
      for (size_t i = 0; i < inputs.size(); ++i) vals[sg_.inputs()[i]] = *inputs[i];
      for (int n : sg_.nodes()) {
        const Node& node = g.node(n);
        std::vector<const Tensor*> in;
        for (int v : node.inputs) in.push_back(g.value(v).constant ? &*g.value(v).constant : &vals.at(v));
        RefKernelContext kctx(node, in, ctx.alloc, ctx.pool);
        TESSERA_RETURN_IF_ERROR((*RefKernelTable::global().find("", node.op_type))(kctx));
        vals[node.outputs[0]] = kctx.outputs()[0];
      }
      for (size_t o = 0; o < sg_.outputs().size(); ++o) outputs[o] = vals.at(sg_.outputs()[o]);
      return Status();
    }

   private:
    SubGraph sg_;
  };
  std::set<std::string> ops_;
};

Tensor random_floats(std::vector<int64_t> dims, uint64_t seed) {
  Tensor t(DType::kFloat32, std::move(dims));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

Result<std::vector<Tensor>> run(const Graph& g, const std::vector<Partition>& parts, const std::vector<Tensor>& in) {
  TESSERA_ASSIGN_OR_RETURN(GraphExecutor e, GraphExecutor::create(g, parts));
  BufferPool buffers;
  ThreadPool pool(2);
  RunStats stats;
  return e.run(in, {}, buffers, &pool, stats);
}

int node_named(const Graph& g, const std::string& name) {
  for (int n = 0; n < g.num_nodes(); ++n)
    if (g.node(n).name == name) return n;
  return -1;
}

// x -> relu -> neg -> exp --------> add -> y
//        \_________________________/
// With relu, neg and add on the backend but exp not, {relu, neg, add} is not convex (the path
// relu -> neg -> exp -> add leaves and comes back): add must be a partition of its own.
Graph diamond() {
  Graph g;
  g.opsets[""] = 17;
  int x = g.add_input("x", TensorType::of(DType::kFloat32, {5, 7}));
  int r = g.add_value("r"), n = g.add_value("n"), e = g.add_value("e"), y = g.add_value("y");
  g.add_node("Relu", {x}, {r}, {}, "relu");
  g.add_node("Neg", {r}, {n}, {}, "neg");
  g.add_node("Exp", {n}, {e}, {}, "exp");
  g.add_node("Add", {r, e}, {y}, {}, "add");
  g.mark_output(y);
  TESSERA_CHECK(g.finalize().ok());
  return g;
}

TEST(Placement, GroupsStayConvex) {
  Graph g = diamond();
  GroupingBackend b({"Relu", "Neg", "Add"});
  auto parts = place_on_backend(g, b);
  ASSERT_TRUE(parts.ok()) << parts.status().to_string();
  ASSERT_EQ(parts->size(), 2u);
  Reachability reach(g);
  std::set<std::vector<int>> groups;
  for (const Partition& p : *parts) {
    EXPECT_TRUE(reach.is_convex(p.nodes));
    groups.insert(p.nodes.to_vector());
  }
  std::vector<int> relu_neg = {node_named(g, "relu"), node_named(g, "neg")};
  std::sort(relu_neg.begin(), relu_neg.end());
  EXPECT_TRUE(groups.count(relu_neg));
  EXPECT_TRUE(groups.count({node_named(g, "add")}));

  // The partitions plus exp on ref compute what the reference computes.
  Tensor x = random_floats({5, 7}, 3);
  auto want = run(g, {}, {x});
  auto got = run(g, *parts, {x});
  ASSERT_TRUE(want.ok() && got.ok());
  EXPECT_EQ(std::memcmp(want->at(0).raw_data(), got->at(0).raw_data(), want->at(0).nbytes()), 0);
}

TEST(Placement, WholeChainBecomesOneKernel) {
  Graph g = diamond();
  GroupingBackend b({"Relu", "Neg", "Exp", "Add"});
  auto parts = place_on_backend(g, b);
  ASSERT_TRUE(parts.ok());
  ASSERT_EQ(parts->size(), 1u);
  EXPECT_EQ(parts->front().nodes.count(), 4);
  auto e = GraphExecutor::create(g, *parts);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(b.compiled, 1);
  EXPECT_EQ(e->steps_per_backend().at("grouping"), 1);
}

// Runs the shares one after another on the caller (a valid runner: a share that does not run
// in parallel is still run), counting regions.
std::atomic<int> sequential_regions{0};
void sequential_runner(int n, void* ctx, void (*body)(void*, int)) {
  ++sequential_regions;
  for (int t = 0; t < n; ++t) body(ctx, t);
}

TEST(Placement, PlanWithAnOwnThreadRuntimeRunsThePoolsLoopsThere) {
  // relu, neg on a backend with its own threads; exp, add on one without: during the run, every
  // kernel sees the pool handing its loops to the first backend's runner; after it, the pool's
  // own workers again.
  Graph g = diamond();
  GroupingBackend own({"Relu", "Neg"}), plain({"Exp", "Add"});
  own.runner = &sequential_runner;
  std::vector<Partition> parts = {
      {NodeSet::of(g.num_nodes(), {node_named(g, "relu"), node_named(g, "neg")}), &own},
      {NodeSet::of(g.num_nodes(), {node_named(g, "exp")}), &plain},
      {NodeSet::of(g.num_nodes(), {node_named(g, "add")}), &plain}};
  auto e = GraphExecutor::create(g, parts);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  BufferPool buffers;
  ThreadPool pool(2);
  RunStats stats;
  GroupingBackend::runners_seen.clear();
  sequential_regions = 0;
  const Tensor x = random_floats({5, 7}, 4);
  auto got = e->run({x}, {}, buffers, &pool, stats);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  ASSERT_EQ(GroupingBackend::runners_seen.size(), 3u);
  for (RegionRunner r : GroupingBackend::runners_seen) EXPECT_EQ(r, &sequential_runner);
  EXPECT_EQ(pool.region_runner(), nullptr);
  auto want = run(g, {}, {x});
  ASSERT_TRUE(want.ok());
  EXPECT_EQ(std::memcmp(want->at(0).raw_data(), got->at(0).raw_data(), want->at(0).nbytes()), 0);
  pool.parallel_for(1000, 1, [](int64_t, int64_t) {});
  EXPECT_EQ(sequential_regions.load(), 0);  // no loop of this graph ran in parallel ...
  // ... but one does with the runner set, and it runs through it.
  pool.set_region_runner(&sequential_runner);
  pool.parallel_for(1000, 1, [](int64_t, int64_t) {});
  EXPECT_EQ(sequential_regions.load(), 1);

  // Without an own-thread backend in the plan, the pool keeps its workers.
  pool.set_region_runner(nullptr);
  GroupingBackend::runners_seen.clear();
  auto plain_only = GraphExecutor::create(g, {{NodeSet::of(g.num_nodes(), {node_named(g, "exp")}), &plain}});
  ASSERT_TRUE(plain_only.ok());
  ASSERT_TRUE(plain_only->run({x}, {}, buffers, &pool, stats).ok());
  ASSERT_EQ(GroupingBackend::runners_seen.size(), 1u);
  EXPECT_EQ(GroupingBackend::runners_seen[0], nullptr);
}

TEST(Placement, SubGraphBoundary) {
  Graph g = diamond();
  NodeSet s = NodeSet::of(g.num_nodes(), {node_named(g, "neg"), node_named(g, "exp")});
  SubGraph sg(g, s);
  ASSERT_EQ(sg.inputs().size(), 1u);
  EXPECT_EQ(g.value(sg.inputs()[0]).name, "r");
  ASSERT_EQ(sg.outputs().size(), 1u);
  EXPECT_EQ(g.value(sg.outputs()[0]).name, "e");
  EXPECT_EQ(sg.label(), "Neg+Exp");
}

// Two convex partitions that each feed the other: P = {a, d}, Q = {c, b} with a -> b and c -> d.
// Each is convex (no path leaves and re-enters it), yet contracted they form a cycle, so they
// cannot run one after the other. The executor must refuse them.
TEST(Placement, ConvexPartitionsThatFeedEachOtherAreRefused) {
  Graph g;
  g.opsets[""] = 17;
  int x = g.add_input("x", TensorType::of(DType::kFloat32, {3}));
  int a = g.add_value("a"), c = g.add_value("c"), b = g.add_value("b"), d = g.add_value("d");
  g.add_node("Relu", {x}, {a}, {}, "A");
  g.add_node("Neg", {x}, {c}, {}, "C");
  g.add_node("Add", {a, c}, {b}, {}, "B");  // reads A (in P) from Q
  g.add_node("Mul", {c, a}, {d}, {}, "D");  // reads C (in Q) from P
  g.mark_output(b);
  g.mark_output(d);
  ASSERT_TRUE(g.finalize().ok());
  int n = g.num_nodes();
  NodeSet p = NodeSet::of(n, {node_named(g, "A"), node_named(g, "D")});
  NodeSet q = NodeSet::of(n, {node_named(g, "C"), node_named(g, "B")});
  Reachability reach(g);
  ASSERT_TRUE(reach.is_convex(p));
  ASSERT_TRUE(reach.is_convex(q));
  GroupingBackend be({"Relu", "Neg", "Add", "Mul"});
  auto e = GraphExecutor::create(g, {{p, &be}, {q, &be}});
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("cycle"), std::string::npos) << e.status().message();
}

TEST(Placement, OverlappingPartitionsAreRefused) {
  Graph g = diamond();
  GroupingBackend b({"Relu", "Neg", "Exp", "Add"});
  NodeSet s = NodeSet::of(g.num_nodes(), {node_named(g, "relu")});
  auto e = GraphExecutor::create(g, {{s, &b}, {s, &b}});
  EXPECT_FALSE(e.ok());
}

TEST(Placement, NonConvexSetIsDetected) {
  Graph g = diamond();
  Reachability reach(g);
  EXPECT_FALSE(reach.is_convex(NodeSet::of(g.num_nodes(), {node_named(g, "relu"), node_named(g, "add")})));
  EXPECT_TRUE(reach.is_convex(NodeSet::all(g.num_nodes())));
  EXPECT_TRUE(reach.reaches(node_named(g, "relu"), node_named(g, "add")));
  EXPECT_FALSE(reach.reaches(node_named(g, "add"), node_named(g, "relu")));
}

}  // namespace
}  // namespace tessera
