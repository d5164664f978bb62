// LayerNormalization spelled out in ReduceMean / Sub / Pow / Add / Sqrt / Div (and an affine
// Mul / Add), as PaddlePaddle and older PyTorch exports write it: the native backend's rules
// propose the whole group, accepts it as one kernel, and that kernel matches the reference
// running the nodes one by one; forms that are not a LayerNormalization are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "backends/backend.h"
#include "backends/native/layer_norm_fusion.h"
#include "backends/native/native_compile.h"
#include "backends/native_kernel_runner.h"
#include "backends/test_graph.h"
#include "partition/rules.h"

namespace tessera {
const Backend& native_backend();

namespace {

using testing_graph::Dims;
using testing_graph::TestGraph;
using testing_native::expect_matches_ref;
using testing_native::whole;

struct Form {
  Dims x;
  int axes = 1;                 // the number of trailing axes normalized
  bool scale = true, bias = true;
  bool constants_first = false;  // Mul(scale, y) and Add(bias, y)
  int opset = 17;                // 18: ReduceMean's axes as an input
  float exponent = 2.f;
  bool keepdims = true;
  int variance_axes = 0;  // > 0: the variance averages over this many trailing axes instead
};

Tensor scalar(float v) { return Tensor::scalar<float>(v); }

// The decomposed LayerNormalization of Form f on random x (values in [-3, 5]: a mean far from 0).
TestGraph decomposed(const Form& f) {
  TestGraph t;
  t.opset = f.opset;
  const int rank = static_cast<int>(f.x.size());
  const int x = t.input(f.x, -3.f, 5.f);
  auto mean = [&](int v, int count) {
    std::vector<int64_t> axes;
    for (int i = 0; i < count; ++i) axes.push_back(i - count);  // negative: -count .. -1
    std::map<std::string, Attribute> attrs;
    if (!f.keepdims) attrs["keepdims"] = Attribute::of_int(0);
    if (f.opset >= 18) {
      Tensor a(DType::kInt64, {static_cast<int64_t>(axes.size())});
      std::copy(axes.begin(), axes.end(), a.data<int64_t>());
      return t.op("ReduceMean", {v, t.constant(std::move(a))}, attrs);
    }
    attrs["axes"] = Attribute::of_ints(axes);
    return t.op("ReduceMean", {v}, attrs);
  };
  const int centred = t.op("Sub", {x, mean(x, f.axes)});
  const int squared = t.op("Pow", {centred, t.constant(scalar(f.exponent))});
  const int variance = mean(squared, f.variance_axes > 0 ? f.variance_axes : f.axes);
  const int deviation = t.op("Sqrt", {t.op("Add", {variance, t.constant(scalar(1e-5f))})});
  int y = t.op("Div", {centred, deviation});
  const Dims norm(f.x.begin() + (rank - f.axes), f.x.end());
  auto affine = [&](const char* op, int v, int c) {
    return f.constants_first ? t.op(op, {c, v}) : t.op(op, {v, c});
  };
  if (f.scale) y = affine("Mul", y, t.constant(norm, 0.5f, 1.5f));
  if (f.bias) y = affine("Add", y, t.constant(norm, -1.f, 1.f));
  t.finish({y});
  return t;
}

std::string describe(const Form& f) {
  std::string s = "x " + dims_to_string(f.x) + ", " + std::to_string(f.axes) + " axes";
  if (!f.scale) s += ", no scale";
  if (!f.bias) s += ", no bias";
  if (f.constants_first) s += ", constants first";
  if (f.opset >= 18) s += ", opset 18";
  return s;
}

TEST(NativeLayerNormFusion, OneKernelMatchesTheNodesOneByOne) {
  const std::vector<Form> forms = {
      {{1, 40, 120}},                       // PP-OCR rec's SVTR blocks
      {{2, 5, 24}},
      {{3, 4, 6, 10}, 2},                   // two normalized axes
      {{7, 33}, 1, false, false},           // no affine tail
      {{6, 17}, 1, true, false, true},      // scale only, Mul(scale, y)
      {{2, 9, 40}, 1, true, true, true, 18},  // opset 18, constants first
      {{5, 1000}},                          // long rows: several vectors and a partial one
  };
  for (const Form& f : forms) {
    const TestGraph t = decomposed(f);
    const SubGraph sg = whole(t);
    ASSERT_TRUE(native::native_accepts(sg).ok()) << describe(f) << ": " << native::native_accepts(sg).to_string();
    Result<native::DecomposedLayerNorm> ln = native::match_decomposed_layer_norm(sg);
    ASSERT_TRUE(ln.ok()) << describe(f);
    EXPECT_EQ(ln->axis, static_cast<int>(f.x.size()) - f.axes) << describe(f);
    EXPECT_FLOAT_EQ(ln->epsilon, 1e-5f) << describe(f);
    EXPECT_EQ(ln->scale != kNoValue, f.scale) << describe(f);
    EXPECT_EQ(ln->bias != kNoValue, f.bias) << describe(f);
    expect_matches_ref(t, 2e-6, describe(f));
  }
}

TEST(NativeLayerNormFusion, OtherFormsAreRefused) {
  struct Bad {
    Form f;
    const char* why;
  };
  const std::vector<Bad> bad = {
      {{{2, 5, 24}, 1, true, true, false, 17, 3.f}, "cubed, not squared"},
      // Square, so that the reduced means still broadcast: they do so along the wrong axis.
      {{{5, 5}, 1, false, false, false, 17, 2.f, false}, "keepdims 0"},
      {{{2, 5, 24}, 1, true, true, false, 17, 2.f, true, 2}, "the variance over other axes"},
  };
  for (const Bad& b : bad) {
    const TestGraph t = decomposed(b.f);
    EXPECT_FALSE(native::match_decomposed_layer_norm(whole(t)).ok()) << b.why;
    EXPECT_FALSE(native::native_accepts(whole(t)).ok()) << b.why;
  }
  {  // The mean over a leading axis is not a LayerNormalization over trailing ones.
    TestGraph t;
    const int x = t.input({4, 6}, -3.f, 5.f);
    const int m = t.op("ReduceMean", {x}, {{"axes", Attribute::of_ints({0})}});
    const int c = t.op("Sub", {x, m});
    const int v = t.op("ReduceMean", {t.op("Pow", {c, t.constant(scalar(2.f))})},
                       {{"axes", Attribute::of_ints({0})}});
    const int y = t.op("Div", {c, t.op("Sqrt", {t.op("Add", {v, t.constant(scalar(1e-5f))})})});
    t.finish({y});
    EXPECT_FALSE(native::native_accepts(whole(t)).ok()) << "axis 0";
  }
  {  // The centred value also leaves the group: the kernel has one output.
    Form f{{2, 5, 24}};
    TestGraph t = decomposed(f);
    const int centred = t.g.node(1).outputs[0];
    ASSERT_EQ(t.g.node(1).op_type, "Sub");
    t.g.mark_output(centred);
    EXPECT_FALSE(native::native_accepts(whole(t)).ok()) << "two outputs";
  }
}

// The rules propose the whole group (9 nodes, deeper than the fusion depth limit of 8) and each
// shorter LayerNormalization inside it (without the bias, without the affine tail).
TEST(NativeLayerNormFusion, TheRulesProposeTheWholeGroup) {
  const TestGraph t = decomposed(Form{{2, 5, 24}});
  ASSERT_EQ(t.g.num_nodes(), 9);
  std::vector<int> sizes;
  for (const Candidate& c : rules_for(native_backend())->candidates(t.g, native_backend())) {
    const SubGraph sg(t.g, c.nodes);
    if (native::match_decomposed_layer_norm(sg).ok()) sizes.push_back(sg.size());
  }
  std::sort(sizes.begin(), sizes.end());
  EXPECT_EQ(sizes, (std::vector<int>{7, 8, 9}));
}

}  // namespace
}  // namespace tessera
