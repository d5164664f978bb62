// What the language-model graph builders (llama_graph.cc, gpt2_graph.cc) share: weights as
// checked constants, tessera-domain nodes, the step inputs, the paged-attention node.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "llm/llama_graph.h"

namespace tessera::llm {

class ModelGraphBuilder {
 public:
  ModelGraphBuilder(const ModelConfig& c, const WeightMap& w, const KvCacheShape& cache)
      : c_(c), w_(w), cache_(cache) {}

 protected:
  using AttrMap = std::map<std::string, Attribute>;

  // The step inputs (tokens, positions, token_seq, block_tables, logit_rows); returns tokens.
  int add_step_inputs();
  // The weight `name` as a constant, checked to be a matrix of n rows (outputs) by k columns.
  Result<int> matrix(const std::string& name, int64_t k, int64_t n);
  // The weight `name` as a constant, checked to be float32[n].
  Result<int> vector(const std::string& name, int64_t n);
  // A constant of the graph, once per name.
  int constant(const std::string& name, const Tensor& t);
  int node(const std::string& op, std::vector<int> inputs, const std::string& out, AttrMap attrs = {});
  // x * W^T (+ bias) (+ residual), W the weight `weight` of n rows by k columns.
  Result<int> linear(int x, const std::string& weight, int64_t k, int64_t n, const std::string& out,
                     int residual = kNoValue, const std::string& bias = "");
  // The layer's K/V cache inputs and the PagedAttention node over q, k, v (rotated already).
  int paged_attention(int64_t layer, int q, int k, int v, const std::string& out);
  // Gathers logit_rows, applies `final_norm` (a node builder) and the LM head; marks the output.
  Result<int> lm_head(int x, const std::function<Result<int>(int)>& final_norm);
  Status finish();

  const ModelConfig& c_;
  const WeightMap& w_;
  const KvCacheShape& cache_;
  Graph g_;
  int positions_ = -1, token_seq_ = -1, block_tables_ = -1, logit_rows_ = -1;
};

}  // namespace tessera::llm
