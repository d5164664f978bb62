#include "ir/pattern.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

const TensorType kF32 = TensorType::of(DType::kFloat32, {1, 4});

int node_named(const Graph& g, const std::string& name) {
  for (int i = 0; i < g.num_nodes(); ++i)
    if (g.node(i).name == name) return i;
  ADD_FAILURE() << "no node " << name;
  return -1;
}

int value_named(const Graph& g, const std::string& name) {
  std::optional<int> v = g.find_value(name);
  EXPECT_TRUE(v.has_value()) << name;
  return v.value_or(-1);
}

std::vector<int> values_named(const Graph& g, const std::vector<std::string>& names) {
  std::vector<int> ids;
  for (const auto& n : names) ids.push_back(value_named(g, n));
  return ids;
}

// y = Relu(Add(Conv(x, w, b), bias)); `conv_group` is Conv's group attribute.
Graph conv_add_relu(int64_t conv_group = 1) {
  Graph g;
  int x = g.add_input("x", TensorType::of(DType::kFloat32, {1, 3, 8, 8}));
  int w = g.add_constant("w", Tensor(DType::kFloat32, {4, 3, 3, 3}));
  int b = g.add_constant("b", Tensor(DType::kFloat32, {4}));
  int bias = g.add_constant("bias", Tensor(DType::kFloat32, {4, 1, 1}));
  int c = g.add_value("c", TensorType::of(DType::kFloat32, {1, 4, 6, 6}));
  int a = g.add_value("a", TensorType::of(DType::kFloat32, {1, 4, 6, 6}));
  int y = g.add_value("y", TensorType::of(DType::kFloat32, {1, 4, 6, 6}));
  g.add_node("Conv", {x, w, b}, {c}, {{"group", Attribute::of_int(conv_group)}}, "conv");
  g.add_node("Add", {c, bias}, {a}, {}, "add");
  g.add_node("Relu", {a}, {y}, {}, "relu");
  g.mark_output(y);
  TESSERA_CHECK(g.finalize().ok());
  return g;
}

Pattern conv_bias_relu_pattern() {
  return op("Relu", {op("Add", {op("Conv", {wildcard(), constant(), constant()}), wildcard()})});
}

TEST(Pattern, ConvAddReluMatches) {
  Graph g = conv_add_relu();
  int conv = node_named(g, "conv"), add = node_named(g, "add"), relu = node_named(g, "relu");
  std::optional<Match> m = match(g, relu, conv_bias_relu_pattern());
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->root(), relu);
  EXPECT_EQ(m->node_order, (std::vector<int>{relu, add, conv}));
  EXPECT_EQ(m->nodes, NodeSet::of(g.num_nodes(), {conv, add, relu}));
  EXPECT_EQ(m->bound_values, values_named(g, {"x", "w", "b", "bias"}));
  EXPECT_TRUE(intermediates_are_internal(g, *m));

  // Rooted elsewhere: no match.
  EXPECT_FALSE(match(g, add, conv_bias_relu_pattern()).has_value());
  EXPECT_FALSE(match(g, conv, conv_bias_relu_pattern()).has_value());
  std::vector<Match> all = match_all(g, conv_bias_relu_pattern());
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].root(), relu);

  // A sub-pattern matches at its own root.
  std::optional<Match> conv_add = match(g, add, op("Add", {op("Conv"), constant()}));
  ASSERT_TRUE(conv_add.has_value());
  EXPECT_EQ(conv_add->node_order, (std::vector<int>{add, conv}));
  EXPECT_EQ(conv_add->bound_values, values_named(g, {"bias"}));
}

TEST(Pattern, InputsAreOrderedNotCommutative) {
  Graph g = conv_add_relu();
  int add = node_named(g, "add");
  EXPECT_FALSE(match(g, add, op("Add", {constant(), op("Conv")})).has_value());
  // Both orders as alternatives.
  Pattern either = op("Add", {constant(), op("Conv")}) | op("Add", {op("Conv"), constant()});
  EXPECT_TRUE(match(g, add, either).has_value());
}

TEST(Pattern, ConstantRejectsGraphInput) {
  Graph g;
  int x = g.add_input("x", kF32);
  int w = g.add_input("w", kF32);  // a weight fed at run time, not an initializer
  int y = g.add_value("y");
  g.add_node("MatMul", {x, w}, {y}, {}, "mm");
  g.mark_output(y);
  ASSERT_TRUE(g.finalize().ok());
  int mm = node_named(g, "mm");
  EXPECT_FALSE(match(g, mm, op("MatMul", {wildcard(), constant()})).has_value());
  std::optional<Match> m = match(g, mm, op("MatMul", {wildcard(), wildcard()}));
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->bound_values, (std::vector<int>{x, w}));
  // constant() does not match a value produced by a node either.
  Graph h = conv_add_relu();
  EXPECT_FALSE(match(h, node_named(h, "add"), op("Add", {constant(), constant()})).has_value());
}

// y = Relu(x) + Sigmoid(x) + Tanh(x)
Graph three_activations() {
  Graph g;
  int x = g.add_input("x", kF32);
  int r = g.add_value("r", kF32), s = g.add_value("s", kF32), t = g.add_value("t", kF32);
  int rs = g.add_value("rs", kF32), y = g.add_value("y", kF32);
  g.add_node("Relu", {x}, {r}, {}, "relu");
  g.add_node("Sigmoid", {x}, {s}, {}, "sigmoid");
  g.add_node("Tanh", {x}, {t}, {}, "tanh");
  g.add_node("Add", {r, s}, {rs}, {}, "add1");
  g.add_node("Add", {rs, t}, {y}, {}, "add2");
  g.mark_output(y);
  TESSERA_CHECK(g.finalize().ok());
  return g;
}

TEST(Pattern, Alternatives) {
  Graph g = three_activations();
  int relu = node_named(g, "relu"), sigmoid = node_named(g, "sigmoid");
  Pattern alt = op("Relu", {wildcard()}) | op("Sigmoid", {wildcard()});
  std::vector<Match> all = match_all(g, alt);
  ASSERT_EQ(all.size(), 2u);
  std::vector<int> roots = {all[0].root(), all[1].root()};
  std::sort(roots.begin(), roots.end());
  std::vector<int> expected = {relu, sigmoid};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(roots, expected);

  // A set of op names does the same.
  EXPECT_EQ(match_all(g, op({"Relu", "Sigmoid"}, {wildcard()})).size(), 2u);
  std::vector<std::string> names = {"Relu", "Sigmoid", "Tanh"};
  EXPECT_EQ(match_all(g, op(names, {wildcard()})).size(), 3u);
  EXPECT_EQ(match_all(g, op("Relu") | op("Sigmoid") | op("Tanh") | op("Add")).size(), 5u);

  // Alternatives inside a pattern: Add(Relu|Sigmoid, Relu|Sigmoid) matches add1 only.
  Pattern act = op({"Relu", "Sigmoid"}, {wildcard()});
  std::vector<Match> adds = match_all(g, op("Add", {act, act}));
  // act is one pattern object used twice, so both inputs must be the same value: no match.
  EXPECT_TRUE(adds.empty());
  adds = match_all(g, op("Add", {op({"Relu", "Sigmoid"}, {wildcard()}),
                                 op("Relu", {wildcard()}) | op("Sigmoid", {wildcard()})}));
  ASSERT_EQ(adds.size(), 1u);
  EXPECT_EQ(adds[0].root(), node_named(g, "add1"));
  EXPECT_EQ(adds[0].nodes, NodeSet::of(g.num_nodes(), {relu, sigmoid, node_named(g, "add1")}));
}

TEST(Pattern, FirstMatchingAlternativeWinsAndFailedBranchLeavesNoTrace) {
  Graph g = conv_add_relu();
  int add = node_named(g, "add"), conv = node_named(g, "conv");
  // The first branch matches Conv, then fails on its second input (a constant, not a node):
  // nothing it recorded may leak into the second branch's match.
  Pattern p = op("Add", {op("Conv", {wildcard(), wildcard(), wildcard()}), op("Relu")}) |
              op("Add", {wildcard(), wildcard()});
  std::optional<Match> m = match(g, add, p);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->node_order, std::vector<int>{add});
  EXPECT_EQ(m->nodes, NodeSet::of(g.num_nodes(), {add}));
  EXPECT_EQ(m->bound_values, values_named(g, {"c", "bias"}));
  // Both branches match: the first one is taken.
  Pattern q = op("Add", {op("Conv"), wildcard()}) | op("Add", {wildcard(), wildcard()});
  m = match(g, add, q);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->node_order, (std::vector<int>{add, conv}));
  EXPECT_EQ(m->bound_values, values_named(g, {"bias"}));
}

TEST(Pattern, PredicatesReject) {
  Graph group1 = conv_add_relu(1);
  Graph group2 = conv_add_relu(2);
  Pattern conv = op("Conv", {wildcard(), constant(), constant()});
  Pattern grouped = conv.where(attr_is("group", Attribute::of_int(1)), "group=1");
  EXPECT_TRUE(match(group1, node_named(group1, "conv"), grouped).has_value());
  EXPECT_FALSE(match(group2, node_named(group2, "conv"), grouped).has_value());
  // The original pattern is unchanged by where().
  EXPECT_TRUE(match(group2, node_named(group2, "conv"), conv).has_value());
  // A missing attribute does not equal anything.
  EXPECT_FALSE(match(group1, node_named(group1, "conv"),
                     conv.where(attr_is("dilations", Attribute::of_ints({1, 1}))))
                   .has_value());
  // Predicates deep in the pattern reject the whole match.
  Pattern deep = op("Relu", {op("Add", {grouped, wildcard()})});
  EXPECT_TRUE(match(group1, node_named(group1, "relu"), deep).has_value());
  EXPECT_FALSE(match(group2, node_named(group2, "relu"), deep).has_value());

  // dtype of the matched value, on ops and on wildcards.
  int relu = node_named(group1, "relu");
  EXPECT_TRUE(match(group1, relu, op("Relu").where(dtype_is(DType::kFloat32))).has_value());
  EXPECT_FALSE(match(group1, relu, op("Relu").where(dtype_is(DType::kFloat16))).has_value());
  EXPECT_FALSE(
      match(group1, relu, op("Relu", {wildcard().where(dtype_is(DType::kInt64))})).has_value());

  // A custom predicate sees the node and the value.
  int seen_node = -2, seen_value = -2;
  Pattern custom = op("Conv").where([&](const Graph&, const MatchSite& s) {
    seen_node = s.node;
    seen_value = s.value;
    return false;
  });
  EXPECT_FALSE(match(group1, node_named(group1, "conv"), custom).has_value());
  EXPECT_EQ(seen_node, node_named(group1, "conv"));
  EXPECT_EQ(seen_value, value_named(group1, "c"));
}

TEST(Pattern, HasOneConsumer) {
  Graph g = three_activations();
  // x feeds three nodes; r feeds one; y is a graph output.
  int relu = node_named(g, "relu");
  EXPECT_FALSE(match(g, relu, op("Relu", {wildcard().where(has_one_consumer())})).has_value());
  EXPECT_TRUE(match(g, relu, op("Relu").where(has_one_consumer())).has_value());
  EXPECT_FALSE(match(g, node_named(g, "add2"), op("Add").where(has_one_consumer())).has_value());
}

TEST(Pattern, WildcardBindingOrderAndIdentity) {
  // y = (a * b) + c ; z = x * Sigmoid(x) ; w = x * Sigmoid(b)
  Graph g;
  int a = g.add_input("a", kF32), b = g.add_input("b", kF32), c = g.add_input("c", kF32);
  int x = g.add_input("x", kF32);
  int ab = g.add_value("ab"), y = g.add_value("y");
  int sx = g.add_value("sx"), z = g.add_value("z");
  int sb = g.add_value("sb"), w = g.add_value("w");
  g.add_node("Mul", {a, b}, {ab}, {}, "mul");
  g.add_node("Add", {ab, c}, {y}, {}, "add");
  g.add_node("Sigmoid", {x}, {sx}, {}, "sig_x");
  g.add_node("Mul", {x, sx}, {z}, {}, "silu");
  g.add_node("Sigmoid", {b}, {sb}, {}, "sig_b");
  g.add_node("Mul", {x, sb}, {w}, {}, "not_silu");
  g.mark_output(y);
  g.mark_output(z);
  g.mark_output(w);
  ASSERT_TRUE(g.finalize().ok());

  std::optional<Match> m =
      match(g, node_named(g, "add"), op("Add", {op("Mul", {wildcard(), wildcard()}), wildcard()}));
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->bound_values, (std::vector<int>{a, b, c}));

  Pattern xp = wildcard();
  Pattern silu = op("Mul", {xp, op("Sigmoid", {xp})});
  std::vector<Match> all = match_all(g, silu);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].root(), node_named(g, "silu"));
  EXPECT_EQ(all[0].bound_values, std::vector<int>{x});  // bound once
  // Independent wildcards match both.
  EXPECT_EQ(match_all(g, op("Mul", {wildcard(), op("Sigmoid", {wildcard()})})).size(), 2u);
}

TEST(Pattern, OneNodeMatchedByTwoOpPatterns) {
  // y = Add(r, r), r = Relu(x)
  Graph g;
  int x = g.add_input("x", kF32);
  int r = g.add_value("r"), y = g.add_value("y");
  g.add_node("Relu", {x}, {r}, {}, "relu");
  g.add_node("Add", {r, r}, {y}, {}, "add");
  g.mark_output(y);
  ASSERT_TRUE(g.finalize().ok());
  std::optional<Match> m = match(g, node_named(g, "add"),
                                 op("Add", {op("Relu", {wildcard()}), op("Relu", {wildcard()})}));
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->node_order, (std::vector<int>{node_named(g, "add"), node_named(g, "relu")}));
  EXPECT_EQ(m->nodes.count(), 2);
  EXPECT_EQ(m->bound_values, (std::vector<int>{x, x}));
  // r feeds the Add twice, both uses inside the match.
  EXPECT_TRUE(intermediates_are_internal(g, *m));
}

TEST(Pattern, ExternalConsumers) {
  // y = Relu(Add(Conv(x, w, b), bias)) and also z = Neg(c): c escapes the Conv+Add+Relu match.
  Graph g;
  int x = g.add_input("x", kF32);
  int w = g.add_constant("w", Tensor(DType::kFloat32, {4, 4}));
  int b = g.add_constant("b", Tensor(DType::kFloat32, {4}));
  int bias = g.add_constant("bias", Tensor(DType::kFloat32, {4}));
  int c = g.add_value("c"), a = g.add_value("a"), y = g.add_value("y"), z = g.add_value("z");
  g.add_node("Conv", {x, w, b}, {c}, {}, "conv");
  g.add_node("Add", {c, bias}, {a}, {}, "add");
  g.add_node("Relu", {a}, {y}, {}, "relu");
  g.add_node("Neg", {c}, {z}, {}, "neg");
  g.mark_output(y);
  g.mark_output(z);
  ASSERT_TRUE(g.finalize().ok());
  int relu = node_named(g, "relu");
  std::optional<Match> m = match(g, relu, conv_bias_relu_pattern());
  ASSERT_TRUE(m.has_value());
  EXPECT_FALSE(intermediates_are_internal(g, *m));
  MatchOptions fusable;
  fusable.internal_intermediates = true;
  EXPECT_FALSE(match(g, relu, conv_bias_relu_pattern(), fusable).has_value());
  EXPECT_TRUE(match_all(g, conv_bias_relu_pattern(), fusable).empty());
  // The root's own output may be used anywhere: Add+Relu alone is fine even though the Add's
  // input c is used by Neg (c is an input of the match, not an intermediate).
  EXPECT_TRUE(match(g, relu, op("Relu", {op("Add", {wildcard(), constant()})}), fusable));

  // An intermediate that is a graph output escapes too.
  Graph h = conv_add_relu();
  h.mark_output(value_named(h, "a"));
  ASSERT_TRUE(h.finalize().ok());
  m = match(h, node_named(h, "relu"), conv_bias_relu_pattern());
  ASSERT_TRUE(m.has_value());
  EXPECT_FALSE(intermediates_are_internal(h, *m));
  EXPECT_FALSE(match(h, node_named(h, "relu"), conv_bias_relu_pattern(), fusable).has_value());
  // The clean graph passes.
  Graph clean = conv_add_relu();
  EXPECT_TRUE(match(clean, node_named(clean, "relu"), conv_bias_relu_pattern(), fusable));
}

TEST(Pattern, Arity) {
  // Conv(x, w) without bias; Conv(x, w, <omitted>) with a trailing omitted input;
  // Clip(x, <omitted>, max) with an omitted one in the middle.
  Graph g;
  int x = g.add_input("x", kF32);
  int w = g.add_constant("w", Tensor(DType::kFloat32, {4, 4}));
  int mx = g.add_constant("max", Tensor::scalar<float>(6));
  int c1 = g.add_value("c1"), c2 = g.add_value("c2"), k = g.add_value("k");
  g.add_node("Conv", {x, w}, {c1}, {}, "conv_no_bias");
  g.add_node("Conv", {x, w, kNoValue}, {c2}, {}, "conv_trailing");
  g.add_node("Clip", {x, kNoValue, mx}, {k}, {}, "clip");
  g.mark_output(c1);
  g.mark_output(c2);
  g.mark_output(k);
  ASSERT_TRUE(g.finalize().ok());
  Pattern two = op("Conv", {wildcard(), constant()});
  Pattern three = op("Conv", {wildcard(), constant(), constant()});
  EXPECT_EQ(match_all(g, two).size(), 2u);
  EXPECT_TRUE(match_all(g, three).empty());
  EXPECT_EQ(match_all(g, two | three).size(), 2u);
  EXPECT_EQ(match_all(g, op("Conv")).size(), 2u);  // no inputs given: any arity
  EXPECT_FALSE(match(g, node_named(g, "clip"), op("Clip", {wildcard(), wildcard(), constant()})));
  EXPECT_TRUE(match(g, node_named(g, "clip"), op("Clip")));
}

TEST(Pattern, OutputIndexAndDomain) {
  // (p, q) = Split(x); y = Relu(q); g = com.microsoft.Gelu(y)
  Graph g;
  int x = g.add_input("x", kF32);
  int p = g.add_value("p"), q = g.add_value("q"), y = g.add_value("y"), gl = g.add_value("g");
  g.add_node("Split", {x}, {p, q}, {}, "split");
  g.add_node("Relu", {q}, {y}, {}, "relu");
  g.add_node("Gelu", {y}, {gl}, {}, "gelu", "com.microsoft");
  g.mark_output(p);
  g.mark_output(gl);
  ASSERT_TRUE(g.finalize().ok());
  int relu = node_named(g, "relu");
  EXPECT_FALSE(match(g, relu, op("Relu", {op("Split")})));  // q is output 1, not 0
  std::optional<Match> m = match(g, relu, op("Relu", {op("Split").at_output(1)}));
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->node_order, (std::vector<int>{relu, node_named(g, "split")}));
  // A root with at_output: its value (for predicates) is that output.
  EXPECT_TRUE(match(g, node_named(g, "split"), op("Split").at_output(1).where(has_one_consumer())));
  EXPECT_FALSE(match(g, node_named(g, "split"), op("Split").where(has_one_consumer())));

  int gelu = node_named(g, "gelu");
  EXPECT_FALSE(match(g, gelu, op("Gelu")));
  EXPECT_TRUE(match(g, gelu, op("com.microsoft.Gelu", {op("Relu")})));
}

TEST(Pattern, WildcardAtRootIsNoMatch) {
  Graph g = conv_add_relu();
  EXPECT_FALSE(match(g, node_named(g, "relu"), wildcard()));
  EXPECT_TRUE(match_all(g, wildcard()).empty());
  EXPECT_TRUE(match(g, node_named(g, "relu"), op("Relu") | wildcard()));
}

TEST(Pattern, ToString) {
  EXPECT_EQ(conv_bias_relu_pattern().to_string(), "Relu(Add(Conv(*, const, const), *))");
  EXPECT_EQ((op({"Relu", "Tanh"}, {wildcard()}) | op("Split").at_output(1)).to_string(),
            "({Relu|Tanh}(*) | Split#1)");
  EXPECT_EQ(op("Conv").where(attr_is("group", Attribute::of_int(1)), "group=1").to_string(),
            "Conv[group=1]");
}

TEST(Pattern, AttributesEqual) {
  EXPECT_TRUE(attributes_equal(Attribute::of_int(3), Attribute::of_int(3)));
  EXPECT_FALSE(attributes_equal(Attribute::of_int(3), Attribute::of_float(3)));
  EXPECT_TRUE(attributes_equal(Attribute::of_ints({1, 2}), Attribute::of_ints({1, 2})));
  EXPECT_FALSE(attributes_equal(Attribute::of_ints({1, 2}), Attribute::of_ints({1})));
  EXPECT_TRUE(attributes_equal(Attribute::of_string("SAME"), Attribute::of_string("SAME")));
  Tensor t1 = Tensor::from_vector<float>({2}, {1, 2});
  Tensor t2 = Tensor::from_vector<float>({2}, {1, 2});
  Tensor t3 = Tensor::from_vector<float>({2}, {1, 3});
  EXPECT_TRUE(attributes_equal(Attribute::of_tensor(t1), Attribute::of_tensor(t2)));
  EXPECT_FALSE(attributes_equal(Attribute::of_tensor(t1), Attribute::of_tensor(t3)));
  EXPECT_FALSE(
      attributes_equal(Attribute::of_tensor(t1), Attribute::of_tensor(t1.reshaped({1, 2}))));
}

}  // namespace
}  // namespace tessera
