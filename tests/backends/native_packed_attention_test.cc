// Multi-head self-attention from one packed QKV projection, as PaddlePaddle exports ViT / SVTR
// blocks (Reshape, Transpose, three Slice + Squeeze, a scaling Mul, MatMul, Softmax, MatMul,
// Transpose, Reshape): the native backend's rules propose the fifteen nodes as one candidate, the
// kernel matches the reference running them one by one (Slice and Squeeze of opsets 9, 11 and 17),
// and near misses (another perm, the slices in another order, a Softmax over another axis) are
// refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "backends/backend.h"
#include "backends/native/attention_fusion.h"
#include "backends/native/native_compile.h"
#include "backends/native_kernel_runner.h"
#include "backends/test_graph.h"
#include "partition/rules.h"

namespace tessera {
const Backend& native_backend();

namespace {

using testing_graph::TestGraph;
using testing_native::expect_matches_ref;
using testing_native::whole;

struct Form {
  int64_t batch, tokens, heads, head_dim;
  int opset = 17;
  int scale = 1;  // 0: no Mul; 1: Mul(q, scale); 2: Mul(scale, q)
  std::vector<int64_t> split_perm = {2, 0, 3, 1, 4};
  std::vector<int> order = {0, 1, 2};  // which slice q, k and v take
  int64_t softmax_axis = 3;
};

Tensor ints(const std::vector<int64_t>& v) {
  Tensor t(DType::kInt64, {static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  return t;
}

TestGraph attention(const Form& f) {
  TestGraph t;
  t.opset = f.opset;
  const int64_t width = f.heads * f.head_dim;
  const int qkv = t.input({f.batch, f.tokens, 3 * width});
  const int unpacked =
      t.op("Reshape", {qkv, t.constant(ints({f.batch, f.tokens, 3, f.heads, f.head_dim}))});
  const int split = t.op("Transpose", {unpacked}, {{"perm", Attribute::of_ints(f.split_perm)}});
  auto part = [&](int64_t i) {
    const int slice =
        f.opset < 10 ? t.op("Slice", {split},
                            {{"starts", Attribute::of_ints({i})},
                             {"ends", Attribute::of_ints({i + 1})},
                             {"axes", Attribute::of_ints({0})}})
                     : t.op("Slice", {split, t.constant(ints({i})), t.constant(ints({i + 1})),
                                      t.constant(ints({0}))});
    return f.opset < 13 ? t.op("Squeeze", {slice}, {{"axes", Attribute::of_ints({0})}})
                        : t.op("Squeeze", {slice, t.constant(ints({0}))});
  };
  int q = part(f.order[0]);
  const int k = part(f.order[1]), v = part(f.order[2]);
  const int scale = t.constant(Tensor::scalar<float>(1.0f / std::sqrt(static_cast<float>(f.head_dim))));
  if (f.scale == 1) q = t.op("Mul", {q, scale});
  if (f.scale == 2) q = t.op("Mul", {scale, q});
  const int keys_t = t.op("Transpose", {k}, {{"perm", Attribute::of_ints({0, 1, 3, 2})}});
  const int p = t.op("Softmax", {t.op("MatMul", {q, keys_t})}, {{"axis", Attribute::of_int(f.softmax_axis)}});
  const int heads_back =
      t.op("Transpose", {t.op("MatMul", {p, v})}, {{"perm", Attribute::of_ints({0, 2, 1, 3})}});
  t.finish({t.op("Reshape", {heads_back, t.constant(ints({f.batch, f.tokens, width}))})});
  return t;
}

std::string describe(const Form& f) {
  return "B " + std::to_string(f.batch) + " N " + std::to_string(f.tokens) + " H " +
         std::to_string(f.heads) + " D " + std::to_string(f.head_dim) + " opset " +
         std::to_string(f.opset) + " scale form " + std::to_string(f.scale);
}

TEST(NativePackedAttention, OneKernelMatchesTheNodesOneByOne) {
  const std::vector<Form> forms = {
      {1, 40, 8, 15, 9},      // PP-OCR rec's SVTR neck, its opset
      {2, 7, 3, 5, 11, 2},    // two batches, Mul(scale, q)
      {1, 50, 2, 33, 17, 0},  // head_dim over two vectors, no scaling
      {3, 17, 4, 16},
  };
  for (const Form& f : forms) {
    const TestGraph t = attention(f);
    ASSERT_EQ(t.g.num_nodes(), f.scale ? 15 : 14) << describe(f);
    const SubGraph sg = whole(t);
    ASSERT_TRUE(native::native_accepts(sg).ok()) << describe(f) << ": " << native::native_accepts(sg).to_string();
    Result<native::PackedAttention> a = native::match_packed_attention(sg);
    ASSERT_TRUE(a.ok()) << describe(f);
    EXPECT_EQ(a->heads, f.heads);
    EXPECT_EQ(a->head_dim, f.head_dim);
    expect_matches_ref(t, 1e-5, describe(f));
  }
}

TEST(NativePackedAttention, NearMissesAreRefused) {
  struct Bad {
    Form f;
    const char* why;
  };
  Form perm{2, 6, 3, 4};
  perm.split_perm = {2, 0, 1, 3, 4};  // [3, B, N, H, D]: tokens and heads swapped
  Form order{2, 6, 3, 4};
  order.order = {1, 0, 2};  // q from the keys' slice
  Form axis{2, 6, 3, 4};
  axis.softmax_axis = 2;  // over the queries
  for (const Bad& b : {Bad{perm, "another split perm"}, Bad{order, "q and k swapped"},
                       Bad{axis, "Softmax over the queries"}}) {
    const TestGraph t = attention(b.f);
    EXPECT_FALSE(native::native_accepts(whole(t)).ok()) << b.why;
  }
}

TEST(NativePackedAttention, TheRulesProposeTheWholeGroup) {
  const TestGraph t = attention(Form{1, 40, 8, 15, 9});
  int whole_groups = 0;
  for (const Candidate& c : rules_for(native_backend())->candidates(t.g, native_backend()))
    if (c.nodes.count() == t.g.num_nodes()) ++whole_groups;
  EXPECT_EQ(whole_groups, 1);
}

}  // namespace
}  // namespace tessera
