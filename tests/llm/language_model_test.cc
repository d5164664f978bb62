// The LLaMA graph against a separately written forward pass, the KV cache against recomputation,
// native kernels against the reference ones, and quantized weights against float32.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "llm/language_model.h"
#include "llm/model_writer.h"
#include "llm/naive_forward.h"
#include "llm/test_weights.h"

namespace tessera::llm {
namespace {

ModelConfig test_config(int64_t kv_heads = 2) {
  ModelConfig c;
  c.hidden = 64;
  c.ffn_hidden = 96;
  c.layers = 2;
  c.heads = 4;
  c.kv_heads = kv_heads;
  c.context_length = 128;
  c.vocab_size = 300;
  c.rope_theta = 10000.0f;
  c.norm_eps = 1e-5f;
  return c;
}

using testing::make_weights;
using testing::TestWeights;

std::unique_ptr<LanguageModel> make_model(const ModelConfig& c, const WeightMap& w, const std::string& backend,
                                          int threads = 1, int64_t block_size = 4, int64_t cache_tokens = 256) {
  ModelOptions o;
  o.backend = backend;
  o.threads = threads;
  o.kv_block_size = block_size;
  o.kv_cache_tokens = cache_tokens;
  auto m = LanguageModel::create(c, w, nullptr, o);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return m.ok() ? std::move(*m) : nullptr;
}

std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint64_t seed) {
  std::vector<int32_t> t(n);
  uint64_t s = seed * 2654435761u + 1;
  for (auto& x : t) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<int32_t>((s >> 33) % vocab);
  }
  return t;
}

// max |a - b| / max |b|: relative to the logits' scale.
double relative_error(const float* a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  return diff / std::max(scale, 1e-30);
}

std::vector<float> row(const Tensor& logits, int64_t r) {
  const int64_t v = logits.dim(1);
  return std::vector<float>(logits.data<float>() + r * v, logits.data<float>() + (r + 1) * v);
}

ModelConfig gpt2_config() {
  ModelConfig c = test_config(4);
  c.arch = Architecture::kGpt2;
  c.ffn_hidden = 128;
  c.context_length = 64;
  c.tied_embeddings = true;
  return c;
}

// Prefill `split` tokens, then decode the rest one by one; every step's logits against naive.
void expect_matches_naive(const ModelConfig& c, const std::string& backend, int threads) {
  const TestWeights tw = make_weights(c, quant::QType::kF32, 7);
  auto m = make_model(c, tw.weights, backend, threads);
  ASSERT_TRUE(m);
  const std::vector<int32_t> tokens = random_tokens(13, c.vocab_size, 3);
  const auto want = c.arch == Architecture::kGpt2 ? testing::naive_gpt2_logits(c, tw.floats, tokens)
                                                  : testing::naive_llama_logits(c, tw.floats, tokens);
  SequenceBlocks seq;
  const size_t split = 6;
  auto first = m->step({{&seq, std::vector<int32_t>(tokens.begin(), tokens.begin() + split), true}});
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  EXPECT_LT(relative_error(first->data<float>(), want[split - 1]), 1e-4) << backend << " prefill";
  for (size_t t = split; t < tokens.size(); ++t) {
    auto logits = m->step({{&seq, {tokens[t]}, true}});
    ASSERT_TRUE(logits.ok()) << logits.status().to_string();
    EXPECT_LT(relative_error(logits->data<float>(), want[t]), 1e-4) << backend << " decode at " << t;
  }
  EXPECT_EQ(seq.length, static_cast<int64_t>(tokens.size()));
}

TEST(LlamaGraph, ReferenceKernelsMatchNaiveForward) { expect_matches_naive(test_config(2), "ref", 1); }
TEST(LlamaGraph, NativeKernelsMatchNaiveForward) { expect_matches_naive(test_config(2), "native", 2); }
TEST(LlamaGraph, MultiHeadAttentionWithoutGqaMatchesNaive) { expect_matches_naive(test_config(4), "native", 1); }
TEST(LlamaGraph, MultiQueryAttentionMatchesNaive) { expect_matches_naive(test_config(1), "native", 2); }
TEST(Gpt2Graph, ReferenceKernelsMatchNaiveForward) { expect_matches_naive(gpt2_config(), "ref", 1); }
TEST(Gpt2Graph, NativeKernelsMatchNaiveForward) { expect_matches_naive(gpt2_config(), "native", 2); }

// One step mixing a prefill chunk of one sequence and a decode token of another gives each the
// logits it gets alone; chunked prefill gives the logits of a whole prefill.
TEST(LlamaGraph, MixedBatchAndChunkedPrefillEqualSeparateRuns) {
  const ModelConfig c = test_config();
  const TestWeights tw = make_weights(c, quant::QType::kF32, 11);
  const std::vector<int32_t> a = random_tokens(9, c.vocab_size, 1), b = random_tokens(7, c.vocab_size, 2);
  auto alone = make_model(c, tw.weights, "native");
  SequenceBlocks sa, sb;
  auto la = alone->step({{&sa, a, true}});
  auto lb = alone->step({{&sb, b, true}});
  ASSERT_TRUE(la.ok() && lb.ok());
  auto mixed = make_model(c, tw.weights, "native");
  SequenceBlocks ma, mb;
  // b's first 6 tokens alone, then one step: a's first 4 tokens (no logits), b's 7th token.
  ASSERT_TRUE(mixed->step({{&mb, std::vector<int32_t>(b.begin(), b.begin() + 6), true}}).ok());
  auto step = mixed->step({{&ma, std::vector<int32_t>(a.begin(), a.begin() + 4), false}, {&mb, {b[6]}, true}});
  ASSERT_TRUE(step.ok()) << step.status().to_string();
  ASSERT_EQ(step->dim(0), 1);
  EXPECT_LT(relative_error(step->data<float>(), row(*lb, 0)), 1e-5);
  // a continues in chunks of 3 and 2.
  ASSERT_TRUE(mixed->step({{&ma, std::vector<int32_t>(a.begin() + 4, a.begin() + 7), true}}).ok());
  auto last = mixed->step({{&ma, std::vector<int32_t>(a.begin() + 7, a.end()), true}});
  ASSERT_TRUE(last.ok());
  EXPECT_LT(relative_error(last->data<float>(), row(*la, 0)), 1e-5);
}

TEST(LlamaGraph, RefusesOverflowAndFullCacheWithoutChangingState) {
  const ModelConfig c = test_config();
  const TestWeights tw = make_weights(c, quant::QType::kF32, 5);
  auto m = make_model(c, tw.weights, "native", 1, 4, 16);  // 4 blocks of 4
  SequenceBlocks s1, s2;
  ASSERT_TRUE(m->step({{&s1, random_tokens(10, c.vocab_size, 1), true}}).ok());
  EXPECT_EQ(m->cache().pool().free_count(), 1);
  auto full = m->step({{&s2, random_tokens(8, c.vocab_size, 2), true}});
  EXPECT_FALSE(full.ok());
  EXPECT_NE(full.status().message().find("KV cache is full"), std::string::npos) << full.status().message();
  EXPECT_EQ(m->cache().pool().free_count(), 1);
  EXPECT_TRUE(s2.blocks.empty());
  auto bad = m->step({{&s2, {static_cast<int32_t>(c.vocab_size)}, true}});
  EXPECT_FALSE(bad.ok());
  SequenceBlocks s3;
  auto too_long = make_model(c, tw.weights, "native")->step({{&s3, random_tokens(c.context_length + 1, c.vocab_size, 3), true}});
  EXPECT_FALSE(too_long.ok());
  EXPECT_NE(too_long.status().message().find("context length"), std::string::npos);
}

// Next-token distributions with quantized weights against float32 weights (same seed) on fixed
// prompts: mean KL(f32 || quantized), reported. Native kernels against the reference kernels on
// the same quantized weights.
double softmax_kl(const std::vector<float>& p_logits, const float* q_logits) {
  const size_t n = p_logits.size();
  auto log_softmax = [n](auto get) {
    double mx = -1e300;
    for (size_t i = 0; i < n; ++i) mx = std::max(mx, static_cast<double>(get(i)));
    double sum = 0;
    for (size_t i = 0; i < n; ++i) sum += std::exp(get(i) - mx);
    std::vector<double> l(n);
    for (size_t i = 0; i < n; ++i) l[i] = get(i) - mx - std::log(sum);
    return l;
  };
  const auto lp = log_softmax([&](size_t i) { return p_logits[i]; });
  const auto lq = log_softmax([&](size_t i) { return q_logits[i]; });
  double kl = 0;
  for (size_t i = 0; i < n; ++i) kl += std::exp(lp[i]) * (lp[i] - lq[i]);
  return kl;
}

void check_quantized(quant::QType type, double max_kl, double native_vs_ref) {
  ModelConfig c = test_config();
  const TestWeights f32 = make_weights(c, quant::QType::kF32, 21);
  const TestWeights q = make_weights(c, type, 21);
  auto mf = make_model(c, f32.weights, "native");
  auto mq = make_model(c, q.weights, "native");
  auto mr = make_model(c, q.weights, "ref");
  double kl_sum = 0;
  const int prompts = 4;
  for (int p = 0; p < prompts; ++p) {
    const std::vector<int32_t> tokens = random_tokens(10 + p, c.vocab_size, 100 + p);
    SequenceBlocks s1, s2, s3;
    auto lf = mf->step({{&s1, tokens, true}});
    auto lq = mq->step({{&s2, tokens, true}});
    auto lr = mr->step({{&s3, tokens, true}});
    ASSERT_TRUE(lf.ok() && lq.ok() && lr.ok());
    kl_sum += softmax_kl(row(*lf, 0), lq->data<float>());
    EXPECT_LT(relative_error(lq->data<float>(), row(*lr, 0)), native_vs_ref) << quant::qtype_name(type);
    mf->cache().release(s1);
    mq->cache().release(s2);
    mr->cache().release(s3);
  }
  const double kl = kl_sum / prompts;
  std::printf("[ kl ] %s vs f32: mean KL %.3g over %d prompts\n", quant::qtype_name(type), kl, prompts);
  ::testing::Test::RecordProperty(std::string("kl_") + quant::qtype_name(type), std::to_string(kl));
  EXPECT_LT(kl, max_kl);
  EXPECT_GT(kl, 0.0);  // the weights really are quantized
}

TEST(LlamaGraph, Q8_0WeightsStayCloseToFloat) { check_quantized(quant::QType::kQ8_0, 1e-3, 2e-2); }
// Hidden 64 is a hard case for 4 bits (one scale per 32 of 64 inputs): KL measured 0.18 here.
TEST(LlamaGraph, Q4_0WeightsStayCloseToFloat) { check_quantized(quant::QType::kQ4_0, 0.5, 2e-2); }
TEST(LlamaGraph, F16WeightsStayCloseToFloat) { check_quantized(quant::QType::kF16, 1e-5, 1e-4); }

TEST(LlamaGraph, RopeScalingChangesFrequencies) {
  ModelConfig c = test_config();
  const std::vector<float> base = rope_inverse_frequencies(c);
  EXPECT_FLOAT_EQ(base[0], 1.0f);
  EXPECT_NEAR(base[1], std::pow(10000.0, -2.0 / 16), 1e-7);
  c.rope_scaling = RopeScaling::kLinear;
  c.rope_scale_factor = 4.0f;
  EXPECT_FLOAT_EQ(rope_inverse_frequencies(c)[3], base[3] / 4.0f);
  c.rope_scaling = RopeScaling::kLlama3;
  c.rope_scale_factor = 8.0f;
  c.rope_original_context = 64;
  c.rope_low_freq_factor = 1.0f;
  c.rope_high_freq_factor = 4.0f;
  const std::vector<float> l3 = rope_inverse_frequencies(c);
  EXPECT_FLOAT_EQ(l3[0], base[0]);  // wavelength 2*pi < 16: kept
  EXPECT_FLOAT_EQ(l3.back(), base.back() / 8.0f);  // the longest wavelength: scaled
}

int64_t count_ops(const LanguageModel& m, const std::string& op) {
  const Graph& g = m.session().graph();
  int64_t n = 0;
  for (int i = 0; i < g.num_nodes(); ++i) n += g.node(i).op_type == op;
  return n;
}

// Joined q/k/v and gate/up matrices (the default) against the separate ones: one QMatMul fewer
// per join, and each output feature is the same dot product, so the logits are identical.
TEST(LlamaGraph, FusedProjectionsGiveIdenticalLogits) {
  ModelConfig c = test_config(2);
  c.hidden = 128;  // whole 128-value groups: Q4_0 / Q8_0 run regrouped on AVX-512
  c.ffn_hidden = 256;
  for (quant::QType type : {quant::QType::kF32, quant::QType::kQ8_0, quant::QType::kQ4_0}) {
    for (const std::string backend : {"native", "ref"}) {
      SCOPED_TRACE(std::string(quant::qtype_name(type)) + " " + backend);
      const TestWeights tw = make_weights(c, type, 11);
      ModelOptions o;
      o.backend = backend;
      o.threads = 2;
      o.kv_block_size = 4;
      o.kv_cache_tokens = 64;
      auto fused = LanguageModel::create(c, tw.weights, nullptr, o);
      o.fuse_projections = false;
      auto separate = LanguageModel::create(c, tw.weights, nullptr, o);
      ASSERT_TRUE(fused.ok() && separate.ok());
      EXPECT_EQ(count_ops(**fused, "QMatMul"), 4 * c.layers + 1);
      EXPECT_EQ(count_ops(**separate, "QMatMul"), 7 * c.layers + 1);
      EXPECT_EQ((*fused)->weight_bytes(), (*separate)->weight_bytes());
      const std::vector<int32_t> tokens = random_tokens(12, c.vocab_size, 5);
      SequenceBlocks s1, s2;
      for (size_t at = 0; at < tokens.size();) {
        const size_t n = at == 0 ? 7 : 1;  // a prefill chunk, then decode steps
        const std::vector<int32_t> part(tokens.begin() + at, tokens.begin() + at + n);
        auto a = (*fused)->step({{&s1, part, true}});
        auto b = (*separate)->step({{&s2, part, true}});
        ASSERT_TRUE(a.ok() && b.ok());
        for (int64_t i = 0; i < c.vocab_size; ++i) ASSERT_EQ(a->data<float>()[i], b->data<float>()[i]) << "at " << at << " logit " << i;
        at += n;
      }
    }
  }
}

TEST(LlamaGraph, MissingOrMisshapedWeightIsAClearError) {
  const ModelConfig c = test_config();
  TestWeights tw = make_weights(c, quant::QType::kF32, 1);
  tw.weights.erase("blk.1.ffn_up.weight");
  ModelOptions o;
  auto m = LanguageModel::create(c, tw.weights, nullptr, o);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("blk.1.ffn_up.weight"), std::string::npos) << m.status().message();
  TestWeights tw2 = make_weights(c, quant::QType::kF32, 1);
  tw2.weights["blk.0.attn_k.weight"].dims = {64, 64};
  auto m2 = LanguageModel::create(c, tw2.weights, nullptr, o);
  ASSERT_FALSE(m2.ok());
  EXPECT_NE(m2.status().message().find("attn_k"), std::string::npos) << m2.status().message();
}

}  // namespace
}  // namespace tessera::llm
