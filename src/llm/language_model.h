// A loaded language model: its config, tokenizer, compiled forward graph and paged KV cache.
//
// step() runs one forward pass over a batch that mixes prefill chunks and decode tokens of
// several sequences; each sequence's K/V land in the cache, so the next step continues it.
// Not thread-safe: one engine thread owns a LanguageModel.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "llm/kv_cache.h"
#include "llm/llama_graph.h"
#include "llm/model_config.h"
#include "llm/tokenizer.h"
#include "runtime/session.h"

namespace tessera::llm {

struct ModelOptions {
  int threads = 1;
  std::string backend = "native";  // where the graph's ops run ("ref": the reference kernels)
  // KV cache size in tokens (all sequences together); 0: the context length, capped at 4096.
  int64_t kv_cache_tokens = 0;
  int64_t kv_block_size = 16;
  // The longest sequence allowed; 0: the model's context length.
  int64_t context_length = 0;
  // Q4_0 and Q8_0 matrices regrouped (in place, same bytes) into the layouts of the AVX-512 and
  // AVX2 kernels, when the native backend runs them with those: 16-row panels
  // (quant::PanelQuantsQ4_0, PanelQuantsQ8_0) where the row count allows, else (AVX-512 only)
  // groups of four blocks (BlockQ4_0x4, BlockQ8_0x4).
  bool regroup_quantized = true;
  // LLaMA-family layers' q / k / v and gate / up matrices joined (llm::fuse_projections).
  bool fuse_projections = true;
};

// One sequence's part of a step: `tokens` at positions start, start + 1, ... (start must equal
// the tokens already cached for it).
struct StepSequence {
  SequenceBlocks* blocks = nullptr;
  std::vector<int32_t> tokens;
  bool want_logits = true;  // logits for its last token
};

class LanguageModel {
 public:
  // A GGUF file (weights are copied into the engine's buffers; the mapping is dropped).
  static Result<std::unique_ptr<LanguageModel>> load_gguf(const std::string& path, const ModelOptions& opts);
  // From weights in memory (tests, safetensors); vocab may be empty (no tokenizer).
  static Result<std::unique_ptr<LanguageModel>> create(const ModelConfig& config, WeightMap weights,
                                                       const TokenizerVocab* vocab, const ModelOptions& opts);

  const ModelConfig& config() const { return config_; }
  // nullptr when the model came without a vocabulary.
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }
  KvCache& cache() { return *cache_; }
  int64_t context_length() const { return context_length_; }
  int threads() const { return session_->threads(); }
  const Session& session() const { return *session_; }
  // Bytes of weights held (graph constants).
  int64_t weight_bytes() const { return weight_bytes_; }

  // Frees the step buffers kept for reuse (sized by the largest recent batch); returns their bytes.
  size_t release_free_buffers() { return session_->release_free_buffers(); }

  // Runs one step. Returns float[R, vocab]: a row per sequence with want_logits, in order.
  // Fails, changing nothing, when a sequence would exceed the context or the cache is full.
  Result<Tensor> step(const std::vector<StepSequence>& batch);

  // Per-op wall time of the steps run since profiling was turned on (op type -> seconds, calls).
  void set_profile(bool on);
  struct OpTime {
    double seconds = 0;
    int64_t calls = 0;
  };
  const std::map<std::string, OpTime>& op_times() const { return op_times_; }

 private:
  LanguageModel() = default;
  ModelConfig config_;
  WeightMap weights_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<Session> session_;
  std::map<std::string, Tensor> cache_inputs_;
  int64_t context_length_ = 0;
  int64_t weight_bytes_ = 0;
  bool profile_ = false;
  std::map<std::string, OpTime> op_times_;
};

}  // namespace tessera::llm
