#include "llm/model_config.h"

namespace tessera::llm {

const char* architecture_name(Architecture a) {
  switch (a) {
    case Architecture::kLlama: return "llama";
    case Architecture::kGpt2: return "gpt2";
  }
  return "?";
}

Status ModelConfig::validate() const {
  auto positive = [](int64_t v, const char* what) -> Status {
    if (v <= 0) return invalid_argument(std::string("model config: ") + what + " must be positive, got " + std::to_string(v));
    return Status();
  };
  TESSERA_RETURN_IF_ERROR(positive(vocab_size, "vocab size"));
  TESSERA_RETURN_IF_ERROR(positive(hidden, "embedding length"));
  TESSERA_RETURN_IF_ERROR(positive(ffn_hidden, "feed-forward length"));
  TESSERA_RETURN_IF_ERROR(positive(layers, "block count"));
  TESSERA_RETURN_IF_ERROR(positive(heads, "head count"));
  TESSERA_RETURN_IF_ERROR(positive(kv_heads, "KV head count"));
  TESSERA_RETURN_IF_ERROR(positive(context_length, "context length"));
  if (hidden % heads != 0) {
    return invalid_argument("model config: embedding length " + std::to_string(hidden) +
                            " is not a multiple of the head count " + std::to_string(heads));
  }
  if (heads % kv_heads != 0) {
    return invalid_argument("model config: head count " + std::to_string(heads) +
                            " is not a multiple of the KV head count " + std::to_string(kv_heads));
  }
  if (arch == Architecture::kLlama && head_dim() % 2 != 0) {
    return invalid_argument("model config: RoPE needs an even head dimension, got " + std::to_string(head_dim()));
  }
  if (!(norm_eps > 0.0f) || !(rope_theta > 0.0f) || !(rope_scale_factor > 0.0f)) {
    return invalid_argument("model config: epsilon, RoPE theta and scale must be positive");
  }
  return Status();
}

}  // namespace tessera::llm
