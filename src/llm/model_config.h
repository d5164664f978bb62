// The hyper-parameters of a decoder-only language model, as GGUF metadata or a Hugging Face
// config.json give them. The graph builders (llama_graph.h, gpt2_graph.h) read only this.
#pragma once

#include <cstdint>
#include <string>

#include "ir/status.h"

namespace tessera::llm {

enum class Architecture { kLlama, kGpt2 };
const char* architecture_name(Architecture a);  // "llama", "gpt2" (GGUF's general.architecture)

// RoPE frequency scaling (GGUF rope.scaling.*, HF rope_scaling).
enum class RopeScaling { kNone, kLinear, kYarn, kLlama3 };

struct ModelConfig {
  Architecture arch = Architecture::kLlama;
  std::string name;            // general.name
  int64_t vocab_size = 0;
  int64_t context_length = 0;  // the longest sequence the model was trained for
  int64_t hidden = 0;          // embedding_length
  int64_t ffn_hidden = 0;      // feed_forward_length
  int64_t layers = 0;          // block_count
  int64_t heads = 0;           // attention.head_count
  int64_t kv_heads = 0;        // attention.head_count_kv (grouped-query attention when < heads)
  int64_t head_dim() const { return heads > 0 ? hidden / heads : 0; }
  float norm_eps = 1e-5f;      // RMSNorm (llama) or LayerNorm (gpt2) epsilon
  // RoPE (llama): theta, and its scaling (factor 1 = none).
  float rope_theta = 10000.0f;
  RopeScaling rope_scaling = RopeScaling::kNone;
  float rope_scale_factor = 1.0f;
  int64_t rope_original_context = 0;  // llama3 / yarn: the pre-scaling context length
  float rope_low_freq_factor = 1.0f;  // llama3
  float rope_high_freq_factor = 4.0f; // llama3
  bool tied_embeddings = false;       // no output.weight: the LM head is the token embedding

  // Checks the numbers fit together (heads divide hidden, kv_heads divide heads, ...).
  Status validate() const;
};

}  // namespace tessera::llm
