// The native Conv's depthwise path (group == C == OC: conv_kernels.cc, simd_depthwise.h) against
// the reference kernels, for every ISA this CPU runs at 1 and 2 threads, on seeded random data,
// through compile_native as the backend compiles it: kernels 1 to 16 (square or not), horizontal
// strides 1 and 2 with vertical strides 1 to 3, dilations, symmetric, zero and asymmetric pads,
// widths off the vector widths, tiny images, 1 to 48 channels, one and two images, with and
// without bias; the folded affine nodes (BatchNormalization, per-channel Mul / Add) and the
// elementwise tails (PP-OCR's HardSwish as Add+Clip+Mul+Div, Relu), with intermediates exported;
// the det model's depthwise shapes at the best ISA; and the depthwise convolutions the path does
// not run (a channel multiplier of 2, a horizontal stride of 3), which compile_native refuses.
// Outputs are allocated full of NaN, so a pixel the kernel never writes fails the comparison.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/harness.h"
#include "backends/native/isa.h"
#include "backends/native/native_compile.h"
#include "backends/native/separable_conv.h"
#include "backends/native_kernel_runner.h"
#include "backends/test_graph.h"

namespace tessera {
namespace {

using testing_graph::Dims;
using testing_graph::run_ref;
using testing_graph::TestGraph;
using testing_native::isas;
using testing_native::run_native;

constexpr double kTolerance = 1e-5;

// Row-major, and channels-last where the group is a depthwise one (group == C > 1: the channels-last
// kernel of separable_conv.cc; one channel is an ordinary convolution, row-major only).
void expect_matches_ref(const TestGraph& t, const std::string& what,
                        const std::vector<const native::IsaKernels*>& on = isas(),
                        const std::vector<int>& thread_counts = {1, 2}) {
  testing_native::expect_matches_ref(t, kTolerance, what, on, thread_counts);
  const SubGraph sg = testing_native::whole(t);
  const bool depthwise = native::check_depthwise_group(sg).ok();
  for (int n : sg.nodes()) {
    if (t.g.node(n).op_type == "Conv" && t.g.node(n).attr_int("group", 1) > 1) {
      ASSERT_TRUE(depthwise) << what << ": " << native::check_depthwise_group(sg).to_string();
    }
  }
  EXPECT_EQ(find_backend("native")->takes_channels_last(sg), depthwise) << what;
  if (depthwise) testing_native::expect_channels_last_matches_ref(t, kTolerance, what, on, thread_counts);
}

// A depthwise Conv (W [C * multiplier, 1, kh, kw] in [-0.5, 0.5], group C) of x [N, C, H, W].
// Empty pads: symmetric, half the dilated kernel.
struct Case {
  Dims x;
  int64_t kh, kw;
  Dims strides = {1, 1};
  Dims pads = {};
  Dims dilations = {1, 1};
  bool bias = true;
  int64_t multiplier = 1;
};

Dims pads_of(const Case& c) {
  if (!c.pads.empty()) return c.pads;
  const int64_t ph = c.dilations[0] * (c.kh / 2), pw = c.dilations[1] * (c.kw / 2);
  return {ph, pw, ph, pw};
}

int depthwise(TestGraph& t, int x, const Case& c) {
  const int64_t ch = c.x[1], oc = ch * c.multiplier;
  std::vector<int> in = {x, t.constant({oc, 1, c.kh, c.kw}, -0.5f, 0.5f)};
  if (c.bias) in.push_back(t.constant({oc}));
  return t.op("Conv", in,
              {{"group", Attribute::of_int(ch)},
               {"kernel_shape", Attribute::of_ints({c.kh, c.kw})},
               {"strides", Attribute::of_ints(c.strides)},
               {"dilations", Attribute::of_ints(c.dilations)},
               {"pads", Attribute::of_ints(pads_of(c))}});
}

std::string name(const Case& c) {
  return "depthwise " + dims_to_string(c.x) + " k " + std::to_string(c.kh) + "x" +
         std::to_string(c.kw) + " strides " + dims_to_string(c.strides) + " dilations " +
         dims_to_string(c.dilations) + " pads " + dims_to_string(pads_of(c)) +
         (c.multiplier != 1 ? " multiplier " + std::to_string(c.multiplier) : "") +
         (c.bias ? "" : " no bias");
}

int batch_norm(TestGraph& t, int x, int64_t c) {
  return t.op("BatchNormalization",
              {x, t.constant({c}), t.constant({c}), t.constant({c}), t.constant({c}, 0.5f, 2.f)},
              {{"epsilon", Attribute::of_float(1e-3f)}});
}

int scalar(TestGraph& t, float v) { return t.constant(Tensor::scalar(v)); }

// PP-OCR's HardSwish: x * Clip(x + 3, 0, 6) / 6. *clip (if given) gets the Clip's output.
int hard_swish(TestGraph& t, int x, int* clip = nullptr) {
  const int c = t.op("Clip", {t.op("Add", {x, scalar(t, 3.f)}), scalar(t, 0.f), scalar(t, 6.f)});
  if (clip) *clip = c;
  return t.op("Div", {t.op("Mul", {x, c}), scalar(t, 6.f)});
}

TEST(NativeDepthwise, MatchesTheReference) {
  const Dims s11 = {1, 1}, s22 = {2, 2}, s12 = {1, 2}, s21 = {2, 1};
  const std::vector<Case> cases = {
      {{1, 16, 9, 7}, 3, 3},                                   // width 7: less than a vector
      {{2, 3, 12, 33}, 3, 3, s11, {}, {1, 1}, false},          // two images, no bias
      {{1, 48, 10, 70}, 5, 5},                                 // 5x5
      {{1, 16, 6, 161}, 3, 3, s22},                            // stride 2, odd width
      {{2, 16, 11, 33}, 5, 5, s22, {}, {1, 1}, false},         // 5x5 stride 2, two images
      {{1, 3, 9, 70}, 3, 3, s12},                              // horizontal stride only
      {{1, 16, 10, 161}, 3, 3, s21},                           // vertical stride only
      {{2, 48, 7, 33}, 5, 5, s12},                             // 5x5, horizontal stride only
      {{1, 16, 13, 70}, 5, 5, s21, {}, {1, 1}, false},         // 5x5, vertical stride only
      {{1, 16, 17, 33}, 3, 3, {3, 1}},                         // vertical stride 3
      {{1, 3, 16, 70}, 3, 3, {3, 2}},                          // ... and horizontal 2
      {{1, 16, 8, 33}, 3, 3, s11, {0, 0, 0, 0}},               // no pads
      {{1, 48, 9, 70}, 3, 3, s22, {0, 0, 0, 0}},               // no pads, stride 2
      {{1, 16, 10, 33}, 3, 3, s11, {0, 1, 2, 0}},              // asymmetric pads
      {{1, 3, 11, 70}, 5, 5, s22, {0, 1, 2, 0}},               // ... 5x5 stride 2
      {{2, 16, 9, 7}, 3, 3, s12, {2, 0, 0, 2}, {1, 1}, false}, // ... the other way
      {{1, 16, 12, 33}, 3, 3, s11, {}, {2, 2}},                // dilation 2
      {{1, 16, 13, 70}, 3, 3, s22, {}, {2, 2}},                // dilation 2, stride 2
      {{1, 16, 9, 161}, 3, 3, s12, {}, {1, 3}},                // horizontal dilation 3
      {{1, 48, 7, 161}, 1, 1},                                 // 1x1
      {{2, 16, 5, 70}, 1, 1, s22, {}, {1, 1}, false},          // 1x1 stride 2
      {{1, 16, 15, 33}, 7, 7},                                 // 7x7
      {{1, 3, 14, 161}, 7, 7, s22},                            // 7x7 stride 2
      {{1, 16, 12, 70}, 3, 5, s12, {1, 2, 1, 2}},              // 3x5
      {{1, 3, 20, 40}, 16, 16, s11, {7, 7, 8, 8}},             // 16x16
      {{1, 16, 1, 1}, 3, 3},                                   // a 1x1 image
      {{1, 16, 1, 1}, 3, 3, s22},                              // ... stride 2
      {{2, 3, 2, 3}, 5, 5},                                    // 2x3 image, 5x5 kernel
      {{1, 1, 2, 3}, 3, 3, s12},                               // 2x3, one channel
      {{1, 1, 20, 33}, 3, 3},                                  // one channel (group 1)
      {{1, 48, 3, 520}, 3, 3, s22},                            // wide rows, few of them
      {{1, 16, 5, 64}, 3, 3},                                  // one block of 64 exactly
      {{1, 3, 5, 65}, 3, 3},                                   // ... and one more
      {{1, 16, 6, 64}, 3, 3, s22},                             // stride 2: 63 positions
      {{1, 16, 6, 66}, 3, 3, s22},                             // ... 65 positions
  };
  for (const Case& c : cases) {
    TestGraph t;
    t.finish({depthwise(t, t.input(c.x), c)});
    expect_matches_ref(t, name(c));
  }
}

TEST(NativeDepthwise, FoldsAffineAndRunsTail) {
  const Case c{{2, 16, 11, 37}, 3, 3, {1, 1}, {}, {1, 1}, false};
  const int64_t ch = c.x[1];
  {
    TestGraph t;
    t.finish({hard_swish(t, batch_norm(t, depthwise(t, t.input(c.x), c), ch))});
    expect_matches_ref(t, "Conv+BatchNormalization+HardSwish");
  }
  {
    TestGraph t;
    const Case s2{{1, 48, 12, 70}, 5, 5, {2, 2}, {}, {1, 1}, false};
    t.finish({hard_swish(t, batch_norm(t, depthwise(t, t.input(s2.x), s2), 48))});
    expect_matches_ref(t, "Conv 5x5 stride 2+BatchNormalization+HardSwish");
  }
  {
    TestGraph t;
    int y = t.op("Mul", {depthwise(t, t.input(c.x), c), t.constant({ch, 1, 1})});
    y = t.op("Add", {y, t.constant({ch, 1, 1})});
    t.finish({t.op("Relu", {y})});
    expect_matches_ref(t, "Conv+Mul+Add (per channel)+Relu");
  }
  {  // the Clip inside the HardSwish is an output too
    TestGraph t;
    int clip = -1;
    const int y = hard_swish(t, batch_norm(t, depthwise(t, t.input(c.x), c), ch), &clip);
    t.finish({y, clip});
    expect_matches_ref(t, "Conv+BatchNormalization+HardSwish, Clip exported");
  }
  {  // the folded value is an output, the tail reads it and another input
    TestGraph t;
    const Case d{{1, 16, 9, 33}, 3, 3, {1, 2}};
    const int bn = batch_norm(t, depthwise(t, t.input(d.x), d), 16);
    const int z = t.op("Relu", {t.op("Add", {bn, t.input({1, 16, 9, 17})})});
    t.finish({z, bn});
    expect_matches_ref(t, "Conv+BatchNormalization exported, Add(input)+Relu");
  }
  {  // the Conv's own output leaves the group: nothing folds, the tail reads it
    TestGraph t;
    const int y = depthwise(t, t.input(c.x), c);
    t.finish({t.op("Relu", {t.op("Add", {y, t.constant({1, ch, 1, 1})})}), y});
    expect_matches_ref(t, "Conv exported, Add+Relu tail");
  }
}

// PP-OCR det's depthwise convolutions (every other one with BatchNormalization + HardSwish), at
// the backend's own ISA and 2 threads.
TEST(NativeDepthwise, DetectionModelShapes) {
  const std::vector<Case> cases = {
      {{1, 16, 320, 320}, 3, 3},         {{1, 32, 320, 320}, 3, 3, {2, 2}},
      {{1, 48, 160, 160}, 3, 3},         {{1, 96, 80, 80}, 3, 3, {2, 2}},
      {{1, 192, 40, 40}, 5, 5},          {{1, 192, 40, 40}, 5, 5, {2, 2}},
      {{1, 384, 20, 20}, 5, 5},
  };
  const native::IsaKernels& best = native::isa_kernels(native::best_isa());
  for (size_t i = 0; i < cases.size(); ++i) {
    Case c = cases[i];
    const bool tail = i % 2 == 1;
    c.bias = !tail;
    TestGraph t;
    int y = depthwise(t, t.input(c.x), c);
    if (tail) y = hard_swish(t, batch_norm(t, y, c.x[1]));
    t.finish({y});
    expect_matches_ref(t, name(c) + (tail ? " +BatchNormalization+HardSwish" : ""), {&best}, {2});
  }
}

TEST(NativeDepthwise, RejectsWhatItDoesNotRun) {
  const std::vector<std::pair<Case, bool>> cases = {
      {{{1, 8, 10, 20}, 3, 3, {1, 2}}, true},  // the control: a depthwise Conv it runs
      {{{1, 8, 10, 20}, 3, 3, {1, 1}, {}, {1, 1}, true, 2}, false},  // channel multiplier 2
      {{{1, 8, 10, 20}, 3, 3, {1, 3}}, false},                       // horizontal stride 3
      {{{1, 8, 10, 20}, 5, 5, {2, 3}}, false},                       // ... with vertical 2
  };
  for (const auto& [c, runs] : cases) {
    TestGraph t;
    t.finish({depthwise(t, t.input(c.x), c)});
    const SubGraph sg(t.g, NodeSet::all(t.g.num_nodes()));
    for (const native::IsaKernels* isa : isas()) {
      const auto kernel = native::compile_native(sg, *isa);
      EXPECT_EQ(kernel.ok(), runs) << name(c) << " on " << native::isa_name(isa->isa)
                                   << (kernel.ok() ? "" : ": " + kernel.status().to_string());
    }
  }
}

}  // namespace
}  // namespace tessera
