#include "runtime/session.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace tessera {
namespace {

Tensor random_floats(std::vector<int64_t> dims, uint64_t seed) {
  Tensor t(DType::kFloat32, std::move(dims));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

// x -> (Neg -> Relu) x depth -> y
Graph chain_graph(int depth, int64_t n) {
  Graph g;
  g.opsets[""] = 17;
  int cur = g.add_input("x", TensorType::of(DType::kFloat32, {n}));
  for (int i = 0; i < depth; ++i) {
    int a = g.add_value("neg" + std::to_string(i));
    int b = g.add_value(i + 1 == depth ? "y" : "relu" + std::to_string(i));
    g.add_node("Neg", {cur}, {a});
    g.add_node("Relu", {a}, {b});
    cur = b;
  }
  g.mark_output(cur);
  TESSERA_CHECK(g.finalize().ok());
  return g;
}

TEST(Session, ChainComputesAndReusesBuffersByLiveness) {
  const int64_t n = 4096;  // 16 KiB per value
  const int depth = 8;     // 16 intermediate values
  auto s = Session::from_graph(chain_graph(depth, n));
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  Tensor x = random_floats({n}, 1);
  auto out = (*s)->run({{"x", x}});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const Tensor& y = out->at("y");
  ASSERT_EQ(y.dims(), std::vector<int64_t>{n});
  for (int64_t i = 0; i < n; ++i) {
    float v = x.data<float>()[i];
    for (int k = 0; k < depth; ++k) v = std::max(-v, 0.0f);
    ASSERT_EQ(y.data<float>()[i], v) << i;
  }
  // At most two values are alive at once in a chain: the peak is far below 16 buffers.
  const RunStats& st = (*s)->last_run_stats();
  EXPECT_LE(st.peak_bytes, 2 * n * sizeof(float) + 256);
  EXPECT_LE(st.reserved_bytes, 3 * n * sizeof(float) + 256);
  EXPECT_EQ(st.nodes_run, 2 * depth);

  // A second run reuses the pool and gives the same answer.
  auto again = (*s)->run({{"x", x}});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(std::memcmp(again->at("y").raw_data(), y.raw_data(), y.nbytes()), 0);
}

TEST(Session, RejectsBadInputs) {
  auto s = Session::from_graph(chain_graph(1, 8));
  ASSERT_TRUE(s.ok());
  auto missing = (*s)->run({});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("missing input 'x'"), std::string::npos);
  auto unknown = (*s)->run({{"x", random_floats({8}, 2)}, {"z", random_floats({8}, 3)}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("'z'"), std::string::npos);
  auto wrong_dtype = (*s)->run({{"x", Tensor(DType::kInt32, {8})}});
  ASSERT_FALSE(wrong_dtype.ok());
  EXPECT_NE(wrong_dtype.status().message().find("float32"), std::string::npos);
  auto wrong_shape = (*s)->run({{"x", random_floats({9}, 4)}});
  ASSERT_FALSE(wrong_shape.ok());
  EXPECT_NE(wrong_shape.status().message().find("shape"), std::string::npos);
}

TEST(Session, UnknownOpIsAClearError) {
  Graph g;
  int x = g.add_input("x", TensorType::of(DType::kFloat32, {2}));
  int y = g.add_value("y");
  g.add_node("NoSuchOp", {x}, {y}, {}, "mystery");
  g.mark_output(y);
  ASSERT_TRUE(g.finalize().ok());
  auto s = Session::from_graph(std::move(g));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.status().message().find("NoSuchOp 'mystery'"), std::string::npos);
}

// MatMul + Add on several shapes: one and two threads give identical results.
TEST(Session, ThreadCountDoesNotChangeResults) {
  for (auto [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{1, 7, 5}, {33, 17, 9}, {64, 64, 65}}) {
    Graph g;
    g.opsets[""] = 17;
    int a = g.add_input("a", TensorType::of(DType::kFloat32, {m, k}));
    int b = g.add_constant("b", random_floats({k, n}, 5));
    int c = g.add_constant("c", random_floats({n}, 6));
    int ab = g.add_value("ab");
    int y = g.add_value("y");
    g.add_node("MatMul", {a, b}, {ab});
    g.add_node("Add", {ab, c}, {y});
    g.mark_output(y);
    ASSERT_TRUE(g.finalize().ok());
    Graph g2 = g;
    SessionOptions one, two;
    two.threads = 2;
    auto s1 = Session::from_graph(std::move(g), one);
    auto s2 = Session::from_graph(std::move(g2), two);
    ASSERT_TRUE(s1.ok() && s2.ok());
    Tensor in = random_floats({m, k}, 7);
    auto o1 = (*s1)->run({{"a", in}});
    auto o2 = (*s2)->run({{"a", in}});
    ASSERT_TRUE(o1.ok() && o2.ok());
    const Tensor& y1 = o1->at("y");
    ASSERT_EQ(y1.dims(), (std::vector<int64_t>{m, n}));
    // Against a plain loop in double.
    const Tensor& bt = *(*s1)->graph().value(b).constant;
    const Tensor& ct = *(*s1)->graph().value(c).constant;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double ref = ct.data<float>()[j];
        for (int64_t p = 0; p < k; ++p) ref += double(in.data<float>()[i * k + p]) * bt.data<float>()[p * n + j];
        ASSERT_NEAR(y1.data<float>()[i * n + j], ref, 1e-4 * (1 + std::fabs(ref)));
      }
    EXPECT_EQ(std::memcmp(y1.raw_data(), o2->at("y").raw_data(), y1.nbytes()), 0);
  }
}

}  // namespace
}  // namespace tessera
