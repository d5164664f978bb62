// The blas backend (OpenBLAS) against the reference kernels: MatMul batching and broadcasting,
// Gemm transposes / alpha / beta / C broadcasting, Conv with groups, pads, strides, dilations
// and 1-3 spatial dims, on seeded random data at 1 and 2 threads.
#include <gtest/gtest.h>

#include "backends/backend.h"
#include "backends/harness.h"
#include "backends/test_graph.h"

namespace tessera {
namespace {

using testing_graph::Dims;
using testing_graph::TestGraph;

const Backend* blas() { return find_backend("blas"); }

void expect_matches_ref(const TestGraph& t, double tol, const std::string& what) {
  std::vector<Tensor> want = testing_graph::run_ref(t);
  for (int threads : {1, 2}) {
    std::vector<Tensor> got = testing_graph::run_on(t, *blas(), threads);
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t o = 0; o < got.size(); ++o) {
      EXPECT_LE(harness::relative_error(got[o], want[o]), tol)
          << what << " with " << threads << " thread(s)";
    }
  }
}

#define REQUIRE_BLAS() \
  if (!blas()) GTEST_SKIP() << "built without the blas backend"

TEST(BlasBackend, MatMulBatchesAndBroadcasts) {
  REQUIRE_BLAS();
  const std::vector<std::pair<Dims, Dims>> shapes = {
      {{37, 300}, {300, 71}}, {{2, 1, 5, 7}, {3, 7, 4}}, {{7}, {7, 40}},
      {{3, 5, 7}, {7}},       {{4, 33, 65}, {65, 33}},   {{2, 3, 29, 31}, {2, 3, 31, 30}},
      {{1, 9}, {5, 9, 2}},
  };
  for (const auto& [a, b] : shapes) {
    for (bool constant_b : {false, true}) {
      TestGraph t;
      int w = constant_b ? t.constant(b) : t.input(b);
      int y = t.op("MatMul", {t.input(a), w});
      t.finish({y});
      expect_matches_ref(t, 2e-6, "MatMul " + dims_to_string(a) + " x " + dims_to_string(b));
    }
  }
}

TEST(BlasBackend, GemmTransposesAlphaBetaAndC) {
  REQUIRE_BLAS();
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (const Dims& c : {Dims{}, Dims{45}, Dims{30, 1}, Dims{30, 45}, Dims{1, 45}}) {
        TestGraph t;
        const int64_t m = 30, k = 77, n = 45;
        std::vector<int> in = {t.input(ta ? Dims{k, m} : Dims{m, k}),
                               t.constant(tb ? Dims{n, k} : Dims{k, n})};
        if (!c.empty()) in.push_back(t.input(c));
        int y = t.op("Gemm", in,
                     {{"transA", Attribute::of_int(ta)},
                      {"transB", Attribute::of_int(tb)},
                      {"alpha", Attribute::of_float(0.75f)},
                      {"beta", Attribute::of_float(-1.25f)}});
        t.finish({y});
        expect_matches_ref(
            t, 2e-6,
            "Gemm tA" + std::to_string(ta) + " tB" + std::to_string(tb) + " C" + dims_to_string(c));
      }
}

TEST(BlasBackend, ConvGeometries) {
  REQUIRE_BLAS();
  struct Case {
    Dims x, w;
    std::map<std::string, Attribute> attrs;
    bool bias;
  };
  const std::vector<Case> cases = {
      {{2, 8, 13, 11},
       {12, 2, 3, 3},
       {{"group", Attribute::of_int(4)},
        {"strides", Attribute::of_ints({2, 2})},
        {"pads", Attribute::of_ints({1, 1, 1, 1})}},
       true},
      {{1, 16, 20, 20}, {24, 16, 1, 1}, {}, true},  // 1x1: no im2col
      {{1, 6, 15, 17},
       {6, 1, 3, 3},
       {{"group", Attribute::of_int(6)}, {"pads", Attribute::of_ints({1, 1, 1, 1})}},
       false},
      {{1, 4, 19, 21},
       {5, 4, 3, 3},
       {{"dilations", Attribute::of_ints({2, 3})}, {"pads", Attribute::of_ints({2, 1, 0, 3})}},
       true},
      {{2, 3, 16, 16},
       {8, 3, 5, 5},
       {{"auto_pad", Attribute::of_string("SAME_UPPER")}, {"strides", Attribute::of_ints({2, 2})}},
       false},
      {{3, 5, 40},
       {7, 5, 4},
       {{"strides", Attribute::of_ints({3})}, {"pads", Attribute::of_ints({2, 1})}},
       true},  // 1-D
      {{1, 2, 5, 6, 7},
       {3, 2, 2, 3, 2},
       {{"pads", Attribute::of_ints({1, 0, 1, 0, 1, 1})}},
       true},  // 3-D
      {{1, 8, 9, 9},
       {8, 8, 1, 1},
       {{"strides", Attribute::of_ints({2, 2})}},
       false},  // strided 1x1 needs im2col
  };
  for (const Case& c : cases) {
    TestGraph t;
    std::vector<int> in = {t.input(c.x), t.constant(c.w)};
    if (c.bias) in.push_back(t.constant({c.w[0]}));
    int y = t.op("Conv", in, c.attrs);
    t.finish({y});
    expect_matches_ref(t, 2e-6, "Conv x" + dims_to_string(c.x) + " w" + dims_to_string(c.w));
  }
}

TEST(BlasBackend, SupportsOnlyWhatItRuns) {
  REQUIRE_BLAS();
  TestGraph t;
  int x = t.input({2, 3});
  int y = t.op("Relu", {x});
  Tensor ints(DType::kInt32, {3, 4});
  int z =
      t.op("MatMul", {t.g.add_input("i", TensorType::of(DType::kInt32, {2, 3})), t.constant(ints)});
  t.inputs.push_back(Tensor(DType::kInt32, {2, 3}));
  t.finish({y, z});
  for (int n = 0; n < t.g.num_nodes(); ++n) {
    Status st = blas()->supports(t.g, n);
    EXPECT_FALSE(st.ok()) << t.g.node(n).op_type;
    EXPECT_FALSE(st.message().empty());
  }
  EXPECT_NE(blas()->version().find("OpenBLAS"), std::string::npos);
  EXPECT_EQ(blas()->fusion_style(), FusionStyle::kNone);
}

}  // namespace
}  // namespace tessera
