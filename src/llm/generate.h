// The generation loop for one sequence: prefill the prompt in chunks, then decode token by token
// with a Sampler, streaming each token to a callback, with timings.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "llm/language_model.h"
#include "llm/sampler.h"

namespace tessera::llm {

struct GenerateOptions {
  int64_t max_tokens = 128;
  SamplingParams sampling;
  int64_t prefill_chunk = 512;  // prompt tokens per forward step
  bool stop_at_end_of_generation = true;  // stop at the tokenizer's end-of-generation tokens
};

struct GenerateResult {
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> output_ids;
  std::string stop_reason;      // "length", "eos" or "context"
  double prompt_seconds = 0;    // prefill, up to the first sampled token
  double decode_seconds = 0;    // the steps after the first token
  double prompt_tokens_per_second() const { return prompt_seconds > 0 ? prompt_ids.size() / prompt_seconds : 0; }
  // Decode steps (tokens after the first) per second.
  double decode_tokens_per_second() const {
    return decode_seconds > 0 && output_ids.size() > 1 ? (output_ids.size() - 1) / decode_seconds : 0;
  }
};

// Runs one sequence to completion in the model's cache (its blocks are freed at the end).
// on_token (may be empty) sees each generated id as soon as it is sampled; returning false stops.
Result<GenerateResult> generate(LanguageModel& model, const std::vector<int32_t>& prompt, const GenerateOptions& opts,
                                const std::function<bool(int32_t)>& on_token = {});

}  // namespace tessera::llm
