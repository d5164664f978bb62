#include "ir/node_flops.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TensorType f32(const std::vector<int64_t>& dims) { return TensorType::of(DType::kFloat32, dims); }

// One node over values of the given types (the types are what the count reads; no inference).
struct OneNode {
  Graph g;
  int node = -1;
  OneNode(const std::string& op, const std::vector<TensorType>& ins, const TensorType& out,
          std::map<std::string, Attribute> attrs = {}) {
    std::vector<int> in_ids;
    for (size_t i = 0; i < ins.size(); ++i) in_ids.push_back(g.add_input("in" + std::to_string(i), ins[i]));
    int y = g.add_value("y", out);
    node = g.add_node(op, in_ids, {y}, std::move(attrs));
    g.mark_output(y);
  }
  double flops() const { return node_flops(g, g.node(node)); }
};

TEST(NodeFlops, GroupedStridedConvCountsEveryTapOfEachOutput) {
  // 4 channels in 2 groups -> 6 outputs channels, 3x3 kernel, stride 2, pad 1: 8x8 -> 4x4.
  // 1*6*4*4 = 96 outputs, each 2 input channels * 9 taps = 18 multiply-adds (padding included).
  OneNode n("Conv", {f32({1, 4, 8, 8}), f32({6, 2, 3, 3}), f32({6})}, f32({1, 6, 4, 4}),
            {{"group", Attribute::of_int(2)}, {"strides", Attribute::of_ints({2, 2})}});
  EXPECT_DOUBLE_EQ(n.flops(), 2.0 * 96 * 18);
}

TEST(NodeFlops, DepthwiseAnd1DConv) {
  // Depthwise: 32 channels, 5x5, 12x80 output: 30720 outputs x 25 taps.
  OneNode dw("Conv", {f32({1, 32, 12, 80}), f32({32, 1, 5, 5})}, f32({1, 32, 12, 80}),
             {{"group", Attribute::of_int(32)}});
  EXPECT_DOUBLE_EQ(dw.flops(), 2.0 * 32 * 12 * 80 * 25);
  // 1-D: batch 2, 3 -> 5 channels, kernel 4, length 10 -> 7: 70 outputs x 12.
  OneNode c1("Conv", {f32({2, 3, 10}), f32({5, 3, 4})}, f32({2, 5, 7}));
  EXPECT_DOUBLE_EQ(c1.flops(), 2.0 * 70 * 12);
}

TEST(NodeFlops, ConvTransposeScattersEachInputElement) {
  // 8 input channels in 2 groups, W 8 x 3 x 2 x 2 (6 output channels), stride 2: 5x5 -> 10x10.
  // Each of the 1*8*5*5 = 200 inputs feeds 3 channels * 4 taps = 12 outputs.
  OneNode n("ConvTranspose", {f32({1, 8, 5, 5}), f32({8, 3, 2, 2})}, f32({1, 6, 10, 10}),
            {{"group", Attribute::of_int(2)}, {"strides", Attribute::of_ints({2, 2})}});
  EXPECT_DOUBLE_EQ(n.flops(), 2.0 * 200 * 12);
}

TEST(NodeFlops, MatMulWithBatchesBroadcastAndVectors) {
  OneNode batched("MatMul", {f32({3, 1, 40, 120}), f32({4, 120, 7})}, f32({3, 4, 40, 7}));
  EXPECT_DOUBLE_EQ(batched.flops(), 2.0 * 3 * 4 * 40 * 7 * 120);
  OneNode vec_mat("MatMul", {f32({120}), f32({120, 9})}, f32({9}));
  EXPECT_DOUBLE_EQ(vec_mat.flops(), 2.0 * 9 * 120);
  OneNode mat_vec("MatMul", {f32({5, 120}), f32({120})}, f32({5}));
  EXPECT_DOUBLE_EQ(mat_vec.flops(), 2.0 * 5 * 120);
}

TEST(NodeFlops, GemmReadsKFromTransA) {
  OneNode plain("Gemm", {f32({6, 11}), f32({11, 13}), f32({13})}, f32({6, 13}));
  EXPECT_DOUBLE_EQ(plain.flops(), 2.0 * 6 * 13 * 11);
  OneNode trans("Gemm", {f32({11, 6}), f32({13, 11})}, f32({6, 13}),
                {{"transA", Attribute::of_int(1)}, {"transB", Attribute::of_int(1)}});
  EXPECT_DOUBLE_EQ(trans.flops(), 2.0 * 6 * 13 * 11);
}

TEST(NodeFlops, OtherOpsAndUnknownShapesCountNothing) {
  OneNode add("Add", {f32({4, 4}), f32({4, 4})}, f32({4, 4}));
  EXPECT_EQ(add.flops(), 0);
  TensorType dynamic;
  dynamic.dtype = DType::kFloat32;
  dynamic.shape = std::vector<Dim>{Dim::symbolic("n"), Dim(120)};
  OneNode mm("MatMul", {dynamic, f32({120, 7})}, f32({3, 7}));
  EXPECT_EQ(mm.flops(), 0);
}

TEST(NodeFlops, SumsOverNodes) {
  Graph g;
  int x = g.add_input("x", f32({2, 8}));
  int w1 = g.add_input("w1", f32({8, 16}));
  int w2 = g.add_input("w2", f32({16, 4}));
  int h = g.add_value("h", f32({2, 16}));
  int r = g.add_value("r", f32({2, 16}));
  int y = g.add_value("y", f32({2, 4}));
  g.add_node("MatMul", {x, w1}, {h});
  g.add_node("Relu", {h}, {r});
  g.add_node("MatMul", {r, w2}, {y});
  g.mark_output(y);
  ASSERT_TRUE(g.finalize().ok());
  std::vector<int> all;
  for (int i = 0; i < g.num_nodes(); ++i) all.push_back(i);
  EXPECT_DOUBLE_EQ(nodes_flops(g, all), 2.0 * (2 * 16 * 8 + 2 * 4 * 16));
}

}  // namespace
}  // namespace tessera
