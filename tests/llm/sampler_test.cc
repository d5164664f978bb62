#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "llm/sampler.h"

namespace tessera::llm {
namespace {

std::vector<float> logits_of(std::initializer_list<float> l) { return std::vector<float>(l); }

TEST(Sampler, GreedyPicksTheArgmax) {
  SamplingParams p;
  p.temperature = 0;
  Sampler s(p);
  const auto l = logits_of({0.1f, 2.5f, -1.0f, 2.4f});
  EXPECT_EQ(s.sample(l.data(), 4, {}), 1);
}

TEST(Sampler, SameSeedSameDrawsOtherSeedOtherDraws) {
  std::vector<float> l(50);
  for (size_t i = 0; i < l.size(); ++i) l[i] = std::sin(static_cast<float>(i)) * 2;
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  auto draws = [&](uint64_t seed) {
    p.seed = seed;
    Sampler s(p);
    std::vector<int32_t> d;
    for (int i = 0; i < 64; ++i) d.push_back(s.sample(l.data(), 50, {}));
    return d;
  };
  EXPECT_EQ(draws(1), draws(1));
  EXPECT_NE(draws(1), draws(2));
}

// At temperature 1 with no filtering, frequencies follow the softmax (chi-square style bound).
TEST(Sampler, FrequenciesFollowSoftmax) {
  const auto l = logits_of({1.0f, 0.0f, -0.5f, 2.0f, 0.5f});
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = 42;
  Sampler s(p);
  const int n = 40000;
  std::map<int32_t, int> counts;
  for (int i = 0; i < n; ++i) ++counts[s.sample(l.data(), 5, {})];
  double z = 0;
  for (float v : l) z += std::exp(v);
  for (int i = 0; i < 5; ++i) {
    const double expect = std::exp(l[i]) / z;
    const double sd = std::sqrt(expect * (1 - expect) / n);
    EXPECT_NEAR(counts[i] / static_cast<double>(n), expect, 5 * sd) << "token " << i;
  }
}

TEST(Sampler, TopKTopPAndMinPKeepOnlyTheHead) {
  const auto l = logits_of({3.0f, 2.9f, 0.0f, -1.0f, 1.0f, 2.95f});
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 7;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.top_k = 2;
  Sampler k2(p);
  for (int i = 0; i < 500; ++i) {
    const int32_t t = k2.sample(l.data(), 6, {});
    EXPECT_TRUE(t == 0 || t == 5) << t;
  }
  p.top_k = 0;
  p.min_p = 0.5f;  // keeps p >= half the top: tokens 0, 5, 1
  Sampler mp(p);
  for (int i = 0; i < 500; ++i) {
    const int32_t t = mp.sample(l.data(), 6, {});
    EXPECT_TRUE(t == 0 || t == 5 || t == 1) << t;
  }
  p.min_p = 0.0f;
  p.top_p = 0.3f;  // the top token alone holds ~0.3 of the mass: only it, sometimes the second
  Sampler tp(p);
  std::map<int32_t, int> seen;
  for (int i = 0; i < 500; ++i) ++seen[tp.sample(l.data(), 6, {})];
  EXPECT_LE(seen.size(), 2u);
  EXPECT_GT(seen[0], 0);
}

TEST(Sampler, RepeatAndPresencePenaltiesSteerAwayFromHistory) {
  const auto l = logits_of({2.0f, 1.9f, 0.0f});
  SamplingParams p;
  p.temperature = 0;
  p.repeat_penalty = 1.5f;  // 2.0 / 1.5 < 1.9
  EXPECT_EQ(Sampler(p).sample(l.data(), 3, {0}), 1);
  EXPECT_EQ(Sampler(p).sample(l.data(), 3, {2}), 0);
  p.repeat_penalty = 1.0f;
  p.presence_penalty = 0.5f;
  EXPECT_EQ(Sampler(p).sample(l.data(), 3, {0}), 1);
  p.presence_penalty = 0;
  p.frequency_penalty = 0.04f;  // two uses: 2.0 - 0.08 < 1.9
  EXPECT_EQ(Sampler(p).sample(l.data(), 3, {0}), 0);
  EXPECT_EQ(Sampler(p).sample(l.data(), 3, {0, 0, 0}), 1);
  p.repeat_last_n = 1;  // only the last token counts
  EXPECT_EQ(Sampler(p).sample(l.data(), 3, {0, 0, 2}), 0);
}

}  // namespace
}  // namespace tessera::llm
