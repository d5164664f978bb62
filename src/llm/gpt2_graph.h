// The forward pass of a GPT-2 model as a tessera graph: learned position embeddings, pre-norm
// LayerNorm blocks, fused QKV projection (split into three matrices at build time), GELU MLP,
// biases everywhere, the LM head tied to the token embedding unless output.weight exists.
// Same step inputs, cache inputs and output as build_llama_graph (llama_graph.h).
#pragma once

#include "llm/llama_graph.h"

namespace tessera::llm {

Result<Graph> build_gpt2_graph(const ModelConfig& config, const WeightMap& weights, const KvCacheShape& cache);

}  // namespace tessera::llm
