// Hugging Face models: a folder of config.json, model.safetensors (or shards with
// model.safetensors.index.json) and, optionally, tokenizer.json, read into the same ModelConfig
// and WeightMap (GGUF names and dims order) that a GGUF file gives.
//
// Architectures: LLaMA family (model_type "llama", "mistral") and GPT-2 ("gpt2").
// Layout conversions done at load, so the graphs see what llama.cpp's converter would write:
//   - LLaMA q_proj / k_proj rows are permuted per head (new row 2i = old row i, new row 2i + 1 =
//     old row i + head_dim / 2): HF rotates halves of each head, tessera's RoPE adjacent pairs.
//   - GPT-2's Conv1D weights ([in, out] row-major) are transposed to [out][in].
// Torch Linear weights ([out, in] row-major) are GGUF's [in, out] dims as they are. Matrices keep
// their stored type (F32, F16, BF16); 1-D tensors become float32.
//
// Errors (Status): missing or mistyped config keys, unsupported model types or features,
// missing, unexpected or mis-shaped tensors — each naming the file and key or tensor.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "llm/language_model.h"
#include "llm/llama_graph.h"
#include "llm/model_config.h"

namespace tessera::llm {

// The config of a config.json (see above for the model types read).
Result<ModelConfig> config_from_hf_json(const std::string& config_json_path);

// Every tensor of `config`'s architecture from the shards, renamed, converted and checked
// against the config. Tensors the graph would not use (other than known buffers such as GPT-2's
// attn.bias) are an error rather than silently dropped.
Result<WeightMap> weights_from_safetensors(const std::vector<std::string>& shards,
                                           const ModelConfig& config);

// `dir`: the model folder (a path to one of its .safetensors files stands for its folder).
// tokenizer.json, when there, becomes the model's tokenizer; else it has none.
Result<std::unique_ptr<LanguageModel>> load_hf_model(const std::string& dir,
                                                     const ModelOptions& opts);

// Whether `path` names a Hugging Face model for load_hf_model: a directory, or a path ending in
// ".safetensors" (anything else is taken for a GGUF file).
bool is_hf_model_path(const std::string& path);

}  // namespace tessera::llm
