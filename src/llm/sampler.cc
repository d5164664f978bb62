#include "llm/sampler.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

namespace tessera::llm {

Sampler::Sampler(const SamplingParams& p) : p_(p), rng_(p.seed) {}

int32_t Sampler::sample(const float* logits, int64_t vocab, const std::vector<int32_t>& history, size_t generated_from) {
  work_.assign(logits, logits + vocab);
  if (p_.repeat_penalty != 1.0f || p_.presence_penalty != 0.0f || p_.frequency_penalty != 0.0f) {
    // Every token in the window, with how often it was generated (at or after generated_from).
    std::map<int32_t, int> generated;
    const size_t from = history.size() > static_cast<size_t>(std::max(0, p_.repeat_last_n))
                            ? history.size() - static_cast<size_t>(std::max(0, p_.repeat_last_n)) : 0;
    for (size_t i = from; i < history.size(); ++i) {
      if (history[i] >= 0 && history[i] < vocab) generated[history[i]] += i >= generated_from;
    }
    for (const auto& [id, n] : generated) {
      float& l = work_[id];
      if (p_.repeat_penalty != 1.0f) l = l > 0 ? l / p_.repeat_penalty : l * p_.repeat_penalty;
      if (n > 0) l -= p_.presence_penalty + p_.frequency_penalty * static_cast<float>(n);
    }
  }
  if (p_.temperature <= 0.0f) {
    return static_cast<int32_t>(std::max_element(work_.begin(), work_.end()) - work_.begin());
  }
  // The top-k candidates by logit (ties: lower id first) are found in linear time, and sorted
  // only as far as the top-p cut, the min-p cut and the draw reach: a sorted head grown fourfold
  // when one of them lies beyond it. With no top-k (OpenAI's default) a full sort of the vocabulary
  // cost milliseconds per token; the draw rarely reaches past the first few dozen.
  ids_.resize(vocab);
  std::iota(ids_.begin(), ids_.end(), 0);
  const int64_t k = p_.top_k > 0 ? std::min<int64_t>(p_.top_k, vocab) : vocab;
  auto by_logit = [&](int32_t a, int32_t b) { return work_[a] > work_[b] || (work_[a] == work_[b] && a < b); };
  if (k < vocab) {
    std::nth_element(ids_.begin(), ids_.begin() + (k - 1), ids_.end(), by_logit);
    ids_.resize(k);
  }
  const float top = work_[*std::min_element(ids_.begin(), ids_.end(), by_logit)];
  const double inv_t = 1.0 / p_.temperature;
  double sum = 0;
  for (int32_t id : ids_) sum += std::exp((work_[id] - top) * inv_t);
  probs_.clear();
  // The probability of the i-th most likely candidate, sorting the head as far as i.
  auto prob = [&](int64_t i) {
    if (i >= static_cast<int64_t>(probs_.size())) {
      const int64_t sorted = static_cast<int64_t>(probs_.size());
      const int64_t grow = std::min<int64_t>(k, std::max<int64_t>({i + 1, 4 * sorted, 64}));
      std::partial_sort(ids_.begin() + sorted, ids_.begin() + grow, ids_.end(), by_logit);
      for (int64_t j = sorted; j < grow; ++j) probs_.push_back(std::exp((work_[ids_[j]] - top) * inv_t) / sum);
    }
    return probs_[i];
  };
  int64_t keep = k;
  if (p_.top_p < 1.0f) {
    double cum = 0;
    for (int64_t i = 0; i < k; ++i) {
      cum += prob(i);
      if (cum >= p_.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  if (p_.min_p > 0.0f) {
    int64_t i = 1;
    while (i < keep && prob(i) >= p_.min_p * prob(0)) ++i;
    keep = i;
  }
  // The kept mass: every candidate's when nothing was cut (no sort needed), else the head's.
  double total = 0;
  if (keep == k) {
    total = 1.0;
  } else {
    for (int64_t i = 0; i < keep; ++i) total += prob(i);
  }
  double u = std::uniform_real_distribution<double>(0.0, total)(rng_);
  for (int64_t i = 0; i < keep; ++i) {
    u -= prob(i);
    if (u <= 0) return ids_[i];
  }
  prob(keep - 1);  // sorted that far
  return ids_[keep - 1];
}

}  // namespace tessera::llm
