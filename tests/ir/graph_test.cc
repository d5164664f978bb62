#include "ir/graph.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

// x -> Relu -> a -> Add(a, c) -> y, built in reverse order to check the post-DFS sort.
TEST(Graph, FinalizeOrdersNodesPostDfs) {
  Graph g;
  int x = g.add_input("x", TensorType::of(DType::kFloat32, {2, 3}));
  int c = g.add_constant("c", Tensor::from_vector<float>({3}, {1, 2, 3}));
  int a = g.add_value("a");
  int y = g.add_value("y");
  g.add_node("Add", {a, c}, {y}, {}, "add");
  g.add_node("Relu", {x}, {a}, {}, "relu");
  g.mark_output(y);
  ASSERT_TRUE(g.finalize().ok());
  ASSERT_EQ(g.num_nodes(), 2);
  EXPECT_EQ(g.node(0).op_type, "Relu");
  EXPECT_EQ(g.node(1).op_type, "Add");
  EXPECT_EQ(g.value(a).producer, 0);
  EXPECT_EQ(g.value(a).consumers, std::vector<int>{1});
  EXPECT_EQ(g.parameter_count(), 3);
}

TEST(Graph, FinalizeDropsDeadNodes) {
  Graph g;
  int x = g.add_input("x", TensorType::of(DType::kFloat32, {2}));
  int dead = g.add_value("dead");
  int y = g.add_value("y");
  g.add_node("Neg", {x}, {dead});
  g.add_node("Relu", {x}, {y});
  g.mark_output(y);
  ASSERT_TRUE(g.finalize().ok());
  ASSERT_EQ(g.num_nodes(), 1);
  EXPECT_EQ(g.node(0).op_type, "Relu");
}

TEST(Graph, FinalizeRejectsCycle) {
  Graph g;
  int x = g.add_input("x", TensorType::of(DType::kFloat32, {2}));
  int a = g.add_value("a");
  int b = g.add_value("b");
  g.add_node("Add", {x, b}, {a}, {}, "first");
  g.add_node("Relu", {a}, {b}, {}, "second");
  g.mark_output(b);
  Status st = g.finalize();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cycle"), std::string::npos) << st.message();
}

TEST(Graph, FinalizeRejectsDanglingInput) {
  Graph g;
  int ghost = g.add_value("ghost");
  int y = g.add_value("y");
  g.add_node("Relu", {ghost}, {y}, {}, "r");
  g.mark_output(y);
  Status st = g.finalize();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("ghost"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("Relu 'r'"), std::string::npos) << st.message();
}

TEST(Graph, FinalizeRejectsValueProducedTwice) {
  Graph g;
  int x = g.add_input("x", TensorType::of(DType::kFloat32, {2}));
  int y = g.add_value("y");
  g.add_node("Relu", {x}, {y});
  g.add_node("Neg", {x}, {y});
  g.mark_output(y);
  EXPECT_FALSE(g.finalize().ok());
}

}  // namespace
}  // namespace tessera
