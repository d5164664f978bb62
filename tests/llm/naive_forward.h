// Separately written LLaMA and GPT-2 forward passes: plain loops over dequantized float weights,
// the whole sequence at once with a causal mask, no KV cache and no tessera kernels. The oracles
// for the graphs built by llm/llama_graph.cc and llm/gpt2_graph.cc.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "llm/model_config.h"

namespace tessera::llm::testing {

// Weights by GGUF name as row-major float matrices: [rows = output features][cols = inputs].
using FloatWeights = std::map<std::string, std::vector<float>>;

// Logits for every position: [tokens.size()][vocab].
std::vector<std::vector<float>> naive_llama_logits(const ModelConfig& c, const FloatWeights& w,
                                                   const std::vector<int32_t>& tokens);

// GPT-2: weights as GGUF names them (blk.N.attn_qkv fused, biases, position_embd).
std::vector<std::vector<float>> naive_gpt2_logits(const ModelConfig& c, const FloatWeights& w,
                                                  const std::vector<int32_t>& tokens);

}  // namespace tessera::llm::testing
