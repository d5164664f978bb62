// The oneDNN backend against the reference kernels on small fused subgraphs: each graph runs
// whole on onednn (one kernel) and must match ref within a relative error bound.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <sstream>

#include "backends/backend.h"
#include "backends/onednn/onednn_plan.h"
#include "ops/op_registry.h"
#include "runtime/buffer_pool.h"
#include "runtime/session.h"

namespace tessera {
namespace {

using Dims = std::vector<int64_t>;

Tensor random_tensor(const Dims& dims, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  Tensor t(DType::kFloat32, dims);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

// Builds small graphs: inputs get random data, constants are random or given.
class Builder {
 public:
  explicit Builder(int opset = 17) { g_.opsets[""] = opset; }
  int input(const Dims& dims, float lo = -1.0f, float hi = 1.0f) {
    std::string name = std::string("in") + std::to_string(inputs_.size());
    inputs_[name] = random_tensor(dims, 100 + inputs_.size(), lo, hi);
    return g_.add_input(name, TensorType::of(DType::kFloat32, dims));
  }
  int constant(Tensor t) {
    return g_.add_constant(std::string("c") + std::to_string(counter_++), std::move(t));
  }
  int weights(const Dims& dims, float scale = 0.5f) {
    return constant(random_tensor(dims, 200 + counter_, -scale, scale));
  }
  int scalar(float v) { return constant(Tensor::from_vector<float>({}, {v})); }
  int op(const std::string& type, std::vector<int> inputs,
         std::map<std::string, Attribute> attrs = {}) {
    int out = g_.add_value(std::string("v") + std::to_string(counter_++));
    g_.add_node(type, std::move(inputs), {out}, std::move(attrs));
    return out;
  }
  Graph finish(std::vector<int> outputs) {
    for (int v : outputs) g_.mark_output(v);
    TESSERA_CHECK(g_.finalize().ok());
    TESSERA_CHECK(infer_graph_types(g_).ok());
    return std::move(g_);
  }
  const std::map<std::string, Tensor>& inputs() const { return inputs_; }

 private:
  Graph g_;
  std::map<std::string, Tensor> inputs_;
  int counter_ = 0;
};

Attribute ints(Dims v) { return Attribute::of_ints(std::move(v)); }
Attribute one(int64_t v) { return Attribute::of_int(v); }

// got must agree with want within tol * max|want| (NaN only where want has NaN).
void expect_close(const Tensor& got, const Tensor& want, double tol, const std::string& name) {
  ASSERT_EQ(got.dims(), want.dims()) << name;
  double max_diff = 0, max_ref = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double x = got.data<float>()[i], y = want.data<float>()[i];
    max_diff = std::max(max_diff, std::isnan(x) != std::isnan(y) ? INFINITY : std::fabs(x - y));
    max_ref = std::max(max_ref, std::fabs(y));
  }
  EXPECT_LE(max_diff, tol * std::max(max_ref, 1e-6))
      << name << ": max |a-b| " << max_diff << ", max |ref| " << max_ref;
}

// Runs g on onednn (expecting `onednn_steps` kernels and no reference steps) and on ref; every
// output must agree within tol * max|ref|.
void expect_matches_ref(const Graph& g, const std::map<std::string, Tensor>& inputs,
                        double tol = 1e-4, int onednn_steps = -1, int threads = 2) {
  SessionOptions on;
  on.backend = "onednn";
  on.threads = threads;
  auto fast = Session::from_graph(g, on);
  ASSERT_TRUE(fast.ok()) << fast.status().to_string();
  auto steps = (*fast)->steps_per_backend();
  if (onednn_steps >= 0) {
    EXPECT_EQ(steps["onednn"], onednn_steps);
  }
  EXPECT_EQ(steps.count("ref"), 0u) << "some nodes ran on ref";
  auto ref = Session::from_graph(g, SessionOptions{});
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  for (int rep = 0; rep < 2; ++rep) {  // the second run reuses the plan and the buffers
    auto a = (*fast)->run(inputs);
    ASSERT_TRUE(a.ok()) << a.status().to_string();
    auto b = (*ref)->run(inputs);
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    for (const auto& [name, want] : *b) expect_close(a->at(name), want, tol, name);
  }
}

TEST(Onednn, ReportsVersionAndIsAvailable) {
  const Backend* b = find_backend("onednn");
  ASSERT_NE(b, nullptr);
  EXPECT_TRUE(b->available().ok()) << b->available().to_string();
  EXPECT_EQ(b->version().rfind("oneDNN 2.", 0), 0u) << b->version();
  EXPECT_EQ(b->fusion_style(), FusionStyle::kArbitrary);
}

TEST(Onednn, ConvVariantsWithRelu) {
  struct Geo {
    Dims x, w;
    int64_t group;
    Dims strides, pads, dilations;
  };
  const Geo geos[] = {
      {{1, 3, 17, 19}, {8, 3, 3, 3}, 1, {2, 2}, {1, 1, 1, 1}, {1, 1}},
      {{2, 16, 11, 9}, {16, 1, 5, 5}, 16, {1, 1}, {2, 2, 2, 2}, {1, 1}},  // depthwise
      {{1, 12, 13, 13}, {18, 4, 3, 3}, 3, {1, 2}, {0, 1, 2, 0}, {2, 1}},  // grouped, asymmetric,
                                                                          // dilated
      {{3, 5, 10}, {7, 5, 4}, 1, {3}, {1, 2}, {2}},                       // 1-D
  };
  for (const Geo& geo : geos) {
    Builder b;
    int x = b.input(geo.x);
    int y = b.op("Conv", {x, b.weights(geo.w), b.weights({geo.w[0]})},
                 {{"group", one(geo.group)},
                  {"strides", ints(geo.strides)},
                  {"pads", ints(geo.pads)},
                  {"dilations", ints(geo.dilations)}});
    Graph g = b.finish({b.op("Relu", {y})});
    expect_matches_ref(g, b.inputs());
  }
}

// Weights computed at run time are reordered on every run; a constant first MatMul operand.
TEST(Onednn, RuntimeWeights) {
  Builder b;
  int x = b.input({1, 6, 8, 9});
  int w = b.input({4, 3, 3, 3}, -0.5f, 0.5f);
  int c = b.op("Conv", {x, w, b.weights({4})}, {{"group", one(2)}, {"pads", ints({1, 1, 1, 1})}});
  int mm = b.op("MatMul", {b.weights({5, 8}), b.input({2, 8, 3})});
  Graph g = b.finish({b.op("Mul", {c, b.scalar(2.0f)}), mm});
  expect_matches_ref(g, b.inputs());
}

TEST(Onednn, ConvAutoPadSameUpper) {
  Builder b;
  int x = b.input({1, 4, 9, 10});
  int y = b.op("Conv", {x, b.weights({6, 4, 3, 3})},
               {{"strides", ints({2, 2})}, {"auto_pad", Attribute::of_string("SAME_UPPER")}});
  Graph g = b.finish({y});
  expect_matches_ref(g, b.inputs());
}

// The PP-OCR det block: Conv, a learnable affine (Mul/Add by scalars), Paddle's hardswish
// (x * Clip(x + 3, 0, 6) / 6), another affine; all post-ops of one convolution.
TEST(Onednn, ConvAffineHardSwishChain) {
  Builder b(11);
  int x = b.input({1, 8, 15, 16}, -3, 3);
  int c = b.op("Conv", {x, b.weights({16, 8, 1, 1}), b.weights({16})});
  int m = b.op("Mul", {b.scalar(1.3f), c});
  int a = b.op("Add", {m, b.scalar(0.4f)});
  int plus3 = b.op("Add", {a, b.scalar(3.0f)});
  int clip = b.op("Clip", {plus3, b.scalar(0.0f), b.scalar(6.0f)});
  int mul = b.op("Mul", {a, clip});
  int div = b.op("Div", {mul, b.scalar(6.0f)});
  int m2 = b.op("Mul", {b.scalar(0.7f), div});
  Graph g = b.finish({b.op("Add", {m2, b.scalar(-0.2f)})});
  expect_matches_ref(g, b.inputs(), 1e-4, 1);
}

// Squeeze-and-excitation: GlobalAveragePool -> Conv -> Relu -> Conv -> HardSigmoid, then
// x * s (broadcast over H, W) and a residual x + x * s.
TEST(Onednn, SqueezeExcitationBlock) {
  Builder b;
  int x0 = b.input({1, 24, 12, 10});
  int x = b.op("Conv", {x0, b.weights({24, 24, 3, 3}, 0.2f)}, {{"pads", ints({1, 1, 1, 1})}});
  int gap = b.op("GlobalAveragePool", {x});
  int s1 = b.op("Relu", {b.op("Conv", {gap, b.weights({6, 24, 1, 1}), b.weights({6})})});
  int s2 = b.op("Conv", {s1, b.weights({24, 6, 1, 1}), b.weights({24})});
  int hs = b.op("HardSigmoid", {s2},
                {{"alpha", Attribute::of_float(0.2f)}, {"beta", Attribute::of_float(0.5f)}});
  int scaled = b.op("Mul", {x, hs});
  Graph g = b.finish({b.op("Add", {x, scaled})});
  expect_matches_ref(g, b.inputs(), 1e-4, 1);
}

// The squeeze-excite block's pooling and FCs produce 24 and 6 values: they run on one thread (the
// fork and join of a second costs more than it saves), the convolution on the plan's two.
// Which steps those are is read from the plan's description.
TEST(Onednn, TinyUnitsRunOnOneThread) {
  Builder b;
  int x0 = b.input({1, 24, 40, 40});
  int x = b.op("Conv", {x0, b.weights({24, 24, 3, 3}, 0.2f)}, {{"pads", ints({1, 1, 1, 1})}});
  int gap = b.op("GlobalAveragePool", {x});
  int s1 = b.op("Relu", {b.op("Conv", {gap, b.weights({6, 24, 1, 1}), b.weights({6})})});
  int s2 = b.op("Conv", {s1, b.weights({24, 6, 1, 1}), b.weights({24})});
  Graph g = b.finish({b.op("Mul", {x, b.op("Sigmoid", {s2})})});
  SubGraph sg(g, NodeSet::all(g.num_nodes()));
  auto prog = onednn::lower_subgraph(sg);
  ASSERT_TRUE(prog.ok()) << prog.status().to_string();
  for (int threads : {1, 2}) {
    auto plan = onednn::Plan::build(sg, *prog, {{1, 24, 40, 40}}, threads);
    ASSERT_TRUE(plan.ok()) << plan.status().to_string();
    std::map<std::string, bool> serial;  // step label -> runs on one thread
    std::istringstream lines((*plan)->describe());
    for (std::string line; std::getline(lines, line);) {
      const size_t label_end = line.find("  [");
      if (label_end == std::string::npos) continue;
      serial[line.substr(2, label_end - 2)] = line.find("(1 thread)") != std::string::npos;
    }
    SCOPED_TRACE((*plan)->describe());
    ASSERT_TRUE(serial.count("GlobalAveragePool"));
    EXPECT_EQ(serial["GlobalAveragePool"], threads == 2);
    int serial_convs = 0, parallel_convs = 0;
    for (const auto& [label, one] : serial)
      if (label.rfind("Conv", 0) == 0) (one ? serial_convs : parallel_convs)++;
    EXPECT_EQ(serial_convs, threads == 2 ? 2 : 0);
    EXPECT_EQ(parallel_convs, threads == 2 ? 1 : 3);
  }
  expect_matches_ref(g, b.inputs(), 1e-4, 1, 2);
}

TEST(Onednn, ConvResidualAddRelu) {
  Builder b;
  int x = b.input({2, 16, 9, 7});
  int r = b.input({2, 32, 9, 7});
  int c = b.op("Conv", {x, b.weights({32, 16, 3, 3}, 0.2f)}, {{"pads", ints({1, 1, 1, 1})}});
  int sub = b.op("Sub", {r, c});  // the conv output on the right: sub, then negate
  Graph g = b.finish({b.op("Relu", {b.op("Add", {sub, r})})});
  expect_matches_ref(g, b.inputs(), 1e-4, 1);
}

// The det head: ConvTranspose (k2 s2) + per-channel Add + BatchNormalization + Relu, then a
// second one ending in Sigmoid; the intermediate value is also a graph output.
TEST(Onednn, ConvTransposeHead) {
  Builder b(11);
  int x = b.input({1, 8, 6, 5});
  int d = b.op("ConvTranspose", {x, b.weights({8, 8, 2, 2})}, {{"strides", ints({2, 2})}});
  int add = b.op("Add", {d, b.weights({1, 8, 1, 1})});
  int bn = b.op("BatchNormalization", {add, b.weights({8}), b.weights({8}), b.weights({8}),
                                       b.constant(random_tensor({8}, 7, 0.5f, 1.5f))});
  int relu = b.op("Relu", {bn});
  int d2 = b.op("ConvTranspose", {relu, b.weights({8, 2, 3, 3})},
                {{"strides", ints({2, 2})},
                 {"pads", ints({1, 1, 1, 1})},
                 {"output_padding", ints({1, 1})},
                 {"group", one(2)}});
  int sig = b.op("Sigmoid", {b.op("Add", {d2, b.scalar(0.1f)})});
  Graph g = b.finish({relu, sig});
  expect_matches_ref(g, b.inputs(), 1e-4, 1);
}

TEST(Onednn, ResizeNearestAndConcat) {
  Builder b(11);
  int x = b.input({1, 8, 5, 6});
  int y = b.input({1, 8, 10, 12});
  Attribute none = Attribute::of_string("nearest");
  int roi = b.constant(Tensor(DType::kFloat32, {0}));
  int up = b.op("Resize", {x, roi, b.constant(Tensor::from_vector<float>({4}, {1, 1, 2, 2}))},
                {{"mode", none},
                 {"coordinate_transformation_mode", Attribute::of_string("asymmetric")},
                 {"nearest_mode", Attribute::of_string("floor")}});
  int lin = b.op("Resize", {x, roi, b.constant(Tensor::from_vector<float>({4}, {1, 1, 2, 2}))},
                 {{"mode", Attribute::of_string("linear")}});
  Graph g = b.finish({b.op("Concat", {up, y, lin}, {{"axis", one(1)}})});
  expect_matches_ref(g, b.inputs());
}

TEST(Onednn, MatMulAndGemm) {
  {
    Builder b;
    int x = b.input({2, 3, 5, 8});
    int w = b.input({3, 8, 6});
    int mm = b.op("MatMul", {x, w});
    Graph g = b.finish({b.op("Relu", {b.op("Add", {mm, b.weights({6})})})});
    expect_matches_ref(g, b.inputs());
  }
  {
    Builder b;
    int x = b.input({7, 12});
    Graph g = b.finish({b.op("MatMul", {x, b.weights({12})})});  // 1-D second operand
    expect_matches_ref(g, b.inputs());
  }
  {
    Builder b;
    int a = b.input({9, 5});
    int y = b.op("Gemm", {a, b.weights({7, 9}), b.weights({1, 7})},
                 {{"transA", one(1)},
                  {"transB", one(1)},
                  {"alpha", Attribute::of_float(0.5f)},
                  {"beta", Attribute::of_float(2.0f)}});
    Graph g = b.finish({b.op("Sigmoid", {y})});
    expect_matches_ref(g, b.inputs());
  }
}

// A channels-last plan stores every rank-4 tensor channels-last, attention's [N, heads, L, d]
// too; oneDNN offers only its reference matmul (~100x slower) for operands laid out so, and the
// plan hands it plain copies instead. Checked on the plan's own description and against ref.
TEST(Onednn, ChannelsLastAttentionMatMulsAvoidTheReferenceImplementation) {
  Builder b;
  int q = b.input({1, 4, 12, 5});
  int k = b.input({1, 4, 5, 12});
  int v = b.input({1, 4, 12, 5});
  int scores = b.op("Softmax", {b.op("MatMul", {q, k})}, {{"axis", one(-1)}});
  int projected = b.op("MatMul", {q, b.weights({5, 7})});  // constant B, channels-last A
  Graph g = b.finish({b.op("MatMul", {scores, v}), projected});
  SubGraph sg(g, NodeSet::all(g.num_nodes()));
  auto prog = onednn::lower_subgraph(sg);
  ASSERT_TRUE(prog.ok()) << prog.status().to_string();
  for (bool channels_last : {false, true}) {
    auto plan = onednn::Plan::build(sg, *prog, {{1, 4, 12, 5}, {1, 4, 5, 12}, {1, 4, 12, 5}}, 2,
                                    channels_last);
    ASSERT_TRUE(plan.ok()) << plan.status().to_string();
    const std::string steps = (*plan)->describe();
    EXPECT_EQ(steps.find("[ref"), std::string::npos) << steps;
  }
  const Backend* onednn = find_backend("onednn");
  ASSERT_NE(onednn, nullptr);
  CompileOptions opts;
  opts.threads = 2;
  opts.layout = TensorLayout::kChannelsLast;
  auto kernel = onednn->compile(sg, opts);
  ASSERT_TRUE(kernel.ok()) << kernel.status().to_string();
  std::vector<Tensor> inputs_cl;
  BufferPool pool;
  for (const char* name : {"in0", "in1", "in2"})
    inputs_cl.push_back(to_channels_last(b.inputs().at(name), pool));
  std::vector<const Tensor*> in = {&inputs_cl[0], &inputs_cl[1], &inputs_cl[2]};
  std::vector<Tensor> out(sg.outputs().size());
  KernelRunContext ctx{pool, nullptr};
  ASSERT_TRUE((*kernel)->run(in, out, ctx).ok());
  auto ref = Session::from_graph(g, SessionOptions{});
  ASSERT_TRUE(ref.ok());
  auto want = (*ref)->run(b.inputs());
  ASSERT_TRUE(want.ok());
  for (size_t o = 0; o < out.size(); ++o) {
    const std::string& name = g.value(sg.outputs()[o]).name;
    expect_close(to_row_major(out[o], pool), want->at(name), 1e-5, name);
  }
}

TEST(Onednn, Pooling) {
  Builder b;
  int x = b.input({2, 5, 11, 9});
  int mp = b.op("MaxPool", {x},
                {{"kernel_shape", ints({3, 3})}, {"strides", ints({2, 2})}, {"ceil_mode", one(1)}});
  int ap = b.op("AveragePool", {x}, {{"kernel_shape", ints({3, 2})}, {"pads", ints({1, 0, 1, 1})}});
  int api = b.op("AveragePool", {x},
                 {{"kernel_shape", ints({2, 2})},
                  {"pads", ints({1, 1, 1, 1})},
                  {"count_include_pad", one(1)}});
  int gmp = b.op("GlobalMaxPool", {x});
  Graph g = b.finish({b.op("Relu", {mp}), ap, api, gmp});
  expect_matches_ref(g, b.inputs());
}

TEST(Onednn, SoftmaxLayerNormReduce) {
  {
    Builder b(11);  // before opset 13: softmax over the flattened dims from axis 1
    int x = b.input({2, 3, 4, 5}, -4, 4);
    Graph g = b.finish({b.op("Softmax", {x}, {{"axis", one(1)}})});
    expect_matches_ref(g, b.inputs());
  }
  {
    Builder b;
    int x = b.input({2, 3, 4, 5}, -4, 4);
    int sm = b.op("Softmax", {x}, {{"axis", one(1)}});
    int ln = b.op("LayerNormalization", {x, b.weights({4, 5}), b.weights({5})}, {{"axis", one(2)}});
    int rm = b.op("ReduceMean", {x}, {{"axes", ints({1, 3})}, {"keepdims", one(0)}});
    Graph g = b.finish({sm, ln, rm});
    expect_matches_ref(g, b.inputs());
  }
}

TEST(Onednn, PoolingCeilModeAndPadding) {
  Builder b;
  int x = b.input({1, 3, 10, 11});
  int ap = b.op("AveragePool", {x},
                {{"kernel_shape", ints({3, 3})},
                 {"strides", ints({2, 2})},
                 {"pads", ints({1, 1, 0, 0})},
                 {"ceil_mode", one(1)}});
  // include_pad with ceil_mode but no window beyond the padding: taken.
  int api = b.op("AveragePool", {x},
                 {{"kernel_shape", ints({2, 3})},
                  {"strides", ints({2, 2})},
                  {"pads", ints({0, 1, 0, 1})},
                  {"ceil_mode", one(1)},
                  {"count_include_pad", one(1)}});
  int mp = b.op(
      "MaxPool", {x},
      {{"kernel_shape", ints({2, 2})}, {"dilations", ints({2, 1})}, {"strides", ints({1, 2})}});
  Graph g = b.finish({ap, api, mp});
  expect_matches_ref(g, b.inputs());
}

// Ops that need plain data after a convolution (which leaves a blocked or channels-last
// layout): Softmax over channels, a reduction, and a Concat of different channel counts.
TEST(Onednn, LayoutChangesAfterConvolution) {
  Builder b;
  int x = b.input({2, 8, 9, 10});
  int c1 = b.op("Conv", {x, b.weights({16, 8, 3, 3}, 0.3f)}, {{"pads", ints({1, 1, 1, 1})}});
  int c2 = b.op("Conv", {x, b.weights({5, 8, 1, 1}, 0.3f)});
  int sm = b.op("Softmax", {c1}, {{"axis", one(1)}});
  int red = b.op("ReduceSum", {c1, b.constant(Tensor::from_vector<int64_t>({2}, {2, 3}))},
                 {{"keepdims", one(1)}});
  int cat = b.op("Concat", {c1, c2, x}, {{"axis", one(1)}});
  int gemm_in = b.input({4, 6});
  int gemm = b.op("Gemm", {gemm_in, b.weights({6, 3}), b.input({4, 3})});
  Graph g = b.finish({sm, red, cat, gemm});
  expect_matches_ref(g, b.inputs());
}

// Binary ops whose first operand is the broadcast one: swapped, negated or expanded.
TEST(Onednn, BinaryBroadcasting) {
  Builder b;
  int x = b.input({2, 3, 4, 5});
  int row = b.input({4, 1});
  int sub = b.op("Sub", {row, x});
  int div = b.op("Div", {row, b.op("Add", {x, b.scalar(3.0f)})});
  int mx = b.op("Max", {b.input({3, 1, 1}), x});
  Graph g = b.finish({sub, div, mx});
  expect_matches_ref(g, b.inputs());
}

// Dynamic input dims (as the PP-OCR models have): the kernel builds one plan per input shape
// at run time, and each matches the reference.
TEST(Onednn, DynamicShapesGetAPlanPerShape) {
  Graph g;
  g.opsets[""] = 13;
  TensorType xt;
  xt.dtype = DType::kFloat32;
  xt.shape = std::vector<Dim>{Dim(1), Dim(4), Dim::symbolic("h"), Dim::symbolic("w")};
  int x = g.add_input("x", xt);
  int w = g.add_constant("w", random_tensor({8, 4, 3, 3}, 5, -0.5f, 0.5f));
  int c = g.add_value("c"), r = g.add_value("r"), up = g.add_value("up"), y = g.add_value("y");
  g.add_node("Conv", {x, w}, {c}, {{"pads", ints({1, 1, 1, 1})}});
  g.add_node("Relu", {c}, {r});
  int roi = g.add_constant("roi", Tensor(DType::kFloat32, {0}));
  int scales = g.add_constant("scales", Tensor::from_vector<float>({4}, {1, 1, 2, 2}));
  g.add_node("Resize", {r, roi, scales}, {up},
             {{"mode", Attribute::of_string("nearest")},
              {"coordinate_transformation_mode", Attribute::of_string("asymmetric")},
              {"nearest_mode", Attribute::of_string("floor")}});
  g.add_node("Softmax", {up}, {y}, {{"axis", one(1)}});
  g.mark_output(y);
  ASSERT_TRUE(g.finalize().ok());
  ASSERT_TRUE(infer_graph_types(g).ok());
  SessionOptions on;
  on.backend = "onednn";
  on.threads = 2;
  auto fast = Session::from_graph(g, on);
  ASSERT_TRUE(fast.ok()) << fast.status().to_string();
  EXPECT_EQ((*fast)->steps_per_backend()["onednn"], 1);
  auto ref = Session::from_graph(g, SessionOptions{});
  ASSERT_TRUE(ref.ok());
  for (const Dims& d : {Dims{1, 4, 9, 7}, Dims{1, 4, 16, 20}, Dims{1, 4, 9, 7}}) {
    std::map<std::string, Tensor> in{{"x", random_tensor(d, d[2])}};
    auto a = (*fast)->run(in);
    ASSERT_TRUE(a.ok()) << a.status().to_string();
    auto b = (*ref)->run(in);
    ASSERT_TRUE(b.ok());
    const Tensor& got = a->at("y");
    const Tensor& want = b->at("y");
    ASSERT_EQ(got.dims(), want.dims());
    for (int64_t i = 0; i < want.numel(); ++i)
      ASSERT_NEAR(got.data<float>()[i], want.data<float>()[i], 1e-5) << i;
  }
}

TEST(Onednn, RejectsWithReasons) {
  const Backend& be = *find_backend("onednn");
  Builder b;
  int x = b.input({1, 4, 8, 8});
  int cubic = b.op("Resize",
                   {x, b.constant(Tensor(DType::kFloat32, {0})),
                    b.constant(Tensor::from_vector<float>({4}, {1, 1, 2, 2}))},
                   {{"mode", Attribute::of_string("cubic")}});
  int pw = b.op("Pow", {x, b.scalar(3.0f)});
  int overhang = b.op("AveragePool", {x},
                      {{"kernel_shape", ints({3, 3})},
                       {"strides", ints({2, 2})},
                       {"ceil_mode", one(1)},
                       {"count_include_pad", one(1)}});
  int outpad = b.op("ConvTranspose", {x, b.weights({4, 4, 3, 3})},
                    {{"strides", ints({2, 2})}, {"output_padding", ints({1, 1})}});
  Graph g = b.finish({cubic, pw, overhang, outpad});
  for (int n = 0; n < g.num_nodes(); ++n) {
    Status st = be.supports(g, n);
    EXPECT_FALSE(st.ok()) << g.node(n).op_type;
    EXPECT_FALSE(st.message().empty());
    std::printf("  %s: %s\n", g.node(n).op_type.c_str(), st.message().c_str());
  }
}

}  // namespace
}  // namespace tessera
