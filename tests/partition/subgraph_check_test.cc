// SubGraph analysis: entry/exit nodes, depth, taps, kind, and the validity rules.
#include "partition/subgraph_check.h"

#include <gtest/gtest.h>

#include "partition/partition_test_util.h"

namespace tessera {
namespace {

using namespace partition_test;

TEST(SubGraphCheck, EntryExitDepthTaps) {
  Graph g = diamond();
  SubGraph sg(g, nodes_named(g, {"relu", "neg"}));
  EXPECT_EQ(names_of(g, sg.entry_nodes()), "relu");
  EXPECT_EQ(names_of(g, sg.exit_nodes()), "relu,neg");  // r goes to add, n to exp
  EXPECT_EQ(sg.depth(), 2);
  EXPECT_TRUE(sg.has_taps());  // r is read by neg inside and by add outside
  ASSERT_EQ(sg.outputs().size(), 2u);

  SubGraph tail(g, nodes_named(g, {"neg", "exp", "add"}));
  EXPECT_EQ(names_of(g, tail.entry_nodes()), "neg,add");  // both read r from outside
  EXPECT_EQ(names_of(g, tail.exit_nodes()), "add");
  EXPECT_EQ(tail.depth(), 3);
  EXPECT_FALSE(tail.has_taps());
  ASSERT_EQ(tail.inputs().size(), 1u);
  EXPECT_EQ(g.value(tail.inputs()[0]).name, "r");
  EXPECT_EQ(tail.label(), "Neg+Exp+Add");
}

TEST(SubGraphCheck, ConstantsDoNotMakeEntries) {
  Graph g = constants();
  SubGraph sg(g, nodes_named(g, {"reshape", "matmul"}));
  EXPECT_EQ(names_of(g, sg.entry_nodes()), "matmul");
  EXPECT_EQ(sg.constants().size(), 2u);
  SubGraph reshape(g, nodes_named(g, {"reshape"}));
  EXPECT_TRUE(reshape.entry_nodes().empty());
  EXPECT_EQ(names_of(g, reshape.exit_nodes()), "reshape");
}

TEST(SubGraphCheck, KindIsTheLargest) {
  Graph g = constants();
  EXPECT_EQ(subgraph_kind(SubGraph(g, nodes_named(g, {"relu"}))), OpKind::kElementwise);
  EXPECT_EQ(subgraph_kind(SubGraph(g, nodes_named(g, {"reshape"}))), OpKind::kInjective);
  EXPECT_EQ(subgraph_kind(SubGraph(g, nodes_named(g, {"matmul", "relu"}))),
            OpKind::kOutElementwiseFusable);
  Graph d = diamond();
  EXPECT_EQ(subgraph_kind(SubGraph(d, nodes_named(d, {"exp", "add"}))), OpKind::kBroadcast);
}

TEST(SubGraphCheck, ValidityRules) {
  Graph g = diamond();
  Reachability reach(g);
  SubGraphConfig any;
  SubGraphConfig strict;
  strict.max_exits = 1;
  strict.max_depth = 2;
  strict.allow_taps = false;
  auto check = [&](std::initializer_list<std::string> names, const SubGraphConfig& c) {
    Status st = check_subgraph(SubGraph(g, nodes_named(g, names)), reach, c);
    return st.ok() ? std::string("ok") : st.message();
  };
  EXPECT_EQ(check({"relu", "add"}, any), "not convex");
  EXPECT_EQ(check({"relu", "neg"}, any), "ok");
  EXPECT_EQ(check({"relu", "neg"}, strict), "2 exits (at most 1)");
  EXPECT_EQ(check({"neg", "exp", "add"}, strict), "depth 3 (at most 2)");
  strict.max_exits = 2;
  EXPECT_EQ(check({"relu", "neg"}, strict), "an output is also read inside (a tap)");
  EXPECT_EQ(check({"exp", "add"}, strict), "ok");
  EXPECT_FALSE(check_subgraph(SubGraph(g, NodeSet(g.num_nodes())), reach, any).ok());
}

TEST(SubGraphCheck, Touching) {
  Graph g = diamond();
  EXPECT_TRUE(touching(g, nodes_named(g, {"relu"}), nodes_named(g, {"add"})));
  EXPECT_TRUE(touching(g, nodes_named(g, {"add"}), nodes_named(g, {"relu"})));
  EXPECT_FALSE(touching(g, nodes_named(g, {"relu"}), nodes_named(g, {"exp"})));
}

}  // namespace
}  // namespace tessera
