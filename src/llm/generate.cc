#include "llm/generate.h"

#include <algorithm>
#include <chrono>

namespace tessera::llm {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

Result<GenerateResult> generate(LanguageModel& model, const std::vector<int32_t>& prompt, const GenerateOptions& opts,
                                const std::function<bool(int32_t)>& on_token) {
  if (prompt.empty()) return invalid_argument("the prompt has no tokens");
  if (opts.max_tokens < 0) return invalid_argument("max tokens must not be negative");
  if (static_cast<int64_t>(prompt.size()) >= model.context_length()) {
    return invalid_argument("the prompt has " + std::to_string(prompt.size()) + " tokens; the context holds " +
                            std::to_string(model.context_length()));
  }
  GenerateResult r;
  r.prompt_ids = prompt;
  SequenceBlocks seq;
  struct Release {  // the sequence's blocks go back to the pool however this ends
    KvCache& cache;
    SequenceBlocks& seq;
    ~Release() { cache.release(seq); }
  } release{model.cache(), seq};
  // The blocks the whole generation can reach, taken and made resident before the clock starts
  // (as llama.cpp clears its KV cache when it creates a context). Where they do not all fit,
  // the steps take what they need as they go and report a full cache.
  const int64_t reach = std::min<int64_t>(model.context_length(), static_cast<int64_t>(prompt.size()) + opts.max_tokens);
  if (model.cache().reserve(seq, reach).ok()) model.cache().commit(seq);
  Sampler sampler(opts.sampling);
  std::vector<int32_t> history = prompt;
  const int64_t vocab = model.config().vocab_size;
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t chunk = std::max<int64_t>(1, opts.prefill_chunk);
  Tensor logits;
  for (size_t at = 0; at < prompt.size(); at += chunk) {
    const size_t end = std::min(prompt.size(), at + chunk);
    StepSequence s{&seq, std::vector<int32_t>(prompt.begin() + at, prompt.begin() + end), end == prompt.size()};
    if (!s.want_logits) s.want_logits = true;  // a step needs one logits row; only the last one is used
    TESSERA_ASSIGN_OR_RETURN(logits, model.step({s}));
  }
  if (opts.max_tokens == 0) {
    r.prompt_seconds = seconds_since(t0);
    r.stop_reason = "length";
    return r;
  }
  const Tokenizer* tok = model.tokenizer();
  std::chrono::steady_clock::time_point t1;
  while (true) {
    const int32_t id = sampler.sample(logits.data<float>(), vocab, history);
    if (r.output_ids.empty()) {
      r.prompt_seconds = seconds_since(t0);
      t1 = std::chrono::steady_clock::now();
    }
    r.output_ids.push_back(id);
    history.push_back(id);
    if (on_token && !on_token(id)) {
      r.stop_reason = "stopped";
      break;
    }
    if (opts.stop_at_end_of_generation && tok && tok->is_end_of_generation(id)) {
      r.stop_reason = "eos";
      break;
    }
    if (static_cast<int64_t>(r.output_ids.size()) >= opts.max_tokens) {
      r.stop_reason = "length";
      break;
    }
    if (seq.length + 1 > model.context_length()) {
      r.stop_reason = "context";
      break;
    }
    TESSERA_ASSIGN_OR_RETURN(logits, model.step({StepSequence{&seq, {id}, true}}));
  }
  r.decode_seconds = seconds_since(t1);
  return r;
}

}  // namespace tessera::llm
