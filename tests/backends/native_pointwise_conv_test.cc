// The native 1x1 convolution as a GEMM (pointwise_conv.cc) against the reference kernels, in both
// layouts, for every ISA this CPU runs at 1 and 2 threads, on seeded random data: with and without
// bias, output channels off the GEMM panel width, more input channels than one k block, one and
// two images; opened by a squeeze-excitation
// Mul (a per-channel scale from a kernel input, per image, the operands either way round, a scalar
// constant) that the kernel folds into its weights; with BatchNormalization folded and a residual
// Add + Relu tail, intermediates exported. The groups it must refuse, and the fused-pattern
// candidates the native backend proposes for an SE block. Outputs are allocated full of NaN, so an
// element the kernel never writes fails the comparison.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/harness.h"
#include "backends/native/native_compile.h"
#include "backends/native/pointwise_conv.h"
#include "backends/native_kernel_runner.h"
#include "backends/test_graph.h"
#include "partition/rules.h"

namespace tessera {
namespace {

using testing_graph::Dims;
using testing_graph::TestGraph;
using testing_native::isas;

constexpr double kTolerance = 1e-5;

std::string dims_str(const Dims& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

// Both layouts, every ISA, 1 and 2 threads.
void expect_matches_ref(const TestGraph& t, const std::string& what) {
  testing_native::expect_matches_ref(t, kTolerance, what + " (row-major)");
  testing_native::expect_channels_last_matches_ref(t, kTolerance, what);
}

int pointwise(TestGraph& t, int x, int64_t c, int64_t oc, bool bias) {
  std::vector<int> in = {x, t.constant({oc, c, 1, 1}, -0.4f, 0.4f)};
  if (bias) in.push_back(t.constant({oc}));
  return t.op("Conv", in, {{"kernel_shape", Attribute::of_ints({1, 1})}});
}

int batch_norm(TestGraph& t, int x, int64_t c) {
  return t.op("BatchNormalization",
              {x, t.constant({c}), t.constant({c}), t.constant({c}), t.constant({c}, 0.5f, 2.f)});
}

TEST(NativePointwiseConv, PlainConvolutionsInBothLayouts) {
  struct Case {
    Dims x;
    int64_t oc;
    bool bias;
  };
  for (const Case& c : {Case{{1, 8, 12, 9}, 8, true}, Case{{2, 24, 5, 7}, 40, false}, Case{{1, 200, 2, 96}, 32, true},
                        Case{{1, 3, 1, 1}, 70, true},
                        Case{{1, 300, 3, 7}, 48, true}}) {  // k blocks of 256, read in place channels-last
    TestGraph t;
    const int y = pointwise(t, t.input(c.x), c.x[1], c.oc, c.bias);
    t.finish({y});
    ASSERT_TRUE(native::check_pointwise_conv_group(testing_native::whole(t)).ok());
    expect_matches_ref(t, "conv x" + dims_str(c.x) + " o" + std::to_string(c.oc));
  }
}

// Few output channels: channels-last, the narrow register block (one vector of columns) runs them,
// its weights packed in narrow panels; pixel counts off its 28 (AVX-512) and 12 (AVX2) rows.
TEST(NativePointwiseConv, FewOutputChannelsOnTheNarrowBlock) {
  for (int64_t oc : {1, 8, 13, 16, 17}) {
    for (const Dims& x : {Dims{1, 24, 6, 96}, Dims{2, 32, 5, 7}, Dims{1, 300, 3, 11}, Dims{1, 3, 1, 1}}) {
      TestGraph t;
      const int y = pointwise(t, t.input(x), x[1], oc, /*bias=*/true);
      t.finish({t.op("Relu", {batch_norm(t, y, oc)})});
      expect_matches_ref(t, "conv+bn+relu x" + dims_str(x) + " o" + std::to_string(oc));
    }
  }
  // Opened by a per-channel scale: the narrow panels are packed again each run.
  TestGraph t;
  const int x = t.input({1, 88, 3, 96});
  const int scaled = t.op("Mul", {x, t.input({1, 88, 1, 1})});
  t.finish({pointwise(t, scaled, 88, 16, true)});
  expect_matches_ref(t, "scaled conv x[1,88,3,96] o16");
}

TEST(NativePointwiseConv, ScaledInputIsFoldedIntoTheWeights) {
  struct Case {
    Dims x, s;
    int64_t oc;
    bool scale_first, residual;
  };
  for (const Case& c : {Case{{1, 8, 12, 96}, {1, 8, 1, 1}, 8, false, false},
                        Case{{1, 88, 3, 96}, {1, 88, 1, 1}, 16, true, true},
                        Case{{2, 20, 3, 5}, {2, 20, 1, 1}, 36, false, true},  // a scale per image
                        Case{{2, 20, 3, 5}, {20, 1, 1}, 12, true, false}}) {  // rank 3, shared
    TestGraph t;
    const int x = t.input(c.x);
    const int s = t.input(c.s, 0.f, 1.f);
    const int scaled = c.scale_first ? t.op("Mul", {s, x}) : t.op("Mul", {x, s});
    int y = batch_norm(t, pointwise(t, scaled, c.x[1], c.oc, true), c.oc);
    std::vector<int> outs;
    if (c.residual) {
      const int bn = y;
      y = t.op("Relu", {t.op("Add", {y, t.input({c.x[0], c.oc, c.x[2], c.x[3]})})});
      outs.push_back(bn);  // an intermediate the tail also reads
    }
    outs.push_back(y);
    t.finish(outs);
    const SubGraph sg = testing_native::whole(t);
    ASSERT_TRUE(native::conv_has_head(sg));
    ASSERT_TRUE(find_backend("native")->accepts(sg).ok()) << find_backend("native")->accepts(sg).to_string();
    EXPECT_TRUE(find_backend("native")->takes_channels_last(sg));
    expect_matches_ref(t, "scaled x" + dims_str(c.x) + " s" + dims_str(c.s));
  }
  // A scalar constant scale.
  TestGraph t;
  const int x = t.input({1, 16, 4, 6});
  const int y = pointwise(t, t.op("Mul", {x, t.constant(Tensor::scalar<float>(0.37f))}), 16, 24, false);
  t.finish({y});
  expect_matches_ref(t, "scalar scale");
}

TEST(NativePointwiseConv, RefusesWhatItDoesNotRun) {
  auto refused = [](TestGraph& t, const std::string& why) {
    const SubGraph sg = testing_native::whole(t);
    EXPECT_FALSE(find_backend("native")->accepts(sg).ok()) << why;
    EXPECT_FALSE(find_backend("native")->takes_channels_last(sg)) << why;
  };
  {  // a scale along W, not channels: s [1, C] broadcasts over the last axes
    TestGraph t;
    const int x = t.input({1, 6, 4, 6});
    const int y = pointwise(t, t.op("Mul", {x, t.input({1, 6})}), 6, 8, false);
    t.finish({y});
    refused(t, "scale along W");
  }
  {  // two full-size tensors multiplied
    TestGraph t;
    const int x = t.input({1, 6, 4, 5});
    const int y = pointwise(t, t.op("Mul", {x, t.input({1, 6, 4, 5})}), 6, 8, false);
    t.finish({y});
    refused(t, "full-size product");
  }
  {  // the scaled tensor also leaves the group
    TestGraph t;
    const int x = t.input({1, 6, 4, 5});
    const int scaled = t.op("Mul", {x, t.input({1, 6, 1, 1})});
    const int y = pointwise(t, scaled, 6, 8, false);
    t.finish({y, scaled});
    refused(t, "scaled tensor exported");
  }
  {  // a strided 1x1 convolution after the scale
    TestGraph t;
    const int x = t.input({1, 6, 4, 6});
    const int scaled = t.op("Mul", {x, t.input({1, 6, 1, 1})});
    const int y = t.op("Conv", {scaled, t.constant({8, 6, 1, 1})},
                       {{"kernel_shape", Attribute::of_ints({1, 1})}, {"strides", Attribute::of_ints({2, 2})}});
    t.finish({y});
    refused(t, "strided");
  }
  {  // a 3x3 convolution: the direct kernel's, row-major only
    TestGraph t;
    const int y = t.op("Conv", {t.input({1, 6, 5, 5}), t.constant({8, 6, 3, 3})});
    t.finish({y});
    const SubGraph sg = testing_native::whole(t);
    EXPECT_TRUE(find_backend("native")->accepts(sg).ok());
    EXPECT_FALSE(find_backend("native")->takes_channels_last(sg));
  }
}

// An SE block's projection: the native backend proposes Mul + Conv, + BatchNormalization and
// + the residual Add as candidates (a fused pattern), whatever its fusion rules combine.
TEST(NativePointwiseConv, SqueezeExcitationProjectionIsACandidate) {
  TestGraph t;
  const int x = t.input({1, 16, 4, 6});
  const int pooled = t.op("GlobalAveragePool", {x});
  const int s = t.op("HardSigmoid", {pointwise(t, pooled, 16, 16, true)});
  const int scaled = t.op("Mul", {x, s});
  const int conv = pointwise(t, scaled, 16, 8, false);
  const int bn = batch_norm(t, conv, 8);
  const int y = t.op("Add", {bn, t.input({1, 8, 4, 6})});
  t.finish({y});
  const Backend* native = find_backend("native");
  const std::vector<Candidate> cands = candidates_for(t.g, {native}, RuleOptions{});
  auto has = [&](std::vector<int> values) {
    NodeSet want(t.g.num_nodes());
    for (int v : values) want.add(t.g.value(v).producer);
    return std::any_of(cands.begin(), cands.end(),
                       [&](const Candidate& c) { return c.backend == native && c.nodes == want; });
  };
  EXPECT_TRUE(has({scaled, conv}));
  EXPECT_TRUE(has({scaled, conv, bn}));
  EXPECT_TRUE(has({scaled, conv, bn, y}));
}

}  // namespace
}  // namespace tessera
