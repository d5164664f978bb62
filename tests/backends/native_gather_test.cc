// The native backend's data-movement kernels against the reference kernels: nearest Resize by
// integer factors (every coordinate / nearest mode the kernel takes, and the ones it refuses),
// Concat on every axis and non-float dtypes, GlobalAveragePool of 3-D to 5-D inputs, MaxPool and
// AveragePool over every window geometry ONNX has, and the fused group of a Concat fed by nearest
// Resizes (compiled, and as `--backend native` places it).
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>

#include "backends/backend.h"
#include "backends/harness.h"
#include "backends/native/isa.h"
#include "backends/native/native_compile.h"
#include "backends/native_kernel_runner.h"
#include "backends/test_graph.h"
#include "runtime/buffer_pool.h"
#include "runtime/placement.h"

namespace tessera {
namespace {

using testing_graph::Dims;
using testing_graph::run_ref;
using testing_graph::TestGraph;
using testing_native::isas;
using testing_native::run_native;
using testing_native::whole;

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.dims() == b.dims() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

// Every ISA at 1 and 2 threads: the reference's bytes (tol < 0), or within tol
// (max|a-b| / max|b|).
void expect_matches_ref(const TestGraph& t, double tol, const std::string& what) {
  ASSERT_TRUE(native::native_accepts(whole(t)).ok())
      << what << ": " << native::native_accepts(whole(t)).to_string();
  std::vector<Tensor> want = run_ref(t);
  for (const native::IsaKernels* isa : isas()) {
    for (int threads : {1, 2}) {
      std::vector<Tensor> got = run_native(t, *isa, threads);
      ASSERT_EQ(got.size(), want.size()) << what;
      for (size_t o = 0; o < got.size(); ++o) {
        const std::string where = what + " output " + std::to_string(o) + " on " +
                                  native::isa_name(isa->isa) + " x" + std::to_string(threads);
        if (tol < 0) {
          EXPECT_TRUE(same_bytes(got[o], want[o])) << where;
        } else {
          EXPECT_LE(harness::relative_error(got[o], want[o]), tol) << where;
        }
      }
    }
  }
}

std::map<std::string, Attribute> resize_attrs(const std::string& mode, const std::string& coord,
                                              const std::string& nearest) {
  return {{"mode", Attribute::of_string(mode)},
          {"coordinate_transformation_mode", Attribute::of_string(coord)},
          {"nearest_mode", Attribute::of_string(nearest)}};
}

// Resize(x) by scales {1, 1, sh, sw} (or sizes, when by_sizes) in the given modes.
int resize(TestGraph& t, int x, const Dims& xd, float sh, float sw, const std::string& coord,
           const std::string& nearest, bool by_sizes = false, const std::string& mode = "nearest") {
  const int roi = t.constant(Tensor(DType::kFloat32, {0}));
  if (by_sizes) {
    const int none = t.constant(Tensor(DType::kFloat32, {0}));
    const int sizes =
        t.ints({xd[0], xd[1], static_cast<int64_t>(xd[2] * sh), static_cast<int64_t>(xd[3] * sw)});
    return t.op("Resize", {x, roi, none, sizes}, resize_attrs(mode, coord, nearest));
  }
  const int scales = t.constant(Tensor::from_vector<float>({4}, {1.f, 1.f, sh, sw}));
  return t.op("Resize", {x, roi, scales}, resize_attrs(mode, coord, nearest));
}

// A one-Resize graph; its node's status on native (supports()).
TestGraph resize_graph(const Dims& xd, float sh, float sw, const std::string& coord,
                       const std::string& nearest, bool by_sizes = false,
                       const std::string& mode = "nearest", int opset = 17) {
  TestGraph t;
  t.opset = opset;
  const int x = t.input(xd);
  t.finish({resize(t, x, xd, sh, sw, coord, nearest, by_sizes, mode)});
  return t;
}

Status native_status(const TestGraph& t) {
  for (int n = 0; n < t.g.num_nodes(); ++n)
    TESSERA_RETURN_IF_ERROR(native::native_supports(t.g, n));
  return native::native_accepts(whole(t));
}

// ---------------------------------------------------------------------------------------------
// Resize

TEST(NativeResize, IntegerFactorsShapesAndImages) {
  struct Case {
    Dims x;
    float sh, sw;
  };
  const Case cases[] = {
      {{1, 3, 5, 7}, 1, 1},    {{1, 4, 5, 7}, 2, 2},    {{2, 3, 7, 5}, 3, 3},
      {{1, 2, 9, 11}, 4, 4},   {{1, 24, 20, 20}, 8, 8}, {{3, 5, 6, 9}, 2, 3},
      {{1, 6, 13, 3}, 3, 1},   {{2, 2, 1, 1}, 4, 8},    {{1, 1, 17, 33}, 1, 4},
      {{1, 96, 40, 40}, 2, 2}, {{2, 3, 5, 6}, 8, 5},
  };
  for (const Case& c : cases) {
    for (bool by_sizes : {false, true}) {
      TestGraph t = resize_graph(c.x, c.sh, c.sw, "asymmetric", "floor", by_sizes);
      expect_matches_ref(t, -1,
                         "Resize x" + dims_to_string(c.x) + " by " + std::to_string(c.sh) + " x " +
                             std::to_string(c.sw) + (by_sizes ? " (sizes)" : ""));
    }
  }
}

TEST(NativeResize, CoordinateModesThatRepeatPixels) {
  // Each of these picks input pixel floor(o / k) for every factor.
  const std::pair<const char*, const char*> modes[] = {
      {"asymmetric", "floor"},
      {"half_pixel", "round_prefer_floor"},
      {"half_pixel", "round_prefer_ceil"},
      {"pytorch_half_pixel", "round_prefer_floor"},
      {"pytorch_half_pixel", "round_prefer_ceil"},
      {"tf_half_pixel_for_nn", "floor"},
  };
  for (auto [coord, nearest] : modes) {
    for (float k : {1.f, 2.f, 3.f, 4.f, 8.f}) {
      TestGraph t = resize_graph({2, 3, 5, 7}, k, k == 1 ? 2.f : k, coord, nearest);
      expect_matches_ref(t, -1, std::string(coord) + " / " + nearest + " by " + std::to_string(k));
    }
  }
  // Opset 10 (scales as input 1, asymmetric with truncation) and 13.
  for (int opset : {10, 13}) {
    TestGraph t;
    t.opset = opset;
    const int x = t.input({1, 3, 6, 5});
    const int scales = t.constant(Tensor::from_vector<float>({4}, {1, 1, 2, 4}));
    std::vector<int> in = {x, scales};
    if (opset >= 11) in = {x, t.constant(Tensor(DType::kFloat32, {0})), scales};
    t.finish({t.op("Resize", in, {{"mode", Attribute::of_string("nearest")}})});
    if (opset == 10) {
      expect_matches_ref(t, -1, "opset 10");
    } else {
      // Opset 13's defaults: half_pixel / round_prefer_floor.
      expect_matches_ref(t, -1, "opset 13 defaults");
    }
  }
}

// Every mode combination and factor: native either refuses it or gives the reference's bytes.
TEST(NativeResize, TakenOnlyWhereTheReferenceRepeatsPixels) {
  const char* coords[] = {"half_pixel", "pytorch_half_pixel", "asymmetric", "tf_half_pixel_for_nn",
                          "align_corners"};
  const char* nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  int taken = 0, refused = 0;
  for (const char* coord : coords) {
    for (const char* nearest : nearests) {
      for (float k : {1.f, 2.f, 3.f, 4.f}) {
        TestGraph t = resize_graph({1, 2, 5, 6}, k, k, coord, nearest);
        const Status st = native_status(t);
        if (!st.ok()) {
          EXPECT_EQ(st.code(), StatusCode::kUnimplemented) << st.to_string();
          ++refused;
          continue;
        }
        ++taken;
        expect_matches_ref(t, -1,
                           std::string(coord) + " / " + nearest + " by " + std::to_string(k));
      }
    }
  }
  EXPECT_GT(taken, 20);
  EXPECT_GT(refused, 10);
}

TEST(NativeResize, RefusesWhatItDoesNotRunWithAReason) {
  auto expect_refused = [](const TestGraph& t, const std::string& words) {
    const Status st = native_status(t);
    ASSERT_FALSE(st.ok()) << words;
    EXPECT_EQ(st.code(), StatusCode::kUnimplemented) << st.to_string();
    EXPECT_NE(st.message().find(words), std::string::npos) << st.message();
  };
  expect_refused(resize_graph({1, 2, 5, 6}, 2, 2, "align_corners", "round_prefer_floor"),
                 "align_corners");
  expect_refused(resize_graph({1, 2, 4, 6}, 1.5f, 1.5f, "asymmetric", "floor"),
                 "non-integer factor");
  expect_refused(
      resize_graph({1, 2, 4, 6}, 2, 2, "half_pixel", "round_prefer_floor", false, "linear"),
      "mode 'linear'");
  expect_refused(
      resize_graph({1, 2, 4, 6}, 2, 2, "half_pixel", "round_prefer_floor", false, "cubic"),
      "mode 'cubic'");
  expect_refused(resize_graph({1, 2, 8, 8}, 0.5f, 0.5f, "asymmetric", "floor"),
                 "non-integer factor");
  // half_pixel with floor picks the pixel to the left of o / k for o % k == 0.
  expect_refused(resize_graph({1, 2, 5, 6}, 2, 2, "half_pixel", "floor"), "does not repeat");
  expect_refused(resize_graph({1, 2, 5, 6}, 2, 2, "asymmetric", "ceil"), "does not repeat");
  {
    // A scale whose floor(in * scale) is a multiple of in without being the factor.
    TestGraph t = resize_graph({1, 2, 10, 10}, 2.05f, 2.f, "asymmetric", "floor");
    expect_refused(t, "not the integer factor");
  }
  {
    // N or C resized.
    TestGraph t;
    const int x = t.input({1, 2, 4, 4});
    const int scales = t.constant(Tensor::from_vector<float>({4}, {1, 2, 2, 2}));
    t.finish({t.op("Resize", {x, t.constant(Tensor(DType::kFloat32, {0})), scales},
                   resize_attrs("nearest", "asymmetric", "floor"))});
    expect_refused(t, "N or C");
  }
  {
    // Scales computed at run time.
    TestGraph t;
    const int x = t.input({1, 2, 4, 4});
    const int scales = t.input({4});
    t.finish({t.op("Resize", {x, t.constant(Tensor(DType::kFloat32, {0})), scales},
                   resize_attrs("nearest", "asymmetric", "floor"))});
    const Status st = native::native_supports(t.g, 0);
    EXPECT_EQ(st.code(), StatusCode::kUnimplemented) << st.to_string();
  }
  {
    // 3-D input (a 1-D resize).
    TestGraph t;
    const int x = t.input({1, 2, 4});
    const int scales = t.constant(Tensor::from_vector<float>({3}, {1, 1, 2}));
    t.finish({t.op("Resize", {x, t.constant(Tensor(DType::kFloat32, {0})), scales},
                   resize_attrs("nearest", "asymmetric", "floor"))});
    expect_refused(t, "4-D");
  }
}

// ---------------------------------------------------------------------------------------------
// Concat

TEST(NativeConcat, EveryAxisAndNegativeAxes) {
  const Dims base = {2, 3, 4, 5};
  for (int64_t axis : {0, 1, 2, 3, -1, -2, -3, -4}) {
    const int a = static_cast<int>(axis < 0 ? axis + 4 : axis);
    TestGraph t;
    std::vector<int> in;
    for (int64_t extent : {1, 3, 2}) {
      Dims d = base;
      d[a] = extent;
      in.push_back(t.input(d));
    }
    Dims cd = base;
    cd[a] = 2;
    in.push_back(t.constant(cd));  // a constant part
    t.finish({t.op("Concat", in, {{"axis", Attribute::of_int(axis)}})});
    expect_matches_ref(t, -1, "Concat axis " + std::to_string(axis));
  }
  // 1-D and 2-D, one input, an input repeated.
  {
    TestGraph t;
    const int x = t.input({7}), y = t.input({9});
    t.finish({t.op("Concat", {x, y, x}, {{"axis", Attribute::of_int(0)}})});
    expect_matches_ref(t, -1, "Concat 1-D");
  }
  {
    TestGraph t;
    const int x = t.input({3, 5});
    t.finish({t.op("Concat", {x}, {{"axis", Attribute::of_int(-1)}})});
    expect_matches_ref(t, -1, "Concat of one");
  }
}

TEST(NativeConcat, LargeTensorsSplitAcrossThreads) {
  // The det model's neck (four 1 x 24 x 160 x 160 along C), and rows that straddle copy chunks.
  TestGraph t;
  std::vector<int> in;
  for (int i = 0; i < 4; ++i) in.push_back(t.input({1, 24, 160, 160}));
  t.finish({t.op("Concat", in, {{"axis", Attribute::of_int(1)}})});
  expect_matches_ref(t, -1, "Concat det neck");
  TestGraph u;
  const int a = u.input({3, 7, 1001}), b = u.input({3, 7, 333});
  u.finish({u.op("Concat", {a, b}, {{"axis", Attribute::of_int(2)}})});
  expect_matches_ref(u, -1, "Concat rows across chunks");
}

TEST(NativeConcat, IntegerAndByteDtypes) {
  for (DType dtype : {DType::kInt64, DType::kUint8, DType::kInt32, DType::kFloat16}) {
    TestGraph t;
    std::mt19937 rng(7);
    std::vector<int> in;
    const Dims dims[] = {{2, 3, 5}, {2, 4, 5}, {2, 1, 5}};
    for (const Dims& d : dims) {
      in.push_back(t.g.add_input(t.name('x'), TensorType::of(dtype, d)));
      Tensor v(dtype, d);
      auto* bytes = static_cast<uint8_t*>(v.raw_data());
      for (size_t i = 0; i < v.nbytes(); ++i) bytes[i] = static_cast<uint8_t>(rng());
      if (dtype == DType::kFloat16)  // keep halves finite (no NaN payloads to compare)
        for (size_t i = 1; i < v.nbytes(); i += 2) bytes[i] &= 0x3f;
      t.inputs.push_back(std::move(v));
    }
    t.finish({t.op("Concat", in, {{"axis", Attribute::of_int(1)}})});
    expect_matches_ref(t, -1, std::string("Concat ") + dtype_name(dtype));
  }
}

TEST(NativeConcat, RefusesStringsAndDynamicShapes) {
  TestGraph t;
  const int a = t.g.add_input("s0", TensorType::of(DType::kString, {2}));
  const int b = t.g.add_input("s1", TensorType::of(DType::kString, {3}));
  const int y = t.g.add_value("y");
  t.g.add_node("Concat", {a, b}, {y}, {{"axis", Attribute::of_int(0)}});
  t.g.node(0).opset = 17;
  ASSERT_TRUE(OpRegistry::global().infer_node(t.g, 0).ok());
  const Status st = native::native_supports(t.g, 0);
  EXPECT_EQ(st.code(), StatusCode::kUnimplemented) << st.to_string();
}

// ---------------------------------------------------------------------------------------------
// GlobalAveragePool

TEST(NativeGlobalAveragePool, ThreeToFiveDims) {
  const Dims shapes[] = {{2, 5, 7},       {1, 8, 7, 9},  {2, 16, 1, 1}, {1, 96, 160, 160},
                         {3, 4, 2, 3, 5}, {1, 1, 33, 1}, {2, 3, 4096}};
  for (const Dims& d : shapes) {
    TestGraph t;
    t.finish({t.op("GlobalAveragePool", {t.input(d)})});
    expect_matches_ref(t, 1e-5, "GlobalAveragePool x" + dims_to_string(d));
  }
}

// Channels-last (4-D): each channel's mean down its column of [H * W, C]; channel counts over one
// block of 64 and off the vector width, one pixel, two images.
TEST(NativeGlobalAveragePool, ChannelsLast) {
  const Dims shapes[] = {{1, 200, 2, 96}, {2, 8, 12, 96}, {1, 131, 5, 3}, {2, 16, 1, 1}, {1, 3, 48, 48}};
  for (const Dims& d : shapes) {
    TestGraph t;
    t.finish({t.op("GlobalAveragePool", {t.input(d)})});
    ASSERT_TRUE(native::native_takes_channels_last(testing_native::whole(t)));
    testing_native::expect_channels_last_matches_ref(t, 1e-5, "GlobalAveragePool x" + dims_to_string(d));
  }
  TestGraph t;  // rank 3 has no channels-last form
  t.finish({t.op("GlobalAveragePool", {t.input({2, 5, 7})})});
  EXPECT_FALSE(native::native_takes_channels_last(testing_native::whole(t)));
}

// ---------------------------------------------------------------------------------------------
// Resize + Concat

TEST(NativeResizeConcat, FusedGroupMatchesReference) {
  // The det neck in small: three upsampled parts and one read as is (last, as in the model).
  {
    TestGraph t;
    const int a = t.input({2, 4, 3, 3}), b = t.input({2, 4, 6, 6}), c = t.input({2, 4, 12, 12});
    const int d = t.input({2, 4, 24, 24});
    const int ra = resize(t, a, {2, 4, 3, 3}, 8, 8, "asymmetric", "floor");
    const int rb = resize(t, b, {2, 4, 6, 6}, 4, 4, "asymmetric", "floor");
    const int rc = resize(t, c, {2, 4, 12, 12}, 2, 2, "asymmetric", "floor");
    t.finish({t.op("Concat", {ra, rb, rc, d}, {{"axis", Attribute::of_int(1)}})});
    expect_matches_ref(t, -1, "det-like neck");
  }
  // The det model's real shapes.
  {
    TestGraph t;
    const int a = t.input({1, 24, 20, 20}), b = t.input({1, 24, 40, 40});
    const int c = t.input({1, 24, 80, 80}), d = t.input({1, 24, 160, 160});
    t.finish({t.op("Concat",
                   {resize(t, a, {1, 24, 20, 20}, 8, 8, "asymmetric", "floor"),
                    resize(t, b, {1, 24, 40, 40}, 4, 4, "asymmetric", "floor"),
                    resize(t, c, {1, 24, 80, 80}, 2, 2, "asymmetric", "floor"), d},
                   {{"axis", Attribute::of_int(1)}})});
    expect_matches_ref(t, -1, "det neck");
  }
  // A direct part first, H != W factors, other modes, sizes, a Resize read twice, axis -3.
  {
    TestGraph t;
    const int d = t.input({1, 2, 12, 10});
    const int a = t.input({1, 3, 4, 5}), b = t.input({1, 1, 3, 2});
    const int ra = resize(t, a, {1, 3, 4, 5}, 3, 2, "half_pixel", "round_prefer_ceil");
    const int rb = resize(t, b, {1, 1, 3, 2}, 4, 5, "tf_half_pixel_for_nn", "floor", true);
    t.finish({t.op("Concat", {d, ra, rb, ra}, {{"axis", Attribute::of_int(-3)}})});
    expect_matches_ref(t, -1, "mixed parts");
  }
}

TEST(NativeResizeConcat, GroupRules) {
  auto group_status = [](const TestGraph& t, std::vector<int> nodes) {
    NodeSet s(t.g.num_nodes());
    for (int n : nodes) s.add(n);
    return native::native_accepts(SubGraph(t.g, s));
  };
  auto node_of = [](const TestGraph& t, int value) { return t.g.value(value).producer; };
  {
    // A Resize whose output is also a graph output cannot hide inside the group.
    TestGraph t;
    const int a = t.input({1, 2, 3, 3}), b = t.input({1, 2, 6, 6});
    const int r = resize(t, a, {1, 2, 3, 3}, 2, 2, "asymmetric", "floor");
    const int cat = t.op("Concat", {r, b}, {{"axis", Attribute::of_int(1)}});
    t.finish({cat, r});
    EXPECT_FALSE(group_status(t, {node_of(t, r), node_of(t, cat)}).ok());
  }
  {
    // Concat on another axis; a linear Resize; an Add in the group; GAP in the group.
    TestGraph t;
    const int a = t.input({1, 2, 3, 3}), b = t.input({1, 2, 6, 6});
    const int r = resize(t, a, {1, 2, 3, 3}, 2, 2, "asymmetric", "floor");
    const int cat = t.op("Concat", {r, b}, {{"axis", Attribute::of_int(2)}});
    const int lin =
        resize(t, a, {1, 2, 3, 3}, 2, 2, "half_pixel", "round_prefer_floor", false, "linear");
    const int cat2 = t.op("Concat", {lin, b}, {{"axis", Attribute::of_int(1)}});
    const int r3 = resize(t, a, {1, 2, 3, 3}, 2, 2, "asymmetric", "floor");
    const int add = t.op("Add", {r3, b});
    const int gap = t.op("GlobalAveragePool", {b});
    t.finish({cat, cat2, add, gap});
    EXPECT_FALSE(group_status(t, {node_of(t, r), node_of(t, cat)}).ok());
    EXPECT_FALSE(group_status(t, {node_of(t, lin), node_of(t, cat2)}).ok());
    EXPECT_FALSE(group_status(t, {node_of(t, r3), node_of(t, add)}).ok());
    EXPECT_FALSE(group_status(t, {node_of(t, gap), node_of(t, add)}).ok());
    EXPECT_TRUE(native::native_supports(t.g, node_of(t, r)).ok());
    EXPECT_TRUE(native::native_supports(t.g, node_of(t, cat)).ok());
  }
}

TEST(NativeResizeConcat, PlacementFusesTheNeck) {
  // As in the det model: each Resize reads an Add (an elementwise group) and the Concat reads
  // three Resizes and an Add; `--backend native` must end with one Resize x3 + Concat kernel.
  TestGraph t;
  const Dims sizes[] = {{1, 4, 3, 3}, {1, 4, 6, 6}, {1, 4, 12, 12}, {1, 4, 24, 24}};
  std::vector<int> parts;
  const float factors[] = {8, 4, 2};
  for (int i = 0; i < 4; ++i) {
    const int sum = t.op("Add", {t.input(sizes[i]), t.input(sizes[i])});
    parts.push_back(i < 3 ? resize(t, sum, sizes[i], factors[i], factors[i], "asymmetric", "floor")
                          : sum);
  }
  const int cat = t.op("Concat", parts, {{"axis", Attribute::of_int(1)}});
  t.finish({t.op("Relu", {cat})});
  const Backend* native = find_backend("native");
  ASSERT_NE(native, nullptr);
  auto placed = place_on_backend(t.g, *native);
  ASSERT_TRUE(placed.ok()) << placed.status().to_string();
  bool fused = false;
  for (const Partition& p : *placed) {
    const std::string label = SubGraph(t.g, p.nodes).label();
    if (label.find("Concat") != std::string::npos) {
      EXPECT_EQ(p.nodes.count(), 4) << label;
      fused = p.nodes.count() == 4;
    }
  }
  EXPECT_TRUE(fused);
  // And the placed graph runs like the reference.
  std::vector<Tensor> want = run_ref(t);
  CompileOptions opts;
  opts.threads = 2;
  auto exec = GraphExecutor::create(t.g, *placed, opts);
  ASSERT_TRUE(exec.ok()) << exec.status().to_string();
  BufferPool buffers;
  ThreadPool pool(2);
  RunStats stats;
  auto out = exec->run(t.inputs, {}, buffers, &pool, stats);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  ASSERT_EQ(out->size(), want.size());
  EXPECT_TRUE(same_bytes((*out)[0], want[0]));
}


// ---------------------------------------------------------------------------------------------
// MaxPool, AveragePool

Attribute ints_attr(std::vector<int64_t> v) { return Attribute::of_ints(std::move(v)); }

TEST(NativePool, EveryWindowGeometryMatchesTheReference) {
  struct Case {
    Dims x;
    std::vector<int64_t> kernel, strides, pads, dilations;
    int ceil_mode;
    std::string auto_pad;
  };
  const Case cases[] = {
      {{1, 3, 11, 13}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 0, ""},
      {{2, 5, 8, 8}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 0, ""},
      {{1, 4, 7, 9}, {3, 2}, {1, 1}, {1, 0, 1, 1}, {1, 1}, 0, ""},          // non-square, uneven pads
      {{1, 6, 9, 10}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1, ""},         // ceil_mode: a clipped last window
      {{1, 4, 12, 11}, {2, 3}, {3, 2}, {0, 1, 1, 0}, {1, 1}, 1, ""},
      {{1, 3, 13, 12}, {3, 3}, {1, 2}, {2, 1, 2, 1}, {2, 2}, 0, ""},         // dilated
      {{1, 8, 10, 15}, {3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 0, "SAME_UPPER"},
      {{1, 8, 10, 15}, {4, 2}, {3, 1}, {0, 0, 0, 0}, {1, 1}, 0, "SAME_LOWER"},
      {{1, 480, 3, 80}, {3, 2}, {3, 2}, {0, 0, 0, 0}, {1, 1}, 0, ""},       // rec's AveragePool
      {{1, 64, 160, 160}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 0, ""},     // det's stem pool
      {{2, 3, 1, 40}, {1, 3}, {1, 1}, {0, 1, 0, 1}, {1, 1}, 0, ""},
  };
  for (const Case& c : cases) {
    for (const char* op : {"MaxPool", "AveragePool"}) {
      for (int include_pad : {0, 1}) {
        if (std::string(op) == "MaxPool" && include_pad) continue;
        if (std::string(op) == "AveragePool" && c.dilations != std::vector<int64_t>{1, 1}) continue;
        TestGraph t;
        t.opset = 19;  // AveragePool takes dilations from 19 on
        std::map<std::string, Attribute> attrs = {{"kernel_shape", ints_attr(c.kernel)},
                                                  {"strides", ints_attr(c.strides)},
                                                  {"ceil_mode", Attribute::of_int(c.ceil_mode)}};
        if (c.auto_pad.empty()) attrs["pads"] = ints_attr(c.pads);
        else attrs["auto_pad"] = Attribute::of_string(c.auto_pad);
        if (c.dilations != std::vector<int64_t>{1, 1}) attrs["dilations"] = ints_attr(c.dilations);
        if (std::string(op) == "AveragePool") attrs["count_include_pad"] = Attribute::of_int(include_pad);
        t.finish({t.op(op, {t.input(c.x)}, attrs)});
        const std::string what = std::string(op) + " x" + dims_to_string(c.x) + " k" + dims_to_string(c.kernel) +
                                 " s" + dims_to_string(c.strides) + " ceil " + std::to_string(c.ceil_mode) +
                                 " include_pad " + std::to_string(include_pad) + " " + c.auto_pad;
        // Max takes the reference's bytes; an average sums in float (the reference in double).
        expect_matches_ref(t, std::string(op) == "MaxPool" ? -1 : 1e-6, what);
      }
    }
  }
}

TEST(NativePool, RefusesIndicesThatAreReadAndOtherRanks) {
  {
    TestGraph t;
    const std::vector<int> out = t.node("MaxPool", {t.input({1, 2, 6, 6})}, {{"kernel_shape", ints_attr({2, 2})}}, 2);
    t.finish({out[0], out[1]});
    EXPECT_EQ(native::native_supports(t.g, 0).code(), StatusCode::kUnimplemented);
  }
  {
    TestGraph t;
    t.finish({t.op("MaxPool", {t.input({1, 2, 9})}, {{"kernel_shape", ints_attr({3})}})});
    EXPECT_EQ(native::native_supports(t.g, 0).code(), StatusCode::kUnimplemented);
  }
}

}  // namespace
}  // namespace tessera
