// Next-token sampling from logits: repetition / presence / frequency penalties, then greedy
// (temperature 0) or top-k, temperature, top-p and min-p filtering and a seeded draw.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace tessera::llm {

struct SamplingParams {
  float temperature = 0.8f;  // 0: greedy (argmax)
  int top_k = 40;            // 0: all tokens
  float top_p = 0.95f;       // 1: off
  float min_p = 0.05f;       // 0: off; keeps tokens with p >= min_p * p(most likely)
  float repeat_penalty = 1.0f;  // 1: off; llama.cpp's: logits of recent tokens / (or *) this
  int repeat_last_n = 64;       // how many recent tokens the penalties look at
  float presence_penalty = 0.0f;   // OpenAI's: minus this for every token seen
  float frequency_penalty = 0.0f;  // minus this times the token's count
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& p);
  // Picks the next token from logits[vocab]; `history` is the sequence so far (for penalties).
  // The repetition penalty looks at the last repeat_last_n tokens of it; the presence and
  // frequency penalties at those of them from index `generated_from` on: 0 counts the prompt too
  // (llama.cpp's way), the prompt's length counts only generated tokens (OpenAI's and vLLM's).
  int32_t sample(const float* logits, int64_t vocab, const std::vector<int32_t>& history, size_t generated_from = 0);
  const SamplingParams& params() const { return p_; }

 private:
  SamplingParams p_;
  std::mt19937_64 rng_;
  std::vector<float> work_;
  std::vector<int32_t> ids_;
  std::vector<double> probs_;  // of the sorted head of ids_
};

}  // namespace tessera::llm
