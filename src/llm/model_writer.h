// Writes GGUF language models with seeded random weights and a real tokenizer vocabulary: no
// real weights can be downloaded here, so this is how tests and benchmarks get models of a real
// model's shapes (`tessera gguf-create`).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backends/quant_formats.h"
#include "llm/model_config.h"
#include "llm/tokenizer.h"

namespace tessera::llm {

struct ModelPreset {
  std::string name;
  std::string description;
  ModelConfig config;  // vocab_size 0: the vocabulary's size
};
const std::vector<ModelPreset>& model_presets();
const ModelPreset* find_preset(const std::string& name);

// A SentencePiece-style (llama) vocabulary built in: <unk>, <s>, </s>, the 256 byte tokens,
// printable ASCII with and without the "▁" word prefix, then unused tokens up to `size`.
// Text round-trips through it (byte fallback); no download needed.
TokenizerVocab builtin_llama_vocab(int64_t size = 512);
// A byte-level (GPT-2 style) vocabulary built in: the 256 byte tokens, "Ġ" + each lower-case
// letter (with their merges) and <|endoftext|>.
TokenizerVocab builtin_gpt2_vocab();

struct RandomModelOptions {
  quant::QType type = quant::QType::kQ4_0;  // matrices (embedding and LM head too); norms stay f32
  uint64_t seed = 0;
  // Called after each tensor with (tensors written, tensors in all).
  std::function<void(int64_t, int64_t)> progress;
};

// A GGUF model of `config` (llama or gpt2), with N(0, 1/k)-scaled random matrices.
Status write_random_gguf(const ModelConfig& config, const TokenizerVocab& vocab, const RandomModelOptions& opts,
                               const std::string& path);

// The same weights in memory (float32 or quantized as `type`), for tests: exactly the values
// write_random_gguf stores for the same config, type and seed.
struct RandomTensor {
  std::string name;
  std::vector<int64_t> dims;  // GGUF order
  quant::QType type;
};
// The tensors (GGUF names) of a model of `config`; matrices in `type`, 1-D tensors in f32.
std::vector<RandomTensor> model_tensor_list(const ModelConfig& config, quant::QType type);
// Fills the tensor's bytes (row_bytes(type, dims[0]) * rows).
void fill_random_tensor(const RandomTensor& t, uint64_t seed, uint8_t* dst);

}  // namespace tessera::llm
