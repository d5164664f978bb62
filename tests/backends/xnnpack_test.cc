// The xnnpack backend on whole blocks: small graphs shaped like the PP-OCR models' layers, compiled
// as ONE subgraph (one XNNPACK runtime) and compared with the reference kernels, plus the reasons
// it gives for what it cannot run. Single ops and short chains are the differential harness's.
#include <gtest/gtest.h>

#include <random>

#include "backends/backend.h"
#include "backends/harness.h"
#include "ops/op_registry.h"
#include "runtime/executor.h"
#if defined(TESSERA_WITH_XNNPACK)
#include "backends/xnnpack/xnnpack_fusion.h"
#endif

namespace tessera {
namespace {

using Dims = std::vector<int64_t>;

const Backend* xnnpack() {
  const Backend* b = find_backend("xnnpack");
  return b && b->available().ok() ? b : nullptr;
}

// A graph under construction with random inputs and weights.
struct Net {
  explicit Net(uint64_t seed) : rng(seed) { g.opsets[""] = 17; }

  Tensor random(const Dims& d, float lo, float hi) {
    Tensor t(DType::kFloat32, d);
    std::uniform_real_distribution<float> dist(lo, hi);
    for (int64_t k = 0; k < t.numel(); ++k) t.data<float>()[k] = dist(rng);
    return t;
  }
  int input(const Dims& d) {
    inputs.push_back(random(d, -1.f, 1.f));
    return g.add_input(name("in"), TensorType::of(DType::kFloat32, d));
  }
  // Names are built with append: GCC 12 warns falsely (-Wrestrict) on "literal" + std::string.
  std::string name(const char* prefix) {
    return std::string(prefix).append(std::to_string(next++));
  }
  int constant(Tensor t) { return g.add_constant(name("c"), std::move(t)); }
  int weights(const Dims& d) { return constant(random(d, -0.5f, 0.5f)); }
  int scalar(float v) { return constant(Tensor::scalar<float>(v)); }
  int node(const std::string& op, std::vector<int> in,
           std::map<std::string, Attribute> attrs = {}) {
    int out = g.add_value(name("v"));
    g.add_node(op, std::move(in), {out}, std::move(attrs), name(op.c_str()));
    return out;
  }
  int conv(int x, int64_t cin, int64_t cout, int64_t k, int64_t stride, int64_t group = 1) {
    const int64_t p = k / 2;
    return node("Conv", {x, weights({cout, cin / group, k, k}), weights({cout})},
                {{"kernel_shape", Attribute::of_ints({k, k})},
                 {"strides", Attribute::of_ints({stride, stride})},
                 {"pads", Attribute::of_ints({p, p, p, p})},
                 {"group", Attribute::of_int(group)}});
  }
  Status finish(std::vector<int> outputs) {
    for (int v : outputs) g.mark_output(v);
    TESSERA_RETURN_IF_ERROR(g.finalize());
    for (int n = 0; n < g.num_nodes(); ++n) g.node(n).opset = 17;
    return infer_graph_types(g);
  }

  Graph g;
  std::vector<Tensor> inputs;
  std::mt19937 rng;
  int next = 0;
};

// Runs the graph with the nodes in `nodes` as one partition on `backend` (nullptr: reference).
Result<std::vector<Tensor>> run(const Graph& g, const std::vector<Tensor>& inputs,
                                const Backend* backend, const NodeSet& nodes, int threads,
                                int repeats = 1) {
  std::vector<Partition> parts;
  if (backend) parts.push_back({nodes, backend});
  CompileOptions opts;
  opts.threads = threads;
  TESSERA_ASSIGN_OR_RETURN(GraphExecutor exec, GraphExecutor::create(g, parts, opts));
  BufferPool buffers;
  ThreadPool pool(threads);
  RunStats stats;
  std::vector<Tensor> out;
  for (int r = 0; r < repeats; ++r) {
    TESSERA_ASSIGN_OR_RETURN(out, exec.run(inputs, {}, buffers, &pool, stats));
    for (Tensor& t : out) t = t.clone();  // the pool reuses buffers on the next run
  }
  return out;
}

// Compiles the whole graph as one xnnpack subgraph and compares every output with the reference.
void expect_matches_reference(const Net& net, double tolerance) {
  const Backend* b = xnnpack();
  ASSERT_NE(b, nullptr);
  NodeSet all = NodeSet::all(net.g.num_nodes());
  for (int n = 0; n < net.g.num_nodes(); ++n) {
    ASSERT_TRUE(b->supports(net.g, n).ok()) << b->supports(net.g, n).to_string();
  }
  ASSERT_TRUE(b->accepts(SubGraph(net.g, all)).ok())
      << b->accepts(SubGraph(net.g, all)).to_string();
  auto want = run(net.g, net.inputs, nullptr, all, 1);
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  for (int threads : {1, 2}) {
    auto got = run(net.g, net.inputs, b, all, threads, 2);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    ASSERT_EQ(got->size(), want->size());
    for (size_t o = 0; o < want->size(); ++o) {
      EXPECT_LE(harness::relative_error((*got)[o], (*want)[o]), tolerance)
          << "output " << o << " with " << threads << " thread(s)";
    }
  }
}

class XnnpackTest : public testing::Test {
 protected:
  void SetUp() override {
    if (!xnnpack()) GTEST_SKIP() << "xnnpack backend not built or not available";
  }
};

// A MobileNetV3-style block as in the OCR backbones: conv + hardswish, depthwise conv + relu6,
// squeeze-excite (global pool, 1x1 convs, hardsigmoid, broadcast multiply), projection, residual.
TEST_F(XnnpackTest, MobileNetBlockMatchesReference) {
  for (const Dims& x_dims : {Dims{1, 8, 17, 23}, Dims{2, 8, 12, 9}}) {
    Net net(7);
    int x = net.input(x_dims);
    int h = net.node("HardSwish", {net.conv(x, 8, 16, 3, 1)});
    int d = net.node("Clip", {net.conv(h, 16, 16, 5, 1, 16), net.scalar(0.f), net.scalar(6.f)});
    int s = net.node("GlobalAveragePool", {d});
    s = net.node("Relu", {net.conv(s, 16, 4, 1, 1)});
    s = net.node("HardSigmoid", {net.conv(s, 4, 16, 1, 1)},
                 {{"alpha", Attribute::of_float(0.2f)}, {"beta", Attribute::of_float(0.5f)}});
    int y = net.node("Add", {net.conv(net.node("Mul", {d, s}), 16, 8, 1, 1), x});
    ASSERT_TRUE(net.finish({y}).ok());
    expect_matches_reference(net, 1e-4);
  }
}

// The detection neck: strided convs, nearest upsampling by 2 and 4, channel concat, a bilinear
// resize, transposed convs and a sigmoid; two outputs, one of which later nodes also read.
TEST_F(XnnpackTest, DetectionNeckMatchesReference) {
  Net net(11);
  int x = net.input({1, 4, 16, 20});
  int c1 = net.node("Relu", {net.conv(x, 4, 6, 3, 2)});   // 8 x 10
  int c2 = net.node("Relu", {net.conv(c1, 6, 6, 3, 2)});  // 4 x 5
  auto up = [&](int v, float k) {
    return net.node("Resize",
                    {v, net.constant(Tensor(DType::kFloat32, {0})),
                     net.constant(Tensor::from_vector<float>({4}, {1, 1, k, k}))},
                    {{"mode", Attribute::of_string("nearest")},
                     {"coordinate_transformation_mode", Attribute::of_string("asymmetric")},
                     {"nearest_mode", Attribute::of_string("floor")}});
  };
  int cat = net.node("Concat", {up(c1, 2.f), up(c2, 4.f), x},
                     {{"axis", Attribute::of_int(1)}});  // 16 channels
  int lin = net.node("Resize",
                     {cat, net.constant(Tensor(DType::kFloat32, {0})),
                      net.constant(Tensor::from_vector<float>({4}, {1, 1, 0.5f, 0.5f}))},
                     {{"mode", Attribute::of_string("linear")}});
  int t = net.node(
      "ConvTranspose", {lin, net.weights({16, 4, 2, 2}), net.weights({4})},
      {{"kernel_shape", Attribute::of_ints({2, 2})}, {"strides", Attribute::of_ints({2, 2})}});
  int y = net.node("Sigmoid", {t});
  ASSERT_TRUE(net.finish({y, cat}).ok());
  expect_matches_reference(net, 1e-4);
}

// The classifier head: pooling, a flatten that crosses from NHWC to 2-D (free: H = W = 1), a fully
// connected layer with bias and a softmax.
TEST_F(XnnpackTest, ClassifierHeadMatchesReference) {
  Net net(3);
  int x = net.input({2, 12, 6, 10});
  int p = net.node(
      "MaxPool", {net.node("Relu", {net.conv(x, 12, 16, 3, 1)})},
      {{"kernel_shape", Attribute::of_ints({2, 2})}, {"strides", Attribute::of_ints({2, 2})}});
  int f =
      net.node("Flatten", {net.node("GlobalAveragePool", {p})}, {{"axis", Attribute::of_int(1)}});
  int fc = net.node("Gemm", {f, net.weights({5, 16}), net.weights({5})},
                    {{"transB", Attribute::of_int(1)}});
  int y = net.node("Softmax", {fc}, {{"axis", Attribute::of_int(-1)}});
  ASSERT_TRUE(net.finish({y}).ok());
  expect_matches_reference(net, 1e-5);
}

// Pooling windows that hang over the end (ceil_mode), with and without padding: XNNPACK gets the
// end padding that reproduces ONNX's output size; averages count only positions in the input.
TEST_F(XnnpackTest, CeilModePoolingMatchesReference) {
  Net net(17);
  int x = net.input({2, 5, 13, 10});
  auto pool = [&](const char* op, int64_t k, int64_t s, int64_t p, int64_t count_pad) {
    std::map<std::string, Attribute> attrs = {{"kernel_shape", Attribute::of_ints({k, k})},
                                              {"strides", Attribute::of_ints({s, s})},
                                              {"pads", Attribute::of_ints({p, p, p, p})},
                                              {"ceil_mode", Attribute::of_int(1)}};
    if (std::string(op) == "AveragePool") attrs["count_include_pad"] = Attribute::of_int(count_pad);
    return net.node(op, {x}, attrs);
  };
  ASSERT_TRUE(net.finish({pool("MaxPool", 3, 2, 1, 0), pool("MaxPool", 2, 2, 0, 0),
                          pool("AveragePool", 3, 2, 1, 0), pool("AveragePool", 2, 2, 0, 1),
                          pool("AveragePool", 3, 3, 0, 0)})
                  .ok());
  expect_matches_reference(net, 1e-5);
}

// A subgraph without spatial ops stays in NCHW: a 4-D softmax is fine there, as are sequence
// matmuls; the input's buffer has no slack after the data (256 bytes), so it is copied.
TEST_F(XnnpackTest, PlainSubgraphMatchesReference) {
  Net net(5);
  int x = net.input({2, 2, 4, 8});
  int s = net.node("Softmax", {net.node("Mul", {x, net.scalar(3.f)})},
                   {{"axis", Attribute::of_int(-1)}});
  int q = net.input({1, 40, 24});
  int m = net.node("MatMul", {q, net.weights({24, 33})});
  int y = net.node("Relu", {net.node("Add", {m, net.weights({33})})});
  ASSERT_TRUE(net.finish({s, y}).ok());
  expect_matches_reference(net, 1e-5);
}

// PP-LCNetV3's layers (the OCR det and rec backbones): convolutions followed by BatchNormalization
// and a learnable affine (Mul, Add by constants), then HardSwish written out as
// x * Clip(x + 3, 0, 6) / 6. The affine tails (and heads of unpadded convs) fold into the weights,
// the HardSwish becomes one op.
TEST_F(XnnpackTest, FoldsAffineTailsAndWrittenOutHardSwish) {
  Net net(13);
  int x = net.input({2, 6, 11, 14});
  int c = net.conv(x, 6, 12, 3, 2);
  int bn =
      net.node("BatchNormalization", {c, net.weights({12}), net.weights({12}), net.weights({12}),
                                      net.constant(net.random({12}, 0.5f, 2.f))});
  int a = net.node("Add", {net.node("Mul", {net.scalar(1.5f), bn}), net.weights({1, 12, 1, 1})});
  int d = net.node("Div",
                   {net.node("Sub", {net.scalar(0.25f), a}), net.scalar(2.f)});  // 0.25 - y negates
  auto clip6 = [&](int v) { return net.node("Clip", {v, net.scalar(0.f), net.scalar(6.f)}); };
  int h = net.node(
      "Div", {net.node("Mul", {clip6(net.node("Add", {d, net.scalar(3.f)})), d}), net.scalar(6.f)});
  // An affine on the input of an unpadded conv folds into it too.
  int c2 = net.conv(
      net.node("Add", {net.node("Mul", {h, net.scalar(0.8f)}), net.weights({1, 12, 1, 1})}), 12, 8,
      1, 1);
  int h2 = net.node("Mul", {net.node("Mul", {c2, clip6(net.node("Add", {net.scalar(3.f), c2}))}),
                            net.scalar(1.f / 6.f)});
  int h3 = net.node("Mul", {h2, net.scalar(1.1f)});  // before a padded conv: stays
  int c3 = net.conv(h3, 8, 8, 3, 1);                 // read twice: no fold
  int y = net.node("Add", {net.node("Mul", {c3, net.scalar(2.f)}), c3});
  int f = net.node("Flatten", {net.node("GlobalAveragePool", {y})});
  int mm = net.node("MatMul", {net.node("Sub", {f, net.weights({8})}), net.weights({8, 5})});
  int z = net.node(
      "Relu", {net.node("Add", {net.node("Mul", {mm, net.weights({5})}), net.weights({1, 5})})});
  ASSERT_TRUE(net.finish({z, h}).ok());
  expect_matches_reference(net, 1e-4);
#if defined(TESSERA_WITH_XNNPACK)
  const Graph& g = net.g;
  auto producer = [&](int v) { return g.value(v).producer; };
  SubGraph sg(g, NodeSet::all(g.num_nodes()));
  xnnpack::FusionPlan plan(sg);
  // BN, Mul, Add, Sub and Div fold into the first conv.
  ASSERT_NE(plan.affine(producer(c)), nullptr);
  EXPECT_EQ(plan.final_value(producer(c)), d);
  for (int v : {bn, a, d}) EXPECT_TRUE(plan.absorbed(producer(v)));
  // Both written-out HardSwishes become one op each.
  EXPECT_EQ(plan.hardswish_input(producer(h)), d);
  EXPECT_EQ(plan.hardswish_input(producer(h2)), c2);
  EXPECT_EQ(plan.affine(producer(c2)), nullptr);  // read twice by its HardSwish
  EXPECT_NE(plan.input_affine(producer(c2)), nullptr);
  EXPECT_EQ(plan.input_value(producer(c2)), h);
  EXPECT_FALSE(plan.absorbed(producer(h3)));
  EXPECT_EQ(plan.input_affine(producer(c3)), nullptr);
  // c3 is read twice; the MatMul takes its Mul and Add, and the Relu as its output range.
  EXPECT_EQ(plan.affine(producer(c3)), nullptr);
  EXPECT_FALSE(plan.absorbed(producer(y)));
  EXPECT_NE(plan.affine(producer(mm)), nullptr);
  EXPECT_NE(plan.input_affine(producer(mm)), nullptr);
  EXPECT_TRUE(plan.absorbed(producer(z)));
  EXPECT_EQ(plan.final_value(producer(mm)), z);
  EXPECT_EQ(plan.range(producer(mm)).min, 0.f);
#endif
}

TEST_F(XnnpackTest, GivesReasonsForWhatItCannotRun) {
  const Backend& b = *xnnpack();
  Net net(1);
  int x = net.input({1, 4, 8, 8});
  int w = net.input({4, 4, 3, 3});
  int conv = net.node("Conv", {x, w});  // weight computed
  int cubic = net.node("Resize",
                       {x, net.constant(Tensor(DType::kFloat32, {0})),
                        net.constant(Tensor::from_vector<float>({4}, {1, 1, 2, 2}))},
                       {{"mode", Attribute::of_string("cubic")}});
  int avg = net.node("AveragePool", {x},
                     {{"kernel_shape", Attribute::of_ints({3, 3})},
                      {"pads", Attribute::of_ints({1, 1, 1, 1})},
                      {"count_include_pad", Attribute::of_int(1)}});
  int soft = net.node("Softmax", {x}, {{"axis", Attribute::of_int(1)}});
  int soft4 = net.node("Softmax", {net.node("Relu", {net.conv(x, 4, 4, 3, 1)})},
                       {{"axis", Attribute::of_int(-1)}});
  ASSERT_TRUE(net.finish({conv, cubic, avg, soft, soft4}).ok());
  auto reason = [&](int value) { return b.supports(net.g, net.g.value(value).producer).message(); };
  EXPECT_NE(reason(conv).find("weight must be a constant"), std::string::npos) << reason(conv);
  EXPECT_NE(reason(cubic).find("mode 'cubic'"), std::string::npos) << reason(cubic);
  EXPECT_NE(reason(avg).find("count_include_pad"), std::string::npos) << reason(avg);
  EXPECT_NE(reason(soft).find("last axis"), std::string::npos) << reason(soft);
  // The 4-D softmax runs alone, but not with the conv that makes its subgraph NHWC.
  const int soft4_node = net.g.value(soft4).producer;
  EXPECT_TRUE(b.supports(net.g, soft4_node).ok());
  EXPECT_TRUE(b.accepts(SubGraph(net.g, NodeSet::of(net.g.num_nodes(), {soft4_node}))).ok());
  const int relu_node = net.g.value(net.g.node(soft4_node).inputs[0]).producer;
  const int conv_node = net.g.value(net.g.node(relu_node).inputs[0]).producer;
  Status st = b.accepts(
      SubGraph(net.g, NodeSet::of(net.g.num_nodes(), {conv_node, relu_node, soft4_node})));
  EXPECT_NE(st.message().find("NHWC"), std::string::npos) << st.to_string();
}

TEST_F(XnnpackTest, RejectsDynamicShapesAndOtherTypes) {
  const Backend& b = *xnnpack();
  Graph g;
  int x = g.add_input("x", TensorType{DType::kFloat32, std::vector<Dim>{Dim::symbolic("n"), 4}});
  int y = g.add_value("y", TensorType{DType::kFloat32, std::vector<Dim>{Dim::symbolic("n"), 4}});
  g.add_node("Relu", {x}, {y});
  int i = g.add_input("i", TensorType::of(DType::kInt32, {2, 4}));
  int j = g.add_value("j", TensorType::of(DType::kInt32, {2, 4}));
  g.add_node("Relu", {i}, {j});
  g.mark_output(y);
  g.mark_output(j);
  ASSERT_TRUE(g.finalize().ok());
  EXPECT_NE(b.supports(g, g.value(y).producer).message().find("dynamic shape"), std::string::npos);
  EXPECT_NE(b.supports(g, g.value(j).producer).message().find("float32"), std::string::npos);
}

}  // namespace
}  // namespace tessera
