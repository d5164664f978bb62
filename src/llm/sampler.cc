#include "llm/sampler.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

namespace tessera::llm {

Sampler::Sampler(const SamplingParams& p) : p_(p), rng_(p.seed) {}

int32_t Sampler::sample(const float* logits, int64_t vocab, const std::vector<int32_t>& history) {
  work_.assign(logits, logits + vocab);
  if (p_.repeat_penalty != 1.0f || p_.presence_penalty != 0.0f || p_.frequency_penalty != 0.0f) {
    std::map<int32_t, int> counts;
    const size_t from = history.size() > static_cast<size_t>(std::max(0, p_.repeat_last_n))
                            ? history.size() - static_cast<size_t>(std::max(0, p_.repeat_last_n)) : 0;
    for (size_t i = from; i < history.size(); ++i) {
      if (history[i] >= 0 && history[i] < vocab) ++counts[history[i]];
    }
    for (const auto& [id, n] : counts) {
      float& l = work_[id];
      if (p_.repeat_penalty != 1.0f) l = l > 0 ? l / p_.repeat_penalty : l * p_.repeat_penalty;
      l -= p_.presence_penalty + p_.frequency_penalty * static_cast<float>(n);
    }
  }
  if (p_.temperature <= 0.0f) {
    return static_cast<int32_t>(std::max_element(work_.begin(), work_.end()) - work_.begin());
  }
  ids_.resize(vocab);
  std::iota(ids_.begin(), ids_.end(), 0);
  const int64_t k = p_.top_k > 0 ? std::min<int64_t>(p_.top_k, vocab) : vocab;
  auto by_logit = [&](int32_t a, int32_t b) { return work_[a] > work_[b] || (work_[a] == work_[b] && a < b); };
  std::partial_sort(ids_.begin(), ids_.begin() + k, ids_.end(), by_logit);
  ids_.resize(k);
  // Softmax over the k candidates at the temperature, in descending order.
  std::vector<double> probs(k);
  const double top = work_[ids_[0]];
  double sum = 0;
  for (int64_t i = 0; i < k; ++i) sum += probs[i] = std::exp((work_[ids_[i]] - top) / p_.temperature);
  for (double& q : probs) q /= sum;
  int64_t keep = k;
  if (p_.top_p < 1.0f) {
    double cum = 0;
    for (int64_t i = 0; i < k; ++i) {
      cum += probs[i];
      if (cum >= p_.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  if (p_.min_p > 0.0f) {
    int64_t i = 1;
    while (i < keep && probs[i] >= p_.min_p * probs[0]) ++i;
    keep = i;
  }
  double total = 0;
  for (int64_t i = 0; i < keep; ++i) total += probs[i];
  double u = std::uniform_real_distribution<double>(0.0, total)(rng_);
  for (int64_t i = 0; i < keep; ++i) {
    u -= probs[i];
    if (u <= 0) return ids_[i];
  }
  return ids_[keep - 1];
}

}  // namespace tessera::llm
