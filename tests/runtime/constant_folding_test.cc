// Constant folding: the shape computations exporters emit (Shape -> Cast -> Slice -> Concat ->
// Reshape) fold away once the input dims are known, the dims after them become known, and the
// folded graph computes exactly what the unfolded one does. What must not fold stays a node.
#include "runtime/constant_folding.h"

#include <gtest/gtest.h>

#include <cstring>

#include "backends/test_graph.h"
#include "ops/op_registry.h"
#include "runtime/session.h"

namespace tessera {
namespace {

Tensor random_floats(const std::vector<int64_t>& dims, uint64_t seed) {
  return testing_graph::random_tensor(dims, seed);
}

int count_op(const Graph& g, const std::string& op) {
  int n = 0;
  for (const Node& node : g.nodes()) n += node.op_type == op;
  return n;
}

// y = Transpose(Reshape(Relu(x), [d0, d1 * d2 / 4, -1])) with the target computed from Shape(x)
// the way Paddle2ONNX writes it: int64 -> int32 -> slice -> int64 -> concat with constants.
Graph paddle_style_reshape(const std::vector<Dim>& x_dims) {
  Graph g;
  g.opsets[""] = 13;
  const int x = g.add_input("x", TensorType{DType::kFloat32, x_dims});
  auto value = [&](const std::string& name) { return g.add_value(name); };
  auto node = [&](const std::string& op, std::vector<int> in, int out, std::map<std::string, Attribute> a = {}) {
    const int n = g.add_node(op, std::move(in), {out}, std::move(a));
    g.node(n).opset = 13;
  };
  const int relu = value("relu"), shape = value("shape"), shape32 = value("shape32"), d0 = value("d0"),
            d0_64 = value("d0_64"), target = value("target"), reshaped = value("reshaped"), y = value("y");
  node("Relu", {x}, relu);
  node("Shape", {x}, shape);
  node("Cast", {shape}, shape32, {{"to", Attribute::of_int(static_cast<int64_t>(6))}});  // int32
  node("Slice", {shape32, g.add_constant("s0", Tensor::from_vector<int64_t>({1}, {0})),
                 g.add_constant("s1", Tensor::from_vector<int64_t>({1}, {1}))},
       d0);
  node("Cast", {d0}, d0_64, {{"to", Attribute::of_int(static_cast<int64_t>(7))}});  // int64
  node("Concat", {d0_64, g.add_constant("rest", Tensor::from_vector<int64_t>({2}, {4, -1}))}, target,
       {{"axis", Attribute::of_int(0)}});
  node("Reshape", {relu, target}, reshaped);
  node("Transpose", {reshaped}, y, {{"perm", Attribute::of_ints({0, 2, 1})}});
  g.mark_output(y);
  TESSERA_CHECK(g.finalize().ok());
  TESSERA_CHECK(infer_graph_types(g).ok());
  return g;
}

Tensor run_graph(Graph g, const Tensor& x) {
  auto s = Session::from_graph(std::move(g));
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  if (!s.ok()) return {};
  auto out = (*s)->run({{"x", x}});
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  return out.ok() ? out->at("y") : Tensor();
}

TEST(ConstantFolding, ShapeComputationsFoldAndTheDimsAfterThemBecomeKnown) {
  for (const std::vector<int64_t>& dims : {std::vector<int64_t>{2, 8, 3}, {5, 4, 6}, {1, 12, 10}}) {
    Graph g = paddle_style_reshape({Dim(dims[0]), Dim(dims[1]), Dim(dims[2])});
    const Graph before = g;
    EXPECT_FALSE(g.value(*g.find_value("y")).type.is_static());  // the target is computed at run time
    auto folded = fold_constants(g);
    ASSERT_TRUE(folded.ok()) << folded.status().to_string();
    EXPECT_EQ(*folded, 5);  // Shape, Cast, Slice, Cast, Concat
    EXPECT_EQ(g.num_nodes(), 3);  // Relu, Reshape, Transpose
    EXPECT_EQ(count_op(g, "Shape"), 0);
    const std::vector<int64_t> want = {dims[0], dims[1] * dims[2] / 4, 4};
    EXPECT_TRUE(g.value(*g.find_value("y")).type.is_static());
    EXPECT_EQ(g.value(*g.find_value("y")).type.static_dims(), want);
    const Tensor x = random_floats(dims, 7 + dims[1]);
    const Tensor a = run_graph(before, x), b = run_graph(g, x);
    ASSERT_EQ(a.dims(), want);
    ASSERT_EQ(b.dims(), want);
    EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()), 0);
  }
}

TEST(ConstantFolding, ShapeWithStartAndEndAndSize) {
  // Shape(x, start 1, end -1) and Size(x) of a 2x3x4x5 input, each read by a Cast (a graph output,
  // which stays a node).
  Graph g;
  g.opsets[""] = 15;
  const int x = g.add_input("x", TensorType::of(DType::kFloat32, {2, 3, 4, 5}));
  const int s = g.add_value("s"), n = g.add_value("n"), ys = g.add_value("ys"), yn = g.add_value("yn");
  g.add_node("Shape", {x}, {s}, {{"start", Attribute::of_int(1)}, {"end", Attribute::of_int(-1)}});
  g.add_node("Size", {x}, {n});
  g.add_node("Cast", {s}, {ys}, {{"to", Attribute::of_int(static_cast<int64_t>(1))}});  // float
  g.add_node("Cast", {n}, {yn}, {{"to", Attribute::of_int(static_cast<int64_t>(1))}});
  g.mark_output(ys);
  g.mark_output(yn);
  for (int i = 0; i < g.num_nodes(); ++i) g.node(i).opset = 15;
  ASSERT_TRUE(g.finalize().ok());
  ASSERT_TRUE(infer_graph_types(g).ok());
  auto folded = fold_constants(g);
  ASSERT_TRUE(folded.ok()) << folded.status().to_string();
  EXPECT_EQ(*folded, 2);
  EXPECT_EQ(g.num_nodes(), 2);  // the Casts
  const Value& sv = g.value(*g.find_value("s"));
  ASSERT_TRUE(sv.constant.has_value());
  EXPECT_EQ(sv.constant->to_int64_vector(), (std::vector<int64_t>{3, 4}));
  const Value& nv = g.value(*g.find_value("n"));
  ASSERT_TRUE(nv.constant.has_value());
  EXPECT_EQ(nv.constant->rank(), 0);
  EXPECT_EQ(nv.constant->as_int64(0), 120);
}

TEST(ConstantFolding, UnknownDimsAndGraphOutputsStayNodes) {
  // A dynamic first dim: Shape(x) is not known, nothing folds (the Concat's other input is
  // constant, but its first is not).
  Graph g = paddle_style_reshape({Dim(), Dim(8), Dim(3)});
  auto folded = fold_constants(g);
  ASSERT_TRUE(folded.ok());
  EXPECT_EQ(*folded, 0);
  EXPECT_EQ(g.num_nodes(), 8);

  // Shape(x) as a graph output stays the node that produces it.
  Graph h;
  h.opsets[""] = 13;
  const int x = h.add_input("x", TensorType::of(DType::kFloat32, {2, 3}));
  const int s = h.add_value("s");
  h.add_node("Shape", {x}, {s});
  h.node(0).opset = 13;
  h.mark_output(s);
  ASSERT_TRUE(h.finalize().ok());
  ASSERT_TRUE(infer_graph_types(h).ok());
  folded = fold_constants(h);
  ASSERT_TRUE(folded.ok());
  EXPECT_EQ(*folded, 0);
  EXPECT_EQ(h.num_nodes(), 1);
}

TEST(ConstantFolding, LargeConstantExpressionsStayNodes) {
  // Add of two 100x100 constants (10,000 elements) is left to run; a 3-element one folds.
  for (int64_t n : {int64_t{100}, int64_t{3}}) {
    Graph g;
    g.opsets[""] = 13;
    const int x = g.add_input("x", TensorType::of(DType::kFloat32, {n, n}));
    const int c = g.add_value("c"), y = g.add_value("y");
    const int a = g.add_constant("a", random_floats({n, n}, 1)), b = g.add_constant("b", random_floats({n, n}, 2));
    g.add_node("Add", {a, b}, {c});
    g.add_node("Mul", {x, c}, {y});
    g.mark_output(y);
    for (int i = 0; i < g.num_nodes(); ++i) g.node(i).opset = 13;
    ASSERT_TRUE(g.finalize().ok());
    ASSERT_TRUE(infer_graph_types(g).ok());
    auto folded = fold_constants(g);
    ASSERT_TRUE(folded.ok());
    EXPECT_EQ(*folded, n == 3 ? 1 : 0) << n;
    EXPECT_EQ(g.num_nodes(), n == 3 ? 1 : 2) << n;
    if (n == 3) {
      const Value& cv = g.value(*g.find_value("c"));
      ASSERT_TRUE(cv.constant.has_value());
      for (int64_t i = 0; i < n * n; ++i)
        EXPECT_EQ(cv.constant->data<float>()[i],
                  g.value(a).constant->data<float>()[i] + g.value(b).constant->data<float>()[i]);
    }
  }
}

}  // namespace
}  // namespace tessera
