// The forward pass of a LLaMA-family model as a tessera graph (ops of domain "tessera", see
// ops/llm_ops.cc): RMSNorm, RoPE (with its frequency scaling), grouped-query attention over a
// paged KV cache, SwiGLU, tied or separate LM head.
//
// One run is one step: T tokens of S sequences, any mix of prefill chunks and decode tokens.
// Graph inputs (int32 unless said):
//   tokens[T], positions[T] (position of each token in its sequence), token_seq[T] (row of
//   block_tables), block_tables[S, B] (cache blocks of each sequence, in order), logit_rows[R]
//   (the tokens whose next-token logits are wanted, usually each sequence's last), and
//   k_cache.L / v_cache.L float[blocks, kv_heads, block_size, head_dim] for each layer L
//   (state: PagedAttention writes them).
// Output: logits float[R, vocab].
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "backends/quant_formats.h"
#include "ir/graph.h"
#include "ir/tensor.h"
#include "llm/model_config.h"

namespace tessera::llm {

// One weight tensor: GGUF's dims order (dims[0] is the contiguous one: the reduction dim of a
// matrix) and its data as a graph constant (float[rows, cols] for f32, uint8[rows, row bytes]
// for the other types).
struct ModelWeight {
  quant::QType type = quant::QType::kF32;
  std::vector<int64_t> dims;
  Tensor data;
};
// A weight of GGUF dims in `type`, its bytes written by `fill` (row_bytes(type, dims[0]) per
// row, in GGUF's layout). 1-D weights (norms, biases) are converted to float32.
Result<ModelWeight> make_weight(quant::QType type, std::vector<int64_t> dims,
                                const std::function<Status(void* dst)>& fill);
// By GGUF tensor name: token_embd.weight, blk.N.attn_q.weight, output_norm.weight, ...
using WeightMap = std::map<std::string, ModelWeight>;

struct KvCacheShape {
  int64_t blocks = 0;
  int64_t block_size = 16;
};

// RoPE's inverse frequencies (head_dim / 2 of them) with the config's scaling applied, divided by
// `freq_factors` where given (GGUF rope_freqs.weight).
std::vector<float> rope_inverse_frequencies(const ModelConfig& c, const std::vector<float>& freq_factors = {});

// Builds, finalizes and type-checks the graph; fails naming a missing or mis-shaped weight.
Result<Graph> build_llama_graph(const ModelConfig& config, const WeightMap& weights, const KvCacheShape& cache);

// Joins each layer's attn_q / attn_k / attn_v into one blk.N.attn_qkv matrix and ffn_gate /
// ffn_up into blk.N.ffn_gate_up (their rows one after the other) where the parts have the
// config's shapes and share a type; the graph then runs one matrix product for each (one pass over the
// activations and one thread-pool round trip instead of three or two) and splits the result:
// a Split for q / k / v, SiluMul's one-input form for gate / up. Each output feature is the same
// dot product as before, so the logits do not change.
void fuse_projections(WeightMap& weights, const ModelConfig& config);
// The joins fuse_projections makes: `name` from `parts` (rows[i] rows each, k columns), in order.
struct JoinedProjection {
  std::string name;
  std::vector<std::string> parts;
  std::vector<int64_t> rows;
  int64_t k = 0;
};
std::vector<JoinedProjection> joined_projections(const ModelConfig& config);

// Names of the graph inputs (also used by the runner).
inline std::string k_cache_input(int64_t layer) { return "k_cache." + std::to_string(layer); }
inline std::string v_cache_input(int64_t layer) { return "v_cache." + std::to_string(layer); }

}  // namespace tessera::llm
