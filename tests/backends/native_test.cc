// The native backend against the reference kernels, for every ISA this CPU runs: vector math
// accuracy, elementwise programs (broadcasting, several outputs, tiles across rows), reductions,
// Softmax, LayerNormalization, MatMul / Gemm, Conv and ConvTranspose (with fused tails), on
// seeded random data.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "backends/backend.h"
#include "backends/harness.h"
#include "backends/native/eltwise_compile.h"
#include "backends/native/isa.h"
#include "backends/native/native_compile.h"
#include "backends/native_kernel_runner.h"
#include "backends/test_graph.h"
#include "ops/op_registry.h"
#include "runtime/executor.h"

namespace tessera {
namespace {

using testing_graph::Dims;
using testing_graph::run_ref;
using testing_graph::TestGraph;
using testing_native::expect_matches_ref;
using testing_native::isas;
using testing_native::run_native;


// Two 10 x 10 inputs of t holding every pair of special values (zeros of both signs,
// infinities, NaN, a subnormal, small integers) at the same position.
std::pair<int, int> special_value_inputs(TestGraph& t) {
  const float inf = INFINITY, nan = NAN;
  const std::vector<float> special = {0.f, -0.f, inf, -inf, nan, -1.f, 1.f, 7.f, -7.f, 1e-40f};
  const size_t first = t.inputs.size();
  const int x = t.input({10, 10}), y = t.input({10, 10});
  for (int i = 0; i < 100; ++i) {
    t.inputs[first].data<float>()[i] = special[i % 10];
    t.inputs[first + 1].data<float>()[i] = special[i / 10];
  }
  return {x, y};
}

// Every ISA (1 thread) gives the reference's bits in every output element (any NaN for NaN).
void expect_bits_of_ref(const TestGraph& t) {
  std::vector<Tensor> want = run_ref(t);
  for (const native::IsaKernels* isa : isas()) {
    std::vector<Tensor> got = run_native(t, *isa, 1);
    ASSERT_EQ(got.size(), want.size());
    for (size_t o = 0; o < got.size(); ++o) {
      ASSERT_EQ(got[o].numel(), want[o].numel());
      for (int64_t i = 0; i < got[o].numel(); ++i) {
        const float a = got[o].data<float>()[i], b = want[o].data<float>()[i];
        EXPECT_TRUE(std::memcmp(&a, &b, sizeof a) == 0 || (std::isnan(a) && std::isnan(b)))
            << "output " << o << " element " << i << ": " << a << " vs " << b << " on "
            << native::isa_name(isa->isa);
      }
    }
  }
}

TEST(NativeMath, TranscendentalsMatchStdWithinAFewUlp) {
  struct Fn {
    native::MathFn fn;
    const char* name;
    double (*ref)(double);
    double lo, hi;
  };
  const Fn fns[] = {
      {native::MathFn::kExp, "exp", [](double x) { return std::exp(x); }, -87, 88},
      {native::MathFn::kExpm1, "expm1", [](double x) { return std::expm1(x); }, -20, 20},
      {native::MathFn::kLog, "log", [](double x) { return std::log(x); }, 1e-30, 1e30},
      {native::MathFn::kTanh, "tanh", [](double x) { return std::tanh(x); }, -12, 12},
      {native::MathFn::kSigmoid, "sigmoid", [](double x) { return 1 / (1 + std::exp(-x)); }, -80,
       80},
      {native::MathFn::kErf, "erf", [](double x) { return std::erf(x); }, -5, 5},
  };
  const int n = 200003;
  for (const Fn& f : fns) {
    std::vector<float> x(n), y(n);
    for (int i = 0; i < n; ++i) {
      const double t = static_cast<double>(i) / (n - 1);
      // log spans orders of magnitude; the others a linear range (0 and tiny values included).
      x[i] = f.fn == native::MathFn::kLog ? static_cast<float>(f.lo * std::pow(f.hi / f.lo, t))
                                          : static_cast<float>(f.lo + (f.hi - f.lo) * t);
    }
    x[n / 2] = 0.f;
    x[n / 3] = 1e-7f;
    for (const native::IsaKernels* isa : isas()) {
      isa->math(f.fn, x.data(), y.data(), n);
      double worst = 0;
      float at = 0;
      for (int i = 0; i < n; ++i) {
        const double want = f.ref(x[i]);
        const double err = std::fabs(y[i] - want) / std::max(std::fabs(want), 1e-30);
        if (err > worst) worst = err, at = x[i];
      }
      EXPECT_LE(worst, 2e-6) << f.name << " on " << native::isa_name(isa->isa)
                             << " worst at x = " << at;
    }
  }
}

TEST(NativeMath, SpecialValues) {
  const float inf = INFINITY, nan = NAN;
  const std::vector<float> x = {0.f, -0.f, inf, -inf, nan, -1.f, 100.f, -100.f, 1e-40f};
  std::vector<float> y(x.size());
  for (const native::IsaKernels* isa : isas()) {
    const char* name = native::isa_name(isa->isa);
    isa->math(native::MathFn::kExp, x.data(), y.data(), static_cast<int64_t>(x.size()));
    EXPECT_EQ(y[0], 1.f) << name;
    EXPECT_EQ(y[2], inf) << name;
    EXPECT_EQ(y[3], 0.f) << name;
    EXPECT_TRUE(std::isnan(y[4])) << name;
    EXPECT_EQ(y[6], inf) << name;
    isa->math(native::MathFn::kLog, x.data(), y.data(), static_cast<int64_t>(x.size()));
    EXPECT_EQ(y[0], -inf) << name;
    EXPECT_EQ(y[2], inf) << name;
    EXPECT_TRUE(std::isnan(y[4])) << name;
    EXPECT_TRUE(std::isnan(y[5])) << name;
    EXPECT_NEAR(y[8], std::log(1e-40), 1e-4) << name;  // subnormal input
    isa->math(native::MathFn::kTanh, x.data(), y.data(), static_cast<int64_t>(x.size()));
    EXPECT_EQ(y[2], 1.f) << name;
    EXPECT_EQ(y[3], -1.f) << name;
    EXPECT_TRUE(std::isnan(y[4])) << name;
    isa->math(native::MathFn::kSigmoid, x.data(), y.data(), static_cast<int64_t>(x.size()));
    EXPECT_EQ(y[2], 1.f) << name;
    EXPECT_EQ(y[3], 0.f) << name;
    EXPECT_EQ(y[0], 0.5f) << name;
    isa->math(native::MathFn::kErf, x.data(), y.data(), static_cast<int64_t>(x.size()));
    EXPECT_EQ(y[2], 1.f) << name;
    EXPECT_EQ(y[3], -1.f) << name;
    EXPECT_EQ(y[0], 0.f) << name;
  }
}

TEST(NativeEltwise, EveryOpAlone) {
  for (const char* op : {"Relu", "Sigmoid", "Tanh", "Exp", "Abs", "Neg", "Erf", "HardSwish",
                         "HardSigmoid", "LeakyRelu", "Elu"}) {
    TestGraph t;
    int y = t.op(op, {t.input({3, 37, 41})});
    t.finish({y});
    expect_matches_ref(t, 2e-6, op);
  }
  for (const char* op : {"Log", "Sqrt"}) {
    TestGraph t;
    int y = t.op(op, {t.input({5, 1003}, 0.01f, 9.f)});
    t.finish({y});
    expect_matches_ref(t, 2e-6, op);
  }
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min", "PRelu"}) {
    TestGraph t;
    int y = t.op(
        op, {t.input({2, 3, 17, 19}),
             t.input(std::string(op) == "PRelu" ? Dims{3, 1, 1} : Dims{2, 3, 17, 19}, 0.5f, 2.f)});
    t.finish({y});
    expect_matches_ref(t, 1e-7, op);
  }
}

TEST(NativeEltwise, GeneralBroadcastingAndShortRows) {
  // Two-sided broadcasts, a scalar, a per-row vector and rows shorter than a tile.
  const std::vector<std::pair<Dims, Dims>> shapes = {
      {{2, 1, 5, 1}, {1, 3, 1, 4}},
      {{4, 1}, {1, 1000}},
      {{1}, {3, 5, 7}},
      {{7, 3, 1, 2}, {3, 5, 1}},
      {{2, 9, 1, 1}, {2, 9, 33, 35}},
      {{}, {6, 6}},
      {{1025}, {3, 1025}},
  };
  for (const auto& [a, b] : shapes) {
    TestGraph t;
    int x = t.input(a), z = t.input(b);
    int y = t.op("Relu", {t.op("Mul", {t.op("Add", {x, z}), z})});
    t.finish({y});
    expect_matches_ref(t, 1e-6, "broadcast " + dims_to_string(a) + " with " + dims_to_string(b));
  }
}

TEST(NativeEltwise, ChainWithSeveralOutputsAndConstants) {
  // y1 = clip(x * w + b), y2 = y1 * hardsigmoid(x) / 6, y3 = x - 1 (an intermediate used
  // outside), over a size that spans many tiles and both threads.
  TestGraph t;
  int x = t.input({2, 16, 61, 67});
  int w = t.constant({1, 16, 1, 1}), b = t.constant({16, 1, 1});
  int lo = t.constant(Tensor::scalar<float>(0.f)), hi = t.constant(Tensor::scalar<float>(6.f));
  int y1 = t.op("Clip", {t.op("Add", {t.op("Mul", {x, w}), b}), lo, hi});
  int y2 = t.op(
      "Div", {t.op("Mul", {y1, t.op("HardSigmoid", {x})}), t.constant(Tensor::scalar<float>(6.f))});
  int y3 = t.op("Sub", {x, t.constant(Tensor::scalar<float>(1.f))});
  int y4 = t.op("Max", {y2, y3, t.op("Min", {y1, y3})});
  t.finish({y1, y4, y3});
  expect_matches_ref(t, 1e-6, "chain");
}

TEST(NativeEltwise, LargeTensorsAcrossThreadsAndTiles) {
  // An output also read by a later instruction; tiles prefetch the next one up to the end.
  TestGraph t;
  int x = t.input({3, 517, 701}), z = t.input({517, 1});
  int y1 = t.op("Add", {x, z});
  int y2 = t.op("Sigmoid", {t.op("Mul", {y1, x})});
  t.finish({y2, y1});
  expect_matches_ref(t, 2e-6, "large tensors");
}

TEST(NativeEltwise, FusedReluAndClipKeepTheBitsOfTheReference) {
  // Relu / Clip after Add / Sub / Mul / Div run as the arithmetic's clamp: NaN, -0, infinities
  // (Clip's default bounds turn inf into the largest float) must come out as in ref; results
  // read twice or stored keep their own instruction.
  TestGraph t;
  const auto [x, y] = special_value_inputs(t);
  int lo = t.constant(Tensor::scalar<float>(-1.f)), hi = t.constant(Tensor::scalar<float>(6.f));
  int r1 = t.op("Relu", {t.op("Sub", {x, y})});
  int r2 = t.op("Clip", {t.op("Add", {x, y}), lo, hi});
  int r3 = t.op("Clip", {t.op("Mul", {x, y})});  // no bounds: [lowest, max]
  int shared = t.op("Div", {x, y});
  int r4 = t.op("Relu", {shared});
  int r5 = t.op("Add", {r4, shared});
  t.finish({r1, r2, r3, r4, r5});
  expect_bits_of_ref(t);
}

TEST(NativeEltwise, FusedScalarPostOpsKeepTheBitsOfTheReference) {
  // An Add / Sub / Mul / Div by a scalar after Add / Sub / Mul / Div runs in the same pass as its
  // post operation (then a Relu / Clip as its clamp): same float operations, so the same bits,
  // specials included. Not fused: a scalar first in Sub / Div, a result also read elsewhere or
  // stored, a second post operation, a producer that already clamps.
  TestGraph t;
  const auto [x, y] = special_value_inputs(t);
  auto scalar = [&](float v) { return t.constant(Tensor::scalar<float>(v)); };
  int lo = scalar(0.f), hi = scalar(6.f);
  Tensor three_2d(DType::kFloat32, {1, 1});  // one element, rank 2
  three_2d.data<float>()[0] = 3.f;
  int three = t.constant(three_2d);
  // x*clip(x+3,0,6)/6 as exporters write hardswish: 2 instructions instead of 4.
  int r1 = t.op("Div", {t.op("Mul", {t.op("Clip", {t.op("Add", {x, three}), lo, hi}), x}),
                        scalar(6.f)});
  int r2 = t.op("Mul", {scalar(0.5f), t.op("Sub", {x, y})});             // scalar first, commutes
  int r3 = t.op("Relu", {t.op("Add", {t.op("Div", {x, y}), scalar(-1.f)})});  // post, then clamp
  int r4 = t.op("Sub", {scalar(1.f), t.op("Mul", {x, y})});              // 1 - t: not a post
  int r5 = t.op("Div", {scalar(2.f), t.op("Add", {x, y})});              // 2 / t: not a post
  int shared = t.op("Mul", {x, y});
  int r6 = t.op("Add", {t.op("Sub", {shared, scalar(4.f)}), shared});   // read twice: not fused
  int r7 = t.op("Mul", {t.op("Mul", {t.op("Sub", {x, y}), scalar(3.f)}), scalar(0.25f)});
  int r8 = t.op("Div", {t.op("Relu", {t.op("Add", {x, y})}), scalar(5.f)});  // clamp first
  t.finish({r1, r2, r3, r4, r5, r6, r7, r8});
  std::vector<int> nodes(t.g.num_nodes());
  for (int i = 0; i < t.g.num_nodes(); ++i) nodes[i] = i;
  auto plan = native::compile_eltwise(t.g, nodes, t.g.outputs(), {10, 10});
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  int posts = 0;
  for (const native::EwInstr& in : plan->program.code) posts += in.post != native::EwOp::kCopy;
  // r1 (div into mul), r2, r3, r7 (the first Mul by a scalar only): four post operations.
  EXPECT_EQ(posts, 4);
  // 22 graph nodes less the 4 posts and the Clip / Relu folded as clamps (r1, r3, r8).
  EXPECT_EQ(plan->program.code.size(), 15u);
  expect_bits_of_ref(t);
}

TEST(NativeEltwise, StreamedOutputsWithRowsOffTheCacheLines) {
  // Outputs over 16 MiB go out with non-temporal stores; rows of 1001 floats (tiles stop at row
  // ends) put tile starts off the 64-byte lines, so the plain-store head and tail run too.
  TestGraph t;
  int x = t.input({4400, 1001}), z = t.input({4400, 1});
  int y1 = t.op("Mul", {t.op("Add", {x, z}), x});
  int y2 = t.op("Relu", {y1});
  t.finish({y2, y1});
  expect_matches_ref(t, 1e-6, "streamed outputs");
}

TEST(NativeEltwise, PowSpecialExponentsAndGeneral) {
  for (float e : {1.f, 2.f, 3.f, 0.5f, -1.f, 0.f, 1.7f}) {
    TestGraph t;
    int y = t.op("Pow", {t.input({3, 99}, 0.1f, 4.f), t.constant(Tensor::scalar<float>(e))});
    t.finish({y});
    expect_matches_ref(t, 3e-6, "Pow " + std::to_string(e));
  }
  TestGraph t;  // negative bases with integral exponents (per column), both signs of the base
  Tensor e(DType::kFloat32, {8});
  for (int k = 0; k < 8; ++k) e.data<float>()[k] = static_cast<float>(k % 4);
  int y = t.op("Pow", {t.input({5, 8}, -3.f, 3.f), t.constant(e)});
  t.finish({y});
  expect_matches_ref(t, 3e-6, "Pow with integral exponents");
}

TEST(NativeReduce, AxesKeepdimsAndOpsets) {
  struct Case {
    std::string op;
    Dims dims;
    std::vector<int64_t> axes;
    int keepdims;
  };
  const std::vector<Case> cases = {
      {"ReduceMean", {2, 3, 17, 19}, {2, 3}, 1}, {"ReduceSum", {2, 3, 17, 19}, {1}, 0},
      {"ReduceMax", {2, 3, 17, 19}, {0, 2}, 1},  {"ReduceMean", {4, 100003}, {1}, 0},
      {"ReduceSum", {1, 300000}, {}, 1},         {"ReduceMax", {5, 7, 9}, {-1}, 1},
      {"ReduceMax", {3, 40, 77}, {1}, 0},        {"ReduceSum", {6, 1, 5}, {1}, 1},
  };
  for (const Case& c : cases) {
    for (int opset : {13, 18}) {
      TestGraph t;
      t.opset = opset;
      std::map<std::string, Attribute> attrs = {{"keepdims", Attribute::of_int(c.keepdims)}};
      std::vector<int> in = {t.input(c.dims)};
      const bool axes_input = opset >= 18 || c.op == "ReduceSum";
      if (axes_input && !c.axes.empty()) in.push_back(t.ints(c.axes));
      if (!axes_input && !c.axes.empty()) attrs["axes"] = Attribute::of_ints(c.axes);
      int y = t.op(c.op, in, attrs);
      t.finish({y});
      expect_matches_ref(t, 2e-6,
                         c.op + " " + dims_to_string(c.dims) + " opset " + std::to_string(opset));
    }
  }
}

TEST(NativeSoftmax, AxisSemanticsOfBothOpsets) {
  for (int opset : {11, 13}) {
    for (int64_t axis : {-1, 1, 0, 2}) {
      TestGraph t;
      t.opset = opset;
      int y =
          t.op("Softmax", {t.input({3, 5, 33}, -8.f, 8.f)}, {{"axis", Attribute::of_int(axis)}});
      t.finish({y});
      expect_matches_ref(
          t, 2e-6, "Softmax opset " + std::to_string(opset) + " axis " + std::to_string(axis));
    }
  }
}

TEST(NativeLayerNorm, AxesScaleBiasAndStatistics) {
  for (int64_t axis : {-1, -2, 1}) {
    TestGraph t;
    int x = t.input({4, 6, 37}, -3.f, 5.f);
    int scale = t.constant({37}), bias = t.input(axis == -1 ? Dims{37} : Dims{6, 37});
    std::vector<int> out =
        t.node("LayerNormalization", {x, scale, bias}, {{"axis", Attribute::of_int(axis)}}, 3);
    t.finish(out);
    expect_matches_ref(t, 2e-6, "LayerNormalization axis " + std::to_string(axis));
  }
}

TEST(NativeGemm, MatMulShapesBatchingAndBroadcast) {
  const std::vector<std::pair<Dims, Dims>> shapes = {
      {{37, 300}, {300, 71}},
      {{2, 1, 5, 7}, {3, 7, 4}},
      {{7}, {7, 40}},
      {{3, 5, 7}, {7}},
      {{4, 33, 65}, {65, 33}},
      {{1, 513}, {513, 97}},
      {{2, 3, 29, 31}, {2, 3, 31, 30}},
      {{3, 1300}, {1300, 70}},
      {{37, 300}, {300, 1100}},
      {{200, 300}, {300, 600}},
  };
  for (const auto& [a, b] : shapes) {
    for (bool constant_b : {false, true}) {
      TestGraph t;
      int x = t.input(a);
      int w = constant_b ? t.constant(b) : t.input(b);
      int y = t.op("MatMul", {x, w});
      t.finish({y});
      expect_matches_ref(t, 2e-6, "MatMul " + dims_to_string(a) + " x " + dims_to_string(b));
    }
  }
}

// Products of at most one vector of columns run on the narrow register block (28 x 16 rows and
// columns on AVX-512, 12 x 8 on AVX2): column counts at, under and just over its width, row counts
// off its height, more k than one block, B constant (packed in the narrow panels at compile time)
// and not, several problems in a batch.
TEST(NativeGemm, NarrowProductsAtAndAroundOneVectorOfColumns) {
  for (int64_t n : {1, 7, 8, 9, 15, 16, 17}) {
    for (const Dims& a : {Dims{57, 300}, Dims{29, 13}, Dims{3, 12, 40}, Dims{1, 5}}) {
      for (bool constant_b : {false, true}) {
        TestGraph t;
        const Dims b = {a.back(), n};
        int w = constant_b ? t.constant(b) : t.input(b);
        t.finish({t.op("MatMul", {t.input(a), w})});
        expect_matches_ref(t, 2e-6, "MatMul " + dims_to_string(a) + " x " + dims_to_string(b));
      }
    }
  }
}

// Gemm's C of one row (a bias per column, beta 1) starts the micro-kernel's accumulators: the
// first of several k blocks (k 300 > 256) adds it, the later ones add C; narrow, one and several
// panels of columns, with a Relu tail.
TEST(NativeGemm, ColumnBiasStartsTheFirstKBlock) {
  for (int64_t n : {5, 16, 45, 100}) {
    for (int64_t k : {7, 300}) {
      TestGraph t;
      const int y = t.op("Gemm", {t.input({33, k}), t.constant({k, n}), t.constant({n})});
      t.finish({t.op("Relu", {y})});
      expect_matches_ref(t, 2e-6, "Gemm+Relu k" + std::to_string(k) + " n" + std::to_string(n));
    }
  }
}

TEST(NativeGemm, GemmTransposesAlphaBetaAndBias) {
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      for (const Dims& c : {Dims{}, Dims{45}, Dims{30, 1}, Dims{30, 45}, Dims{1}}) {
        TestGraph t;
        const int64_t m = 30, k = 270, n = 45;
        int a = t.input(ta ? Dims{k, m} : Dims{m, k});
        int b = t.constant(tb ? Dims{n, k} : Dims{k, n});
        std::vector<int> in = {a, b};
        if (!c.empty()) in.push_back(t.constant(c));
        int y = t.op("Gemm", in,
                     {{"transA", Attribute::of_int(ta)},
                      {"transB", Attribute::of_int(tb)},
                      {"alpha", Attribute::of_float(0.5f)},
                      {"beta", Attribute::of_float(1.5f)}});
        t.finish({y});
        expect_matches_ref(
            t, 2e-6,
            "Gemm tA" + std::to_string(ta) + " tB" + std::to_string(tb) + " C" + dims_to_string(c));
      }
    }
  }
}

TEST(NativeGemm, FusedTailsRunOnEachBlock) {
  // MatMul + bias + residual + activation, the product also used outside the group.
  TestGraph t;
  int x = t.input({3, 50, 96});
  int mm = t.op("MatMul", {x, t.constant({96, 200})});
  int biased = t.op("Add", {mm, t.constant({200})});
  int y = t.op("Relu", {t.op("Add", {biased, t.input({3, 50, 200})})});
  t.finish({y, mm});
  expect_matches_ref(t, 2e-6, "MatMul+Add+Add+Relu");

  TestGraph g;  // Gemm with C and a HardSwish tail written over C in place
  int ga = g.input({70, 33});
  int gy = g.op("HardSwish", {g.op("Gemm", {ga, g.input({33, 90}), g.constant({90})})});
  g.finish({gy});
  expect_matches_ref(g, 2e-6, "Gemm+HardSwish");
}

TEST(NativeGemm, ClosingSoftmaxNormalizesEachRowOfTheProduct) {
  // A recognition head (40 x 120 by 120 x 6625, scaled down), batched MatMuls, a Gemm, with and
  // without a tail, rows shorter and longer than a vector, and the opset 11 (flattening) axis.
  struct Case { Dims a, b; bool bias; int opset; };
  const Case cases[] = {{{1, 40, 120}, {120, 1325}, true, 13},
                        {{2, 7, 33}, {33, 5}, false, 13},
                        {{3, 2, 9, 16}, {3, 1, 16, 70}, true, 13},
                        {{13, 24}, {24, 17}, true, 11}};
  for (const Case& c : cases) {
    TestGraph t;
    t.opset = c.opset;
    int y = t.op("MatMul", {t.input(c.a), t.constant(c.b)});
    if (c.bias) y = t.op("Add", {y, t.constant({c.b.back()})});
    y = t.op("Softmax", {y}, {{"axis", Attribute::of_int(-1)}});
    t.finish({y});
    const SubGraph sg(t.g, NodeSet::all(t.g.num_nodes()));
    ASSERT_TRUE(native::native_accepts(sg).ok()) << native::native_accepts(sg).to_string();
    expect_matches_ref(t, 2e-6, "MatMul" + std::string(c.bias ? "+Add" : "") + "+Softmax a" + dims_to_string(c.a));
  }
  TestGraph g;  // Gemm + HardSwish + Softmax
  int gy = g.op("HardSwish", {g.op("Gemm", {g.input({20, 33}), g.input({33, 90}), g.constant({90})})});
  g.finish({g.op("Softmax", {gy}, {{"axis", Attribute::of_int(1)}})});
  expect_matches_ref(g, 2e-6, "Gemm+HardSwish+Softmax");
}

TEST(NativeGemm, RefusesASoftmaxThatDoesNotCloseTheGroup) {
  auto accepted = [](const TestGraph& t) {
    return native::native_accepts(SubGraph(t.g, NodeSet::all(t.g.num_nodes()))).ok();
  };
  {  // over an axis with dims after it
    TestGraph t;
    int y = t.op("MatMul", {t.input({2, 6, 8}), t.constant({8, 5})});
    t.finish({t.op("Softmax", {y}, {{"axis", Attribute::of_int(1)}})});
    EXPECT_FALSE(accepted(t));
  }
  {  // the product is also read outside
    TestGraph t;
    int y = t.op("MatMul", {t.input({6, 8}), t.constant({8, 5})});
    t.finish({t.op("Softmax", {y}, {{"axis", Attribute::of_int(-1)}}), y});
    EXPECT_FALSE(accepted(t));
  }
  {  // something after the Softmax
    TestGraph t;
    int y = t.op("MatMul", {t.input({6, 8}), t.constant({8, 5})});
    t.finish({t.op("Relu", {t.op("Softmax", {y}, {{"axis", Attribute::of_int(-1)}})})});
    EXPECT_FALSE(accepted(t));
  }
}

// ConvTranspose (kernel == stride) with W [ic, oc, kh, kw], optionally its bias.
int deconv(TestGraph& t, int x, int64_t ic, int64_t oc, int64_t kh, int64_t kw, bool bias) {
  std::vector<int> in = {x, t.constant({ic, oc, kh, kw})};
  if (bias) in.push_back(t.constant({oc}));
  return t.op("ConvTranspose", in, {{"strides", Attribute::of_ints({kh, kw})}});
}

// BatchNormalization over c channels with random constants (variance positive).
int batch_norm(TestGraph& t, int x, int64_t c) {
  return t.op("BatchNormalization", {x, t.constant({c}), t.constant({c}), t.constant({c}), t.constant({c}, 0.5f, 2.f)},
              {{"epsilon", Attribute::of_float(1e-3f)}});
}

TEST(NativeDeconv, OverlappingTapsMatchTheReference) {
  struct Case {
    Dims x;
    int64_t oc, k, stride, pad, out_pad, dilation;
  };
  const std::vector<Case> cases = {
      {{1, 8, 7, 9}, 4, 3, 2, 1, 1, 1}, {{2, 4, 5, 5}, 6, 4, 2, 1, 0, 1}, {{1, 5, 4, 6}, 5, 3, 1, 1, 0, 1},
      {{1, 3, 6, 5}, 2, 3, 2, 0, 0, 2}, {{1, 16, 9, 9}, 8, 2, 2, 1, 1, 1},
  };
  for (const Case& c : cases) {
    TestGraph t;
    std::map<std::string, Attribute> attrs = {{"strides", Attribute::of_ints({c.stride, c.stride})},
                                              {"pads", Attribute::of_ints({c.pad, c.pad, c.pad, c.pad})},
                                              {"output_padding", Attribute::of_ints({c.out_pad, c.out_pad})},
                                              {"dilations", Attribute::of_ints({c.dilation, c.dilation})}};
    int y = t.op("ConvTranspose", {t.input(c.x), t.constant({c.x[1], c.oc, c.k, c.k}), t.constant({c.oc})}, attrs);
    y = t.op("Relu", {batch_norm(t, y, c.oc)});
    t.finish({y});
    expect_matches_ref(t, 1e-5, "ConvTranspose " + dims_to_string(c.x) + " k" + std::to_string(c.k) + " s" +
                                    std::to_string(c.stride) + " pad" + std::to_string(c.pad) + " outpad" +
                                    std::to_string(c.out_pad) + " dil" + std::to_string(c.dilation));
  }
}

// The row kernel (simd_deconv.h) through the whole kernel: odd widths whose last vector is
// partial on every ISA (16, 8 * 3 pixels per tile), KW = 1, 2, 4 (interleaved stores) and 3, 5
// (stored float by float), KH != KW, column counts that leave a narrower last block (of 8, 4 or
// 2 columns), one input channel, one pixel per row; with and without bias.
TEST(NativeDeconv, KernelEqualToStrideMatchesTheReference) {
  struct Case {
    Dims x;
    int64_t oc, kh, kw;
    bool bias;
  };
  const std::vector<Case> cases = {
      {{1, 24, 7, 9}, 24, 2, 2, false}, {{2, 5, 3, 33}, 1, 2, 2, true},  {{1, 3, 4, 5}, 4, 3, 1, true},
      {{1, 40, 1, 300}, 7, 1, 3, false}, {{1, 8, 20, 20}, 16, 4, 4, true}, {{1, 5, 3, 37}, 3, 2, 2, true},
      {{2, 7, 4, 37}, 13, 2, 2, false},  {{1, 6, 4, 37}, 5, 3, 1, true},   {{1, 4, 5, 19}, 3, 2, 3, false},
      {{1, 8, 6, 23}, 7, 1, 4, true},    {{1, 3, 2, 45}, 2, 4, 4, false},  {{1, 7, 5, 50}, 2, 3, 2, true},
      {{1, 3, 9, 1}, 4, 2, 2, true},     {{1, 1, 6, 70}, 6, 2, 2, false},  {{1, 9, 3, 64}, 5, 2, 2, true},
      {{1, 2, 3, 17}, 3, 1, 5, true},    {{1, 16, 2, 33}, 1, 1, 1, false}, {{3, 12, 2, 8}, 12, 2, 1, true},
  };
  for (const Case& c : cases) {
    TestGraph t;
    t.seed = 100 + static_cast<uint64_t>(c.x[3] * 7 + c.oc);
    int y = deconv(t, t.input(c.x), c.x[1], c.oc, c.kh, c.kw, c.bias);
    t.finish({y});
    expect_matches_ref(t, 1e-5, "ConvTranspose " + dims_to_string(c.x) + " oc " + std::to_string(c.oc) + " k " +
                                    std::to_string(c.kh) + "x" + std::to_string(c.kw));
  }
}

TEST(NativeDeconv, FoldsAffineNodesAndRunsTheTail) {
  {  // the detection head's ConvTranspose + bias Add + BatchNormalization + Relu
    TestGraph t;
    int y = deconv(t, t.input({1, 12, 10, 16}), 12, 12, 2, 2, false);
    y = t.op("Relu", {batch_norm(t, t.op("Add", {y, t.constant({1, 12, 1, 1})}), 12)});
    t.finish({y});
    expect_matches_ref(t, 1e-5, "ConvTranspose+Add+BatchNormalization+Relu");
  }
  {  // Mul and Sub by per-channel and scalar constants, Div; a second output; a tail input
    TestGraph t;
    int y = deconv(t, t.input({2, 6, 5, 8}), 6, 3, 2, 2, true);
    y = t.op("Div", {t.op("Sub", {t.op("Mul", {t.constant({3, 1, 1}), y}), t.constant({1})}), t.constant({1, 3, 1, 1}, 1.f, 2.f)});
    int s = t.op("Sigmoid", {y});
    int z = t.op("Add", {s, t.input({2, 3, 10, 16})});
    t.finish({z, y});
    expect_matches_ref(t, 1e-5, "ConvTranspose+Mul+Sub+Div+Sigmoid+Add, two outputs");
  }
  {  // the ConvTranspose's own output leaves the group: nothing folds, the tail reads it
    TestGraph t;
    int y = deconv(t, t.input({1, 4, 6, 6}), 4, 5, 2, 2, true);
    int z = t.op("Relu", {t.op("Add", {y, t.constant({1, 5, 1, 1})})});
    t.finish({z, y});
    expect_matches_ref(t, 1e-5, "ConvTranspose exported, Add+Relu tail");
  }
}

// The detection head's two ConvTransposes at full size (PP-OCRv4 det, 640 x 640 input), with
// their tails: bias Add + BatchNormalization + Relu (the Relu runs as the row kernel's clamp),
// and bias Add + Sigmoid.
TEST(NativeDeconv, DetectionHeadShapesMatchTheReference) {
  {
    TestGraph t;
    t.seed = 7;
    int y = deconv(t, t.input({1, 24, 160, 160}), 24, 24, 2, 2, false);
    y = t.op("Relu", {batch_norm(t, t.op("Add", {y, t.constant({1, 24, 1, 1})}), 24)});
    t.finish({y});
    expect_matches_ref(t, 1e-5, "1x24x160x160 -> 24, Add+BatchNormalization+Relu");
  }
  {
    TestGraph t;
    t.seed = 8;
    int y = deconv(t, t.input({1, 24, 320, 320}), 24, 1, 2, 2, false);
    y = t.op("Sigmoid", {t.op("Add", {y, t.constant({1, 1, 1, 1})})});
    t.finish({y});
    expect_matches_ref(t, 1e-5, "1x24x320x320 -> 1, Add+Sigmoid");
  }
}

// A Relu or Clip that alone reads the ConvTranspose's (folded) output runs as the row kernel's
// clamp, with or without a tail after it; one whose input is also read elsewhere stays in the
// tail.
TEST(NativeDeconv, ReluAndClipAfterTheFoldedNodes) {
  const auto scalar = [](TestGraph& t, float v) { return t.constant(Tensor::scalar<float>(v)); };
  {  // Clip(0, 6) after a BatchNormalization, odd width
    TestGraph t;
    int y = deconv(t, t.input({1, 6, 5, 29}), 6, 4, 2, 2, true);
    y = t.op("Clip", {batch_norm(t, y, 4), scalar(t, 0.f), scalar(t, 6.f)});
    t.finish({y});
    expect_matches_ref(t, 1e-5, "ConvTranspose+BatchNormalization+Clip");
  }
  {  // Clip with only an upper bound, KW = 3
    TestGraph t;
    int y = deconv(t, t.input({1, 5, 3, 21}), 5, 3, 2, 3, true);
    y = t.op("Clip", {y, kNoValue, scalar(t, 0.5f)});
    t.finish({y});
    expect_matches_ref(t, 1e-5, "ConvTranspose+Clip(max only)");
  }
  {  // Relu, then more tail that reads the Relu's output twice; two outputs
    TestGraph t;
    int y = deconv(t, t.input({2, 8, 4, 19}), 8, 5, 2, 2, false);
    int r = t.op("Relu", {t.op("Mul", {y, t.constant({1, 5, 1, 1})})});
    int z = t.op("Sigmoid", {t.op("Mul", {r, r})});
    t.finish({z, r});
    expect_matches_ref(t, 1e-5, "ConvTranspose+Mul+Relu, Mul+Sigmoid after");
  }
  {  // Relu of a value the tail also reads: the Relu stays in the tail
    TestGraph t;
    int y = deconv(t, t.input({1, 4, 3, 40}), 4, 3, 1, 4, true);
    int z = t.op("Add", {t.op("Relu", {y}), y});
    t.finish({z});
    expect_matches_ref(t, 1e-5, "ConvTranspose, Relu(y) + y");
  }
  {  // Relu of the ConvTranspose's exported output: nothing folds
    TestGraph t;
    int y = deconv(t, t.input({1, 4, 3, 40}), 4, 3, 2, 2, true);
    int z = t.op("Relu", {y});
    t.finish({z, y});
    expect_matches_ref(t, 1e-5, "ConvTranspose exported, Relu");
  }
}

TEST(NativeDeconv, BatchNormalizationAlone) {
  for (const Dims& d : {Dims{2, 7, 9, 11}, Dims{3, 5}, Dims{1, 16, 70}}) {
    TestGraph t;
    int y = batch_norm(t, t.input(d), d[1]);
    t.finish({y});
    expect_matches_ref(t, 1e-5, "BatchNormalization " + dims_to_string(d));
  }
}

TEST(NativeDeconv, RejectsOtherConvTransposes) {
  const Backend* b = find_backend("native");
  ASSERT_NE(b, nullptr);
  TestGraph t;
  const int x = t.input({1, 4, 6, 6});
  const int w = t.constant({4, 3, 2, 2});
  std::vector<int> nodes;
  t.op("ConvTranspose", {x, t.constant({4, 2, 2, 2})}, {{"strides", Attribute::of_ints({2, 2})}, {"group", Attribute::of_int(2)}});
  t.op("ConvTranspose", {x, w}, {{"strides", Attribute::of_ints({2, 2})}, {"auto_pad", Attribute::of_string("SAME_UPPER")}});
  t.op("ConvTranspose", {x, t.input({4, 3, 2, 2})}, {{"strides", Attribute::of_ints({2, 2})}});  // weights not constant
  int ok = t.op("ConvTranspose", {x, w}, {{"strides", Attribute::of_ints({2, 2})}});
  t.finish({ok});
  for (int n = 0; n < t.g.num_nodes(); ++n)
    EXPECT_EQ(b->supports(t.g, n).ok(), n == t.g.num_nodes() - 1) << "node " << n;
}

// Conv with W [oc, c / group, k, k] (values in [-0.5, 0.5]), optionally its bias.
struct ConvCase {
  Dims x;
  int64_t oc, kh, kw;
  Dims pads = {0, 0, 0, 0};
  int64_t stride = 1, dilation = 1, group = 1;
  bool bias = true;
};

int conv(TestGraph& t, int x, const ConvCase& c) {
  std::vector<int> in = {x, t.constant({c.oc, c.x[1] / c.group, c.kh, c.kw}, -0.5f, 0.5f)};
  if (c.bias) in.push_back(t.constant({c.oc}));
  return t.op("Conv", in,
              {{"pads", Attribute::of_ints(c.pads)}, {"strides", Attribute::of_ints({c.stride, c.stride})},
               {"dilations", Attribute::of_ints({c.dilation, c.dilation})}, {"group", Attribute::of_int(c.group)}});
}

std::string conv_name(const ConvCase& c) {
  return "Conv " + dims_to_string(c.x) + " oc " + std::to_string(c.oc) + " k " + std::to_string(c.kh) + "x" +
         std::to_string(c.kw) + " pads " + dims_to_string(c.pads) + " s" + std::to_string(c.stride) + " d" +
         std::to_string(c.dilation) + " g" + std::to_string(c.group) + (c.bias ? "" : " no bias");
}

TEST(NativeConv, MatchesTheReference) {
  const std::vector<ConvCase> cases = {
      {{1, 96, 20, 20}, 24, 3, 3, {1, 1, 1, 1}},             // the detection model's 3x3, scaled down
      {{1, 7, 13, 29}, 13, 3, 3, {1, 1, 1, 1}},              // widths and channels off the blocks
      {{1, 16, 9, 40}, 5, 1, 1},                             // 1x1
      {{1, 8, 11, 37}, 40, 5, 5, {2, 2, 2, 2}},              // k5, several channel blocks
      {{1, 6, 10, 12}, 24, 3, 3, {0, 1, 2, 0}, 1, 1, 1, false},  // asymmetric pads, no bias
      {{2, 12, 8, 18}, 12, 3, 3, {1, 1, 1, 1}},              // batch 2
      {{1, 5, 17, 33}, 7, 3, 3, {1, 1, 1, 1}, 2},            // stride 2
      {{1, 4, 14, 15}, 9, 7, 7, {3, 3, 3, 3}, 2},            // k7 stride 2
      {{1, 3, 9, 70}, 6, 1, 7, {0, 3, 0, 3}},                // 1x7
      {{1, 8, 6, 100}, 13, 3, 3, {1, 1, 1, 1}},             // rows of 64+ pixels, one by one
      {{2, 10, 7, 130}, 24, 3, 5, {1, 0, 1, 2}},            // ... with a masked end, asymmetric
      {{1, 6, 12, 13}, 10, 3, 3, {2, 2, 2, 2}, 1, 2, 1, false},  // dilation 2
      {{2, 8, 13, 11}, 12, 3, 3, {0, 1, 1, 0}, 2, 1, 4},     // grouped, strided
      {{1, 4, 3, 5}, 3, 5, 5, {2, 2, 2, 2}},                 // kernel larger than the image
      {{2, 40, 1, 1}, 13, 1, 1},                             // one pixel: a fully connected layer
      {{1, 33, 1, 1}, 7, 1, 1, {0, 0, 0, 0}, 1, 1, 1, false},  // ... without bias
  };
  for (const ConvCase& c : cases) {
    TestGraph t;
    t.finish({conv(t, t.input(c.x), c)});
    expect_matches_ref(t, 2e-5, conv_name(c));
  }
}

TEST(NativeConv, AutoPadSame) {
  for (const char* mode : {"SAME_UPPER", "SAME_LOWER", "VALID"}) {
    TestGraph t;
    int y = t.op("Conv", {t.input({1, 5, 10, 11}), t.constant({6, 5, 4, 3})},
                 {{"auto_pad", Attribute::of_string(mode)}, {"strides", Attribute::of_ints({2, 1})}});
    t.finish({y});
    expect_matches_ref(t, 2e-5, std::string("Conv auto_pad ") + mode);
  }
}

TEST(NativeConv, FoldsAffineNodesAndRunsTheTail) {
  const ConvCase c{{1, 24, 9, 21}, 13, 3, 3, {1, 1, 1, 1}};
  {
    TestGraph t;
    t.finish({t.op("Relu", {batch_norm(t, conv(t, t.input(c.x), c), c.oc)})});
    expect_matches_ref(t, 2e-5, "Conv+BatchNormalization+Relu");
  }
  {
    TestGraph t;
    int y = t.op("Add", {conv(t, t.input(c.x), c), t.constant({1, c.oc, 1, 1})});
    y = t.op("Clip", {y, t.constant(Tensor::scalar(0.f)), t.constant(Tensor::scalar(6.f))});
    t.finish({y});
    expect_matches_ref(t, 2e-5, "Conv+Add(per channel)+Clip");
  }
  {  // x * hardsigmoid(x), as the detection model's backbone writes HardSwish
    TestGraph t;
    int y = batch_norm(t, conv(t, t.input(c.x), c), c.oc);
    y = t.op("Mul", {y, t.op("HardSigmoid", {y}, {{"alpha", Attribute::of_float(1.f / 6)}, {"beta", Attribute::of_float(0.5f)}})});
    t.finish({y});
    expect_matches_ref(t, 2e-5, "Conv+BatchNormalization+HardSigmoid+Mul");
  }
  {  // Mul, Sub, Div by per-channel and scalar constants; two outputs; a tail input
    TestGraph t;
    int y = conv(t, t.input({2, 6, 7, 9}), ConvCase{{2, 6, 7, 9}, 3, 3, 3, {1, 1, 1, 1}});
    y = t.op("Div", {t.op("Sub", {t.op("Mul", {t.constant({3, 1, 1}), y}), t.constant({1})}), t.constant({1, 3, 1, 1}, 1.f, 2.f)});
    int z = t.op("Add", {t.op("Sigmoid", {y}), t.input({2, 3, 7, 9})});
    t.finish({z, y});
    expect_matches_ref(t, 2e-5, "Conv+Mul+Sub+Div+Sigmoid+Add, two outputs");
  }
  {  // the Conv's own output leaves the group: nothing folds, the tail reads it
    TestGraph t;
    int y = conv(t, t.input(c.x), c);
    t.finish({t.op("Relu", {t.op("Add", {y, t.constant({1, c.oc, 1, 1})})}), y});
    expect_matches_ref(t, 2e-5, "Conv exported, Add+Relu tail");
  }
}

// A direct convolution's tail runs over the whole output after it when the output fits the caches
// (2 MiB), else per task on its rows: both ways, with the tail reading the convolution's output
// (HardSwish written out) and with the convolution's own output leaving the group as well.
TEST(NativeConv, TailsOfSmallAndLargeOutputs) {
  for (const ConvCase& c : {ConvCase{{1, 24, 1, 1}, 50, 1, 1},                 // a squeeze-excite FC
                            ConvCase{{1, 16, 12, 80}, 40, 1, 1},               // 150 KB out
                            ConvCase{{1, 8, 131, 130}, 32, 5, 5, {2, 2, 2, 2}}}) {  // 2.2 MB out
    {
      TestGraph t;
      int y = batch_norm(t, conv(t, t.input(c.x), c), c.oc);
      int hs = t.op("Div", {t.op("Mul", {y, t.op("Clip", {t.op("Add", {y, t.constant(Tensor::scalar(3.f))}),
                                                            t.constant(Tensor::scalar(0.f)),
                                                            t.constant(Tensor::scalar(6.f))})}),
                            t.constant(Tensor::scalar(6.f))});
      t.finish({t.op("Add", {t.op("Mul", {hs, t.constant(Tensor::scalar(0.7f))}), t.constant(Tensor::scalar(0.1f))})});
      expect_matches_ref(t, 2e-5, conv_name(c) + " +BatchNormalization+HardSwish+Mul+Add");
    }
    {
      TestGraph t;
      int y = conv(t, t.input(c.x), c);
      t.finish({t.op("Relu", {t.op("Add", {y, t.constant({1, c.oc, 1, 1})})}), y});
      expect_matches_ref(t, 2e-5, conv_name(c) + " exported, Add+Relu tail");
    }
  }
}

TEST(NativeConv, RefusesWhatItCannotRun) {
  const Backend* b = find_backend("native");
  ASSERT_NE(b, nullptr);
  TestGraph t;
  const int x = t.input({1, 4, 6, 6});
  std::vector<int> y;  // every node an output, so that none is pruned
  y.push_back(t.op("Conv", {x, t.constant({8, 1, 3, 3})}, {{"group", Attribute::of_int(4)}}));  // depthwise x2
  y.push_back(t.op("Conv", {x, t.constant({4, 1, 3, 3})},
                   {{"group", Attribute::of_int(4)}, {"strides", Attribute::of_ints({1, 3})}}));  // depthwise, stride 3
  y.push_back(t.op("Conv", {x, t.input({3, 4, 3, 3})}));                                         // weights not constant
  y.push_back(t.op("Conv", {x, t.constant({3, 4, 3, 3}), t.input({3})}));                        // bias not constant
  y.push_back(t.op("Conv", {t.input({1, 4, 6}), t.constant({3, 4, 3})}));                        // 1-D
  y.push_back(t.op("Conv", {x, t.constant({4, 4, 3, 3})}, {{"kernel_shape", Attribute::of_ints({2, 2})}}));  // not W's
  y.push_back(t.op("Conv", {x, t.constant({4, 2, 3, 3})},
                   {{"group", Attribute::of_int(2)}, {"dilations", Attribute::of_ints({2, 2})}}));  // runs
  y.push_back(t.op("Conv", {x, t.constant({4, 1, 3, 3})}, {{"group", Attribute::of_int(4)}}));  // runs: depthwise
  t.finish(y);
  for (int n = 0; n < t.g.num_nodes(); ++n) {
    const Status st = b->supports(t.g, n);
    EXPECT_EQ(st.ok(), n >= t.g.num_nodes() - 2) << "node " << n;
    if (!st.ok()) {
      EXPECT_FALSE(st.message().empty()) << "node " << n;
    }
  }
}

// A group whose Conv / ConvTranspose is fed by another node of the group is refused (native runs
// nothing before the anchor); the anchor followed by its tail is accepted. (The cls model's
// Mul+Conv+BatchNormalization was once accepted and then failed to compile.)
TEST(NativeConv, RefusesGroupsWithNodesBeforeTheConv) {
  const Backend* b = find_backend("native");
  ASSERT_NE(b, nullptr);
  for (const char* op : {"Conv", "ConvTranspose"}) {
    TestGraph t;
    const int x = t.input({1, 4, 6, 6});
    const int scaled = t.op("Mul", {x, t.constant({1, 4, 1, 1})});
    const int conv = t.op(op, {scaled, t.constant({4, 4, 2, 2})},
                          {{"strides", Attribute::of_ints({2, 2})}});
    t.finish({t.op("Relu", {conv})});
    NodeSet all = NodeSet::all(t.g.num_nodes()), tail(t.g.num_nodes());
    for (int n = 0; n < t.g.num_nodes(); ++n)
      if (t.g.node(n).op_type != "Mul") tail.add(n);
    const Status st = b->accepts(SubGraph(t.g, all));
    EXPECT_FALSE(st.ok()) << op;
    EXPECT_NE(st.message().find("first"), std::string::npos) << st.message();
    EXPECT_TRUE(b->accepts(SubGraph(t.g, tail)).ok()) << op;
  }
}

TEST(NativeBackend, RejectsWhatItCannotRun) {
  const Backend* b = find_backend("native");
  ASSERT_NE(b, nullptr);
  TestGraph t;
  int x = t.g.add_input("dyn",
                        TensorType{DType::kFloat32, std::vector<Dim>{Dim::symbolic("n"), Dim(4)}});
  t.inputs.push_back(Tensor(DType::kFloat32, {2, 4}));
  int y = t.op("Relu", {x});
  int z = t.op("Softmax", {t.input({4, 4})});
  int w =
      t.op("Add", {z, t.op("ReduceSum", {t.input({4, 4})}, {{"keepdims", Attribute::of_int(1)}})});
  t.finish({y, w});
  for (int n = 0; n < t.g.num_nodes(); ++n) {
    if (t.g.node(n).op_type == "Relu") {
      EXPECT_FALSE(b->supports(t.g, n).ok());  // dynamic shape
    }
  }
  // Softmax + Add is not a group native fuses.
  NodeSet s(t.g.num_nodes());
  for (int n = 0; n < t.g.num_nodes(); ++n)
    if (t.g.node(n).op_type == "Softmax" || t.g.node(n).op_type == "Add") s.add(n);
  EXPECT_FALSE(b->accepts(SubGraph(t.g, s)).ok());
  EXPECT_NE(b->version().find("tessera native r"), std::string::npos);
}

}  // namespace
}  // namespace tessera
