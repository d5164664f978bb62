// What a GGUF file means for a language model: its config (the `<arch>.*` keys), its weights
// (copied into tessera tensors) and its tokenizer (`tokenizer.ggml.*`) — read and written.
#pragma once

#include "llm/gguf.h"
#include "llm/gguf_writer.h"
#include "llm/llama_graph.h"
#include "llm/model_config.h"
#include "llm/tokenizer.h"

namespace tessera::llm {

Result<ModelConfig> config_from_gguf(const GgufFile& file);
// Every tensor the config's architecture uses, checked for type and dims; 1-D tensors become
// float32 whatever their stored type.
// With join_projections, the parts of each llm::joined_projections(config) entry are read straight
// into one joined tensor (no second copy of them at load), where they are all there with their
// shapes and one type.
Result<WeightMap> load_gguf_weights(const GgufFile& file, const ModelConfig& config, bool join_projections = false);
Result<TokenizerVocab> vocab_from_gguf(const GgufFile& file);

void write_config_to_gguf(const ModelConfig& config, GgufWriter& w);
void write_vocab_to_gguf(const TokenizerVocab& vocab, GgufWriter& w);

}  // namespace tessera::llm
