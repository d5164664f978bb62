// Partition rules: exact candidate sets on small graphs, worked out by hand (see the comments),
// for each fusion style, each combiner on its own, and the base rules and combinators.
#include "partition/rules.h"

#include <gtest/gtest.h>

#include "partition/partition_test_util.h"

namespace tessera {
namespace {

using namespace partition_test;
using Names = std::set<std::string>;

const std::set<std::string> kAllOps = {"Relu",  "Neg",    "Exp",     "Add",   "Mul",
                                       "Split", "Concat", "Reshape", "MatMul"};

std::vector<Candidate> run(const RulePtr& rule, const Graph& g, const Backend& b) {
  return rule->candidates(g, b);
}

TEST(Rules, DiamondTvmLike) {
  Graph g = diamond();
  FakeBackend b("tvm", FusionStyle::kTvmLike, kAllOps);
  // {relu,add} is not convex, {relu,neg} and {relu,neg,exp} have two exits.
  EXPECT_EQ(name_sets(g, run(rules_for(b), g, b)),
            (Names{"relu", "neg", "exp", "add", "exp,neg", "add,exp", "add,exp,neg",
                   "add,exp,neg,relu"}));
}

TEST(Rules, DiamondArbitraryDepthTwo) {
  Graph g = diamond();
  FakeBackend b("arb", FusionStyle::kArbitrary, kAllOps, /*max_depth=*/2);
  EXPECT_EQ(name_sets(g, run(rules_for(b), g, b)),
            (Names{"relu", "neg", "exp", "add", "exp,neg", "add,exp"}));
}

TEST(Rules, DiamondPartialSupportKeepsConvexSingletons) {
  Graph g = diamond();
  FakeBackend b("arb", FusionStyle::kArbitrary, {"Relu", "Neg", "Add"});
  // {relu,neg} has two exits; {relu,add} and {relu,neg,add} are not convex.
  EXPECT_EQ(name_sets(g, run(rules_for(b), g, b)), (Names{"relu", "neg", "add"}));
}

TEST(Rules, DiamondNoFusion) {
  Graph g = diamond();
  FakeBackend b("none", FusionStyle::kNone, kAllOps);
  EXPECT_EQ(name_sets(g, run(rules_for(b), g, b)), (Names{"relu", "neg", "exp", "add"}));
}

TEST(Rules, AcceptsHasTheLastWord) {
  Graph g = diamond();
  FakeBackend b("tvm", FusionStyle::kTvmLike, kAllOps);
  b.accept_fn = [](const SubGraph& sg) {
    return sg.size() <= 2 ? Status() : unimplemented("too big");
  };
  EXPECT_EQ(name_sets(g, run(rules_for(b), g, b)),
            (Names{"relu", "neg", "exp", "add", "exp,neg", "add,exp"}));
}

TEST(Rules, DoubleResidualTvmLike) {
  Graph g = double_residual();
  FakeBackend b("tvm", FusionStyle::kTvmLike, kAllOps);
  // Combined: 5 singles; ab bc cd de; abc bcd cde abcd bcde; abcde. Two exits: ab cd bcd abcd.
  EXPECT_EQ(
      name_sets(g, run(rules_for(b), g, b)),
      (Names{"a", "b", "c", "d", "e", "b,c", "d,e", "a,b,c", "c,d,e", "b,c,d,e", "a,b,c,d,e"}));
}

TEST(Rules, DoubleResidualKeepsEveryIntermediateBeforeValidity) {
  Graph g = double_residual();
  FakeBackend b("tvm", FusionStyle::kTvmLike, kAllOps);
  RulePtr combine = combine_rule(op_by_kind_rule(), tvm_combiners(), {8, 1000});
  EXPECT_EQ(name_sets(g, run(combine, g, b)),
            (Names{"a", "b", "c", "d", "e", "a,b", "b,c", "c,d", "d,e", "a,b,c", "b,c,d", "c,d,e",
                   "a,b,c,d", "b,c,d,e", "a,b,c,d,e"}));
  // With taps and two exits allowed, only convexity and depth remain.
  SubGraphConfig two_exits;
  two_exits.max_exits = 2;
  two_exits.max_depth = 3;
  EXPECT_EQ(
      name_sets(g, run(only_valid_rule(combine, two_exits), g, b)),
      (Names{"a", "b", "c", "d", "e", "a,b", "b,c", "c,d", "d,e", "a,b,c", "b,c,d", "c,d,e"}));
}

TEST(Rules, MultiOutputTvmLike) {
  Graph g = multi_output();
  FakeBackend b("tvm", FusionStyle::kTvmLike, kAllOps);
  // {S,R}, {S,N} and {S,R,N} have two exits; {S,R,C} and {S,N,C} are not convex.
  EXPECT_EQ(name_sets(g, run(rules_for(b), g, b)),
            (Names{"S", "R", "N", "C", "C,R", "C,N", "C,N,R", "C,N,R,S"}));
}

TEST(Rules, MultiOutputCombinerAlone) {
  Graph g = multi_output();
  FakeBackend b("tvm", FusionStyle::kTvmLike, kAllOps);
  std::vector<Candidate> cs = run(combine_rule(op_by_kind_rule(), {multi_output_combiner()}), g, b);
  EXPECT_EQ(name_sets(g, cs), (Names{"S", "R", "N", "C", "N,R,S"}));
  EXPECT_EQ(cs.back().rule_name, "multi_output");
}

TEST(Rules, TupleArgCombinerAlone) {
  Graph g = tuple_args();
  FakeBackend b("tvm", FusionStyle::kTvmLike, kAllOps);
  std::vector<Candidate> cs = run(combine_rule(op_by_kind_rule(), {tuple_arg_combiner()}), g, b);
  EXPECT_EQ(name_sets(g, cs), (Names{"a", "b", "c", "C", "C,a,b,c"}));
  EXPECT_EQ(cs.back().rule_name, "tuple");
  // Pairwise injective->injective combining reaches every subset of producers with the concat.
  std::vector<Candidate> pairwise =
      run(combine_rule(op_by_kind_rule(),
                       {by_kind_combiner({{OpKind::kInjective, OpKind::kInjective}})}),
          g, b);
  EXPECT_EQ(name_sets(g, pairwise),
            (Names{"a", "b", "c", "C", "C,a", "C,b", "C,c", "C,a,b", "C,a,c", "C,b,c", "C,a,b,c"}));
}

TEST(Rules, ConstantsAreAbsorbed) {
  Graph g = constants();
  FakeBackend b("tvm", FusionStyle::kTvmLike, kAllOps);
  std::vector<Candidate> cs = run(rules_for(b), g, b);
  // matmul->relu by kind; the reshape of a weight joins its consumer's candidates.
  EXPECT_EQ(name_sets(g, cs), (Names{"reshape", "matmul", "relu", "matmul,relu", "matmul,reshape",
                                     "matmul,relu,reshape"}));
  for (const Candidate& c : cs) {
    if (c.nodes.contains(node_named(g, "reshape")) && c.nodes.count() > 1) {
      EXPECT_EQ(c.rule_name, "constant");
    }
  }
}

TEST(Rules, ConstantCombinerOnlyWhereTheBackendRunsTheProducer) {
  Graph g = constants();
  FakeBackend b("tvm", FusionStyle::kTvmLike, {"MatMul", "Relu"});
  EXPECT_EQ(name_sets(g, run(rules_for(b), g, b)), (Names{"matmul", "relu", "matmul,relu"}));
}

TEST(Rules, PatternAndCompositeRules) {
  Graph g = constants();
  FakeBackend b("none", FusionStyle::kNone, kAllOps);
  b.accept_fn = [](const SubGraph&) { return Status(); };
  Pattern p = op("Relu", {op("MatMul", {wildcard(), wildcard()})});
  std::vector<Candidate> cs = run(composite_rule("matmul_relu", pattern_rule("mm", p)), g, b);
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_EQ(names_of(g, cs[0].nodes), "matmul,relu");
  EXPECT_EQ(cs[0].rule_name, "matmul_relu");
  // The predicate and the backend's accepts() can both say no.
  EXPECT_TRUE(
      run(pattern_rule("mm", p, [](const Graph&, const Match&) { return false; }), g, b).empty());
  b.accept_fn = [](const SubGraph& sg) { return sg.size() == 1 ? Status() : unimplemented("no"); };
  EXPECT_TRUE(run(composite_rule("matmul_relu", pattern_rule("mm", p)), g, b).empty());
  // A backend without MatMul has no match.
  FakeBackend no_mm("none", FusionStyle::kNone, {"Relu"});
  EXPECT_TRUE(run(pattern_rule("mm", p), g, no_mm).empty());
}

TEST(Rules, ClaimedChainsBecomeComposites) {
  Graph g = constants();
  FakeBackend b("none", FusionStyle::kNone, kAllOps);
  b.claimed = {"MatMul", "MatMul+Relu", "Conv+Relu"};
  b.accept_fn = [](const SubGraph& sg) {
    return sg.size() == 1 || sg.label() == "MatMul+Relu" ? Status() : unimplemented("no");
  };
  std::vector<Candidate> cs = run(rules_for(b), g, b);
  EXPECT_EQ(name_sets(g, cs), (Names{"reshape", "matmul", "relu", "matmul,relu"}));
  EXPECT_EQ(cs.back().rule_name, "MatMul+Relu");
  EXPECT_FALSE(chain_pattern("Relu").has_value());
  ASSERT_TRUE(chain_pattern("Conv+Add+Relu").has_value());
}

TEST(Rules, OpByKindLimitsKinds) {
  Graph g = constants();
  FakeBackend b("none", FusionStyle::kNone, kAllOps);
  EXPECT_EQ(name_sets(g, run(op_by_kind_rule(OpKind::kInjective), g, b)),
            (Names{"reshape", "relu"}));
}

TEST(Rules, UnionRemovesDuplicates) {
  Graph g = diamond();
  FakeBackend b("none", FusionStyle::kNone, kAllOps);
  std::vector<Candidate> cs =
      run(union_rule({op_by_kind_rule(), op_by_kind_rule(), host_rule()}), g, b);
  EXPECT_EQ(cs.size(), 4u);
}

TEST(Rules, HostRuleCoversEveryNodeAndCandidatesForAddsIt) {
  Graph g = diamond();
  FakeBackend b("tvm", FusionStyle::kTvmLike, {"Neg", "Exp"});
  EXPECT_EQ(name_sets(g, run(rules_for(ref_backend()), g, ref_backend())),
            (Names{"relu", "neg", "exp", "add"}));
  std::vector<Candidate> cs = candidates_for(g, {&b, &ref_backend()});
  int on_ref = 0, on_b = 0;
  for (const Candidate& c : cs) (c.backend == &ref_backend() ? on_ref : on_b)++;
  EXPECT_EQ(on_ref, 4);
  EXPECT_EQ(on_b, 3);  // neg, exp, {neg, exp}
}

TEST(Rules, CombineHonoursItsCandidateCap) {
  Graph g = double_residual();
  FakeBackend b("tvm", FusionStyle::kTvmLike, kAllOps);
  EXPECT_EQ(run(combine_rule(op_by_kind_rule(), tvm_combiners(), {0, 7}), g, b).size(), 7u);
}

TEST(Rules, RuleTreesPrint) {
  FakeBackend b("tvm", FusionStyle::kTvmLike, kAllOps);
  std::string s = rules_for(b)->to_string();
  EXPECT_NE(s.find("only_valid(combine(op_by_kind(opaque)"), std::string::npos) << s;
  EXPECT_NE(s.find("exits<=1"), std::string::npos) << s;
}

}  // namespace
}  // namespace tessera
