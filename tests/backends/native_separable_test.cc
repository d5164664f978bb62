// The native separable pair (separable_conv.cc: a depthwise group, then the 1x1 group reading its
// result, as one kernel) against the reference kernels, in both layouts, for every ISA this CPU
// runs at 1 and 2 threads, on seeded random data: rec's block (5x5 or 3x3 depthwise, stride 1 or
// 2, scalar affine + HardSwish tails on both), channels and output channels off the vector and
// GEMM panel widths, images of one band and of many (bands that split rows), two images, the
// depthwise result also a graph output, a residual Add read by the 1x1 tail. The groups it
// refuses, and the candidates the partitioner proposes for the native backend. Outputs are
// allocated full of NaN, so a pixel the kernel never writes fails the comparison.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/native/native_compile.h"
#include "backends/native/separable_conv.h"
#include "backends/native_kernel_runner.h"
#include "backends/test_graph.h"
#include "partition/rules.h"

namespace tessera {
namespace {

using testing_graph::Dims;
using testing_graph::TestGraph;

constexpr double kTolerance = 1e-5;

int scalar(TestGraph& t, float v) { return t.constant(Tensor::scalar(v)); }

// PP-OCR rec's activation: a scalar affine (x * a + b), then x * Clip(x + 3, 0, 6) / 6.
int affine_hard_swish(TestGraph& t, int x) {
  x = t.op("Add", {t.op("Mul", {x, scalar(t, 0.9f)}), scalar(t, 0.1f)});
  const int c = t.op("Clip", {t.op("Add", {x, scalar(t, 3.f)}), scalar(t, 0.f), scalar(t, 6.f)});
  return t.op("Div", {t.op("Mul", {x, c}), scalar(t, 6.f)});
}

int depthwise(TestGraph& t, int x, int64_t c, int64_t k, int64_t stride) {
  return t.op("Conv", {x, t.constant({c, 1, k, k}, -0.5f, 0.5f), t.constant({c})},
              {{"group", Attribute::of_int(c)},
               {"kernel_shape", Attribute::of_ints({k, k})},
               {"strides", Attribute::of_ints({stride, stride})},
               {"pads", Attribute::of_ints({k / 2, k / 2, k / 2, k / 2})}});
}

int pointwise(TestGraph& t, int x, int64_t c, int64_t oc) {
  return t.op("Conv", {x, t.constant({oc, c, 1, 1}, -0.3f, 0.3f), t.constant({oc})},
              {{"kernel_shape", Attribute::of_ints({1, 1})}});
}

void expect_matches_ref(const TestGraph& t, const std::string& what) {
  const SubGraph sg = testing_native::whole(t);
  ASSERT_TRUE(native::check_separable_group(sg).ok()) << what << ": " << native::check_separable_group(sg).to_string();
  ASSERT_TRUE(find_backend("native")->accepts(sg).ok()) << what;
  EXPECT_TRUE(find_backend("native")->takes_channels_last(sg)) << what;
  testing_native::expect_matches_ref(t, kTolerance, what + " (row-major)");
  testing_native::expect_channels_last_matches_ref(t, kTolerance, what);
}

TEST(NativeSeparable, RecBlocksMatchTheReference) {
  struct Case {
    Dims x;
    int64_t k, stride, oc;
  };
  for (const Case& c : {Case{{1, 16, 6, 20}, 3, 1, 32},     // one band
                        Case{{1, 24, 12, 40}, 5, 1, 40},    // 480 pixels: bands split rows
                        Case{{1, 20, 13, 41}, 3, 2, 36},    // stride 2, odd sizes, channels off 16
                        Case{{2, 40, 7, 30}, 5, 1, 24},     // two images
                        Case{{1, 3, 5, 9}, 3, 1, 70},       // 3 channels, 70 outputs
                        Case{{1, 48, 24, 80}, 5, 2, 64}}) {  // 480 pixels after stride 2
    TestGraph t;
    const int x = t.input(c.x);
    const int d = affine_hard_swish(t, depthwise(t, x, c.x[1], c.k, c.stride));
    t.finish({affine_hard_swish(t, pointwise(t, d, c.x[1], c.oc))});
    expect_matches_ref(t, "separable " + dims_to_string(c.x) + " k" + std::to_string(c.k) + " s" +
                              std::to_string(c.stride) + " o" + std::to_string(c.oc));
  }
}

TEST(NativeSeparable, ExportedIntermediatesAndResiduals) {
  {  // no tails at all: the depthwise output is the 1x1 input
    TestGraph t;
    t.finish({pointwise(t, depthwise(t, t.input({1, 32, 9, 50}), 32, 3, 1), 32, 48)});
    expect_matches_ref(t, "Conv(dw)+Conv");
  }
  {  // the depthwise result is also a graph output
    TestGraph t;
    const int d = affine_hard_swish(t, depthwise(t, t.input({1, 32, 11, 30}), 32, 3, 1));
    t.finish({affine_hard_swish(t, pointwise(t, d, 32, 40)), d});
    expect_matches_ref(t, "depthwise result exported");
  }
  {  // a residual: the 1x1 tail adds the pair's input back, then Relu
    TestGraph t;
    const int x = t.input({1, 24, 10, 36});
    const int d = t.op("Relu", {depthwise(t, x, 24, 3, 1)});
    t.finish({t.op("Relu", {t.op("Add", {pointwise(t, d, 24, 24), x})})});
    expect_matches_ref(t, "residual Add of the pair's input");
  }
}

TEST(NativeSeparable, RefusesOtherPairs) {
  {  // two depthwise convolutions
    TestGraph t;
    t.finish({depthwise(t, depthwise(t, t.input({1, 16, 8, 8}), 16, 3, 1), 16, 3, 1)});
    EXPECT_FALSE(native::check_separable_group(testing_native::whole(t)).ok());
    EXPECT_FALSE(find_backend("native")->accepts(testing_native::whole(t)).ok());
  }
  {  // a dense 3x3 after the depthwise one
    TestGraph t;
    const int d = depthwise(t, t.input({1, 16, 8, 8}), 16, 3, 1);
    t.finish({t.op("Conv", {d, t.constant({8, 16, 3, 3}), t.constant({8})},
                   {{"kernel_shape", Attribute::of_ints({3, 3})}, {"pads", Attribute::of_ints({1, 1, 1, 1})}})});
    EXPECT_FALSE(native::check_separable_group(testing_native::whole(t)).ok());
  }
  {  // a squeeze-excitation scale between them: the 1x1 group opens with a Mul
    TestGraph t;
    const int d = depthwise(t, t.input({1, 16, 8, 8}), 16, 3, 1);
    const int s = t.op("Sigmoid", {t.op("GlobalAveragePool", {d})});
    t.finish({pointwise(t, t.op("Mul", {d, s}), 16, 16)});
    EXPECT_FALSE(find_backend("native")->accepts(testing_native::whole(t)).ok());
  }
}

// The native backend's candidates for rec's block include the whole pair (its two groups, tails
// included), so the partitioner can measure it against the groups run apart.
TEST(NativeSeparable, PartitionerProposesThePair) {
  TestGraph t;
  const int x = t.input({1, 32, 12, 40});
  const int d = affine_hard_swish(t, depthwise(t, x, 32, 5, 1));
  t.finish({affine_hard_swish(t, pointwise(t, d, 32, 64))});
  const std::vector<Candidate> candidates = candidates_for(t.g, {find_backend("native")}, RuleOptions{});
  bool whole_pair = false;
  for (const Candidate& c : candidates)
    if (c.backend == find_backend("native") && c.nodes == NodeSet::all(t.g.num_nodes())) whole_pair = true;
  EXPECT_TRUE(whole_pair);
}

}  // namespace
}  // namespace tessera
