// The structural hash: equal for the same work, different for different work, and the same in
// every run and build (a pinned value), since the cost database outlives the process.
#include "partition/structural_hash.h"

#include <gtest/gtest.h>

#include "partition/partition_test_util.h"

namespace tessera {
namespace {

using namespace partition_test;

struct ConvOptions {
  std::vector<int64_t> input = {1, 3, 8, 8};
  std::vector<float> weights = std::vector<float>(4 * 3 * 3 * 3, 0.5f);
  float alpha = 0.01f;
  std::vector<int64_t> axes = {2, 3};
  bool extra_node_first = false;  // shifts every node and value index
  DType dtype = DType::kFloat32;
};

// conv -> leaky_relu -> reduce_mean(axes)
Graph conv_graph(const ConvOptions& o) {
  Graph g;
  int x = g.add_input("x", TensorType::of(o.dtype, o.input));
  if (o.extra_node_first) {
    int s = g.add_value("unrelated");
    g.add_node("Sigmoid", {x}, {s}, {}, "unrelated");
    g.mark_output(s);
  }
  Tensor w(o.dtype, {4, 3, 3, 3});
  if (o.dtype == DType::kFloat32)
    for (int i = 0; i < 4 * 27; ++i) w.data<float>()[i] = o.weights[i];
  int wv = g.add_constant("w", w);
  int axes = g.add_constant(
      "axes", Tensor::from_vector<int64_t>({static_cast<int64_t>(o.axes.size())}, o.axes));
  int c = g.add_value("c"), r = g.add_value("r"), y = g.add_value("y");
  g.add_node("Conv", {x, wv}, {c}, {{"pads", Attribute::of_ints({1, 1, 1, 1})}}, "conv");
  g.add_node("LeakyRelu", {c}, {r}, {{"alpha", Attribute::of_float(o.alpha)}}, "relu");
  g.add_node("ReduceMean", {r, axes}, {y}, {{"keepdims", Attribute::of_int(1)}}, "mean");
  g.mark_output(y);
  g.opsets[""] = 18;
  for (int n = 0; n < g.num_nodes(); ++n) g.node(n).opset = 18;
  TESSERA_CHECK(g.finalize().ok());
  TESSERA_CHECK(infer_graph_types(g).ok());
  return g;
}

std::string hash_of(const ConvOptions& o) {
  Graph g = conv_graph(o);
  return structural_hash_hex(SubGraph(g, nodes_named(g, {"conv", "relu", "mean"})));
}

TEST(StructuralHash, SameWorkSameHash) {
  ConvOptions base;
  ConvOptions other_weights;
  other_weights.weights.assign(4 * 27, -1.25f);
  ConvOptions shifted;
  shifted.extra_node_first = true;
  EXPECT_EQ(hash_of(base), hash_of(other_weights));  // weight values do not count
  EXPECT_EQ(hash_of(base), hash_of(shifted));        // nor node and value indices
}

TEST(StructuralHash, DifferentWorkDifferentHash) {
  ConvOptions base;
  ConvOptions shape;
  shape.input = {1, 3, 16, 16};
  ConvOptions attr;
  attr.alpha = 0.2f;
  ConvOptions dtype;
  dtype.dtype = DType::kFloat16;
  ConvOptions axes;
  axes.axes = {1};  // a small integer constant changes what is computed
  EXPECT_NE(hash_of(base), hash_of(shape));
  EXPECT_NE(hash_of(base), hash_of(attr));
  EXPECT_NE(hash_of(base), hash_of(axes));
  EXPECT_NE(hash_of(base), hash_of(dtype));
}

TEST(StructuralHash, BoundaryCounts) {
  Graph g = conv_graph({});
  std::string whole = structural_hash_hex(SubGraph(g, nodes_named(g, {"conv", "relu", "mean"})));
  std::string head = structural_hash_hex(SubGraph(g, nodes_named(g, {"conv", "relu"})));
  EXPECT_NE(whole, head);
  // The same ops with an extra exposed output are another kernel.
  Graph d = diamond();
  Graph e = diamond();
  EXPECT_EQ(structural_hash(SubGraph(d, nodes_named(d, {"neg", "exp"}))),
            structural_hash(SubGraph(e, nodes_named(e, {"neg", "exp"}))));
  EXPECT_NE(structural_hash(SubGraph(d, nodes_named(d, {"relu", "neg"}))),  // exposes r and n
            structural_hash(SubGraph(d, nodes_named(d, {"neg", "exp"}))));
}

TEST(StructuralHash, StableAcrossRunsAndBuilds) {
  // If this changes, every stored cost is silently orphaned: bump the database schema instead.
  Graph d = diamond();
  SubGraph sg(d, nodes_named(d, {"neg", "exp"}));
  EXPECT_EQ(structural_signature(sg),
            "input i0 float32[5x7]\n"
            "node 0 0:3:Neg v17 {} (i0,) -> float32[5x7]\n"
            "node 1 0:3:Exp v17 {} (n0.0,) -> float32[5x7]\n"
            "outputs n1.0\n");
  EXPECT_EQ(structural_hash_hex(sg), "f2124fb95af7fa45");
  EXPECT_EQ(fnv1a64("", 0), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a", 1), 0xaf63dc4c8601ec8cull);
}

}  // namespace
}  // namespace tessera
