#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <map>
#include <numeric>
#include <random>

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

// OpenAI's presence / frequency penalties count generated tokens only: a prompt token is not
// penalized when the caller says where the generated tokens start; the repetition penalty still
// looks at the prompt.
TEST(Sampler, PresenceAndFrequencyCanSkipThePrompt) {
  const auto l = logits_of({2.0f, 1.9f, 0.0f});
  SamplingParams p;
  p.temperature = 0;
  p.repeat_last_n = 64;
  p.presence_penalty = 0.5f;
  EXPECT_EQ(Sampler(p).sample(l.data(), 3, {0, 2}), 1);     // prompt counted (generated_from 0)
  EXPECT_EQ(Sampler(p).sample(l.data(), 3, {0, 2}, 1), 0);  // token 0 is the prompt's
  EXPECT_EQ(Sampler(p).sample(l.data(), 3, {2, 0}, 1), 1);  // token 0 was generated
  p.presence_penalty = 0;
  p.frequency_penalty = 0.04f;  // three in the prompt, one generated: 2.0 - 0.04 > 1.9
  EXPECT_EQ(Sampler(p).sample(l.data(), 3, {0, 0, 0, 0}, 3), 0);
  EXPECT_EQ(Sampler(p).sample(l.data(), 3, {0, 0, 0, 0}, 0), 1);
  p.frequency_penalty = 0;
  p.repeat_penalty = 1.5f;  // the prompt's tokens still count for it
  EXPECT_EQ(Sampler(p).sample(l.data(), 3, {0, 2}, 2), 1);
}


// The sampler sorts only the head of the candidates that the cuts and the draw reach. A plain
// version that sorts the whole vocabulary first (the same formulas, the same random stream) must
// pick the same token every time, also when the draw walks hundreds of candidates deep (flat
// logits, high temperature) and across the head's growth steps.
int32_t sample_fully_sorted(const std::vector<float>& l, const SamplingParams& p, std::mt19937_64& rng, int64_t& rank) {
  const int64_t n = static_cast<int64_t>(l.size());
  std::vector<int32_t> ids(n);
  std::iota(ids.begin(), ids.end(), 0);
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
  const double inv_t = 1.0 / p.temperature;
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp((l[i] - l[ids[0]]) * inv_t);  // in id order, as the sampler
  std::vector<double> probs(n);
  for (int64_t i = 0; i < n; ++i) probs[i] = std::exp((l[ids[i]] - l[ids[0]]) * inv_t) / sum;
  int64_t keep = n;
  double cum = 0;
  for (int64_t i = 0; p.top_p < 1.0f && i < n; ++i) {
    if ((cum += probs[i]) >= p.top_p) {
      keep = i + 1;
      break;
    }
  }
  if (p.min_p > 0) {
    int64_t i = 1;
    while (i < keep && probs[i] >= p.min_p * probs[0]) ++i;
    keep = i;
  }
  double total = keep == n ? 1.0 : 0.0;
  for (int64_t i = 0; keep < n && i < keep; ++i) total += probs[i];
  double u = std::uniform_real_distribution<double>(0.0, total)(rng);
  for (rank = 0; rank < keep; ++rank) {
    if ((u -= probs[rank]) <= 0) return ids[rank];
  }
  rank = keep - 1;
  return ids[keep - 1];
}

TEST(Sampler, LazyHeadSortDrawsWhatAFullSortDraws) {
  std::mt19937 gen(11);
  for (float spread : {0.05f, 1.0f, 6.0f}) {
    std::vector<float> l(3000);
    std::normal_distribution<float> normal(0.0f, spread);
    for (float& v : l) v = std::round(normal(gen) * 8) / 8;  // ties too
    for (float top_p : {1.0f, 0.97f, 0.5f}) {
      for (float min_p : {0.0f, 0.02f}) {
        SamplingParams p;
        p.temperature = 1.3f;
        p.top_k = 0;
        p.top_p = top_p;
        p.min_p = min_p;
        p.seed = 5;
        Sampler s(p);
        std::mt19937_64 rng(p.seed);
        int64_t deep = 0, rank = 0;
        for (int i = 0; i < 200; ++i) {
          const int32_t want = sample_fully_sorted(l, p, rng, rank);
          ASSERT_EQ(s.sample(l.data(), 3000, {}), want) << "spread " << spread << " top_p " << top_p << " min_p " << min_p << " draw " << i;
          deep += rank >= 256;  // past the head's first growth steps (64, 256)
        }
        if (spread == 0.05f && top_p == 1.0f && min_p == 0.0f) {
          EXPECT_GT(deep, 100);  // the walks did go deep
        }
      }
    }
  }
}

}  // namespace
}  // namespace tessera::llm
