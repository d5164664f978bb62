// The differential harness: every pattern every backend claims, in several shapes, compiled as
// one subgraph on the backend and compared with the reference kernels (1 and 2 threads).
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>

#include "backends/backend.h"
#include "backends/harness.h"
#include "runtime/executor.h"

namespace tessera {
namespace {

using harness::Case;

// Runs the whole case graph as one partition on `backend` (nullptr: reference kernels).
Result<Tensor> run_case(const Case& c, const Backend* backend, int threads) {
  std::vector<Partition> parts;
  if (backend) parts.push_back({NodeSet::all(c.graph.num_nodes()), backend});
  CompileOptions opts;
  opts.threads = threads;
  TESSERA_ASSIGN_OR_RETURN(GraphExecutor exec, GraphExecutor::create(c.graph, parts, opts));
  BufferPool buffers;
  ThreadPool pool(threads);
  RunStats stats;
  TESSERA_ASSIGN_OR_RETURN(std::vector<Tensor> out, exec.run(c.inputs, {}, buffers, &pool, stats));
  return out.at(0);
}

// Whether the backend takes every node of the case and the case as one group; the reason if not.
Status takes(const Backend& b, const Case& c) {
  for (int n = 0; n < c.graph.num_nodes(); ++n) TESSERA_RETURN_IF_ERROR(b.supports(c.graph, n));
  return b.accepts(SubGraph(c.graph, NodeSet::all(c.graph.num_nodes())));
}

struct Claim {
  std::string backend, pattern;
};

std::vector<Claim> all_claims() {
  std::vector<Claim> v;
  for (const Backend* b : all_backends())
    for (const std::string& p : b->claimed_patterns()) v.push_back({b->name(), p});
  if (v.empty()) v.push_back({"none", "none"});  // keeps the suite valid in a build without backends
  return v;
}

class BackendHarness : public testing::TestWithParam<Claim> {};

TEST_P(BackendHarness, MatchesReference) {
  const Claim& claim = GetParam();
  const Backend* b = find_backend(claim.backend);
  if (!b) GTEST_SKIP() << "no backend claims anything in this build";
  if (Status st = b->available(); !st.ok()) GTEST_SKIP() << claim.backend << " unavailable: " << st.message();
  int ran = 0;
  for (int v = 0; v < harness::kVariants; ++v) {
    auto c = harness::build_case(claim.pattern, v, 42);
    ASSERT_TRUE(c.ok()) << "claimed pattern '" << claim.pattern << "' has no harness case: " << c.status().to_string();
    if (Status st = takes(*b, *c); !st.ok()) {
      std::printf("  [%s] %s: not taken (%s)\n", claim.backend.c_str(), c->name.c_str(), st.message().c_str());
      continue;
    }
    auto want = run_case(*c, nullptr, 1);
    ASSERT_TRUE(want.ok()) << c->name << ": reference failed: " << want.status().to_string();
    for (int threads : {1, 2}) {
      auto got = run_case(*c, b, threads);
      ASSERT_TRUE(got.ok()) << c->name << " on " << claim.backend << ": " << got.status().to_string();
      double err = harness::relative_error(*got, *want);
      EXPECT_LE(err, c->tolerance) << c->name << " on " << claim.backend << " with " << threads
                                   << " thread(s): max|a-b|/max|b| = " << err;
    }
    ++ran;
  }
  EXPECT_GE(ran, harness::kMinVariants) << claim.backend << " claims '" << claim.pattern << "' but takes only " << ran
                                        << " of its " << harness::kVariants << " harness shapes";
}

std::string claim_name(const testing::TestParamInfo<Claim>& info) {
  std::string s = info.param.backend + "_" + info.param.pattern;
  for (char& ch : s)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(Claims, BackendHarness, testing::ValuesIn(all_claims()), claim_name);

// The harness itself: every op it knows builds all its shapes, and the reference runs them.
TEST(Harness, EveryKnownOpBuildsAndRunsOnReference) {
  const char* ops[] = {"Conv", "ConvTranspose", "MatMul", "Gemm", "MaxPool", "AveragePool", "GlobalAveragePool",
                       "GlobalMaxPool", "BatchNormalization", "Softmax", "LayerNormalization", "Concat", "Resize",
                       "ReduceMean", "ReduceSum", "ReduceMax", "Relu", "Clip", "HardSigmoid", "HardSwish",
                       "Sigmoid", "Tanh", "LeakyRelu", "Elu", "Exp", "Log", "Sqrt", "Abs", "Neg", "Erf", "Add",
                       "Sub", "Mul", "Div", "Max", "Min", "Pow", "PRelu"};
  for (const char* op : ops) {
    for (int v = 0; v < harness::kVariants; ++v) {
      auto c = harness::build_case(op, v, 1);
      ASSERT_TRUE(c.ok()) << op << " v" << v << ": " << c.status().to_string();
      auto out = run_case(*c, nullptr, 2);
      ASSERT_TRUE(out.ok()) << c->name << ": " << out.status().to_string();
      EXPECT_GT(out->numel(), 0) << c->name;
    }
  }
}

TEST(Harness, ChainsFeedEachOpIntoTheNext) {
  auto c = harness::build_case("Conv+Add+Relu", 0, 1);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  ASSERT_EQ(c->graph.num_nodes(), 3);
  EXPECT_EQ(c->graph.node(0).op_type, "Conv");
  EXPECT_EQ(c->graph.node(2).op_type, "Relu");
  // Relu reads Add's output, which reads Conv's.
  EXPECT_EQ(c->graph.value(c->graph.node(2).inputs[0]).producer, 1);
  EXPECT_EQ(c->graph.value(c->graph.node(1).inputs[0]).producer, 0);
  auto out = run_case(*c, nullptr, 1);
  ASSERT_TRUE(out.ok());
  for (int64_t k = 0; k < out->numel(); ++k) ASSERT_GE(out->data<float>()[k], 0.f);
}

TEST(Harness, UnknownOpsAndNonElementwiseTailsAreErrors) {
  EXPECT_FALSE(harness::build_case("NoSuchOp", 0, 1).ok());
  EXPECT_FALSE(harness::build_case("Relu+Conv", 0, 1).ok());
}

TEST(Harness, RelativeErrorSeesSmallChangesAndNaNMismatches) {
  Tensor a(DType::kFloat32, {4}), b(DType::kFloat32, {4});
  for (int k = 0; k < 4; ++k) a.data<float>()[k] = b.data<float>()[k] = static_cast<float>(k) - 1.5f;
  EXPECT_EQ(harness::relative_error(a, b), 0.0);
  a.data<float>()[2] += 1e-3f;
  EXPECT_NEAR(harness::relative_error(a, b), 1e-3 / 1.5, 1e-6);
  a.data<float>()[0] = std::nanf("");
  EXPECT_TRUE(std::isinf(harness::relative_error(a, b)));
  Tensor c(DType::kFloat32, {2, 2});
  EXPECT_TRUE(std::isinf(harness::relative_error(c, b)));
}

}  // namespace
}  // namespace tessera
