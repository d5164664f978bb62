#include "llm/gpt2_graph.h"

#include <cstring>

#include "llm/graph_builder.h"

namespace tessera::llm {
namespace {

class Gpt2GraphBuilder : public ModelGraphBuilder {
 public:
  Gpt2GraphBuilder(const ModelConfig& c, const WeightMap& w, const KvCacheShape& cache)
      : ModelGraphBuilder(c, split_qkv_, cache), source_(w) {}
  Result<Graph> build();

 private:
  Result<int> layer_norm(int x, const std::string& prefix, const std::string& out) {
    TESSERA_ASSIGN_OR_RETURN(int w, vector(prefix + ".weight", c_.hidden));
    TESSERA_ASSIGN_OR_RETURN(int b, vector(prefix + ".bias", c_.hidden));
    return node("LayerNorm", {x, w, b}, out, {{"epsilon", Attribute::of_float(c_.norm_eps)}});
  }
  Result<int> layer(int64_t l, int x);
  // Copies rows [r0, r0 + rows) of `src` (a matrix or a vector) into a weight of its own.
  static ModelWeight row_slice(const ModelWeight& src, int64_t r0, int64_t rows);
  // The weights of the graph: the source's, with each blk.N.attn_qkv split into attn_q/k/v.
  Status split_weights();

  const WeightMap& source_;
  WeightMap split_qkv_;
};

ModelWeight Gpt2GraphBuilder::row_slice(const ModelWeight& src, int64_t r0, int64_t rows) {
  ModelWeight w;
  w.type = src.type;
  const bool vec = src.dims.size() == 1;
  w.dims = vec ? std::vector<int64_t>{rows} : std::vector<int64_t>{src.dims[0], rows};
  const int64_t row_bytes = vec ? static_cast<int64_t>(sizeof(float)) : static_cast<int64_t>(src.data.nbytes() / src.dims[1]);
  std::vector<int64_t> dims = src.data.dims();
  dims[0] = rows;
  w.data = Tensor(src.data.dtype(), dims);
  std::memcpy(w.data.raw_data(), static_cast<const uint8_t*>(src.data.raw_data()) + r0 * row_bytes, rows * row_bytes);
  return w;
}

Status Gpt2GraphBuilder::split_weights() {
  for (const auto& [name, w] : source_) {
    const size_t at = name.find(".attn_qkv.");
    if (at == std::string::npos) {
      split_qkv_.emplace(name, w);  // shares the buffer
      continue;
    }
    const std::string prefix = name.substr(0, at), suffix = name.substr(at + 10);  // "weight" / "bias"
    const int64_t rows = w.dims.size() == 1 ? w.dims[0] : w.dims[1];
    if (rows != 3 * c_.hidden) return invalid_argument("tensor '" + name + "' must have 3 x " + std::to_string(c_.hidden) + " rows");
    const char* parts[] = {"attn_q", "attn_k", "attn_v"};
    for (int i = 0; i < 3; ++i) split_qkv_.emplace(prefix + "." + parts[i] + "." + suffix, row_slice(w, i * c_.hidden, c_.hidden));
  }
  return Status();
}

Result<int> Gpt2GraphBuilder::layer(int64_t l, int x) {
  const std::string p = "blk." + std::to_string(l) + ".";
  const int64_t d = c_.hidden;
  TESSERA_ASSIGN_OR_RETURN(int h, layer_norm(x, p + "attn_norm", p + "attn_in"));
  TESSERA_ASSIGN_OR_RETURN(int q, linear(h, p + "attn_q.weight", d, d, p + "q", kNoValue, p + "attn_q.bias"));
  TESSERA_ASSIGN_OR_RETURN(int k, linear(h, p + "attn_k.weight", d, d, p + "k", kNoValue, p + "attn_k.bias"));
  TESSERA_ASSIGN_OR_RETURN(int v, linear(h, p + "attn_v.weight", d, d, p + "v", kNoValue, p + "attn_v.bias"));
  const int attn = paged_attention(l, q, k, v, p + "attn");
  TESSERA_ASSIGN_OR_RETURN(x, linear(attn, p + "attn_output.weight", d, d, p + "attn_out", x, p + "attn_output.bias"));
  TESSERA_ASSIGN_OR_RETURN(h, layer_norm(x, p + "ffn_norm", p + "ffn_in"));
  TESSERA_ASSIGN_OR_RETURN(int up, linear(h, p + "ffn_up.weight", d, c_.ffn_hidden, p + "up", kNoValue, p + "ffn_up.bias"));
  const int act = node("Gelu", {up}, p + "act");
  return linear(act, p + "ffn_down.weight", c_.ffn_hidden, d, p + "ffn_out", x, p + "ffn_down.bias");
}

Result<Graph> Gpt2GraphBuilder::build() {
  TESSERA_RETURN_IF_ERROR(c_.validate());
  if (c_.kv_heads != c_.heads) return invalid_argument("GPT-2 has as many KV heads as heads");
  if (cache_.blocks <= 0 || cache_.block_size <= 0) return invalid_argument("the KV cache needs blocks");
  TESSERA_RETURN_IF_ERROR(split_weights());
  const int ids = add_step_inputs();
  auto embedding = [&](int rows, const std::string& table_name, int64_t entries, const std::string& out) -> Result<int> {
    TESSERA_ASSIGN_OR_RETURN(int table, matrix(table_name, c_.hidden, entries));
    return node("Embedding", {rows, table}, out,
                {{"qtype", Attribute::of_string(quant::qtype_name(w_.at(table_name).type))},
                 {"dim", Attribute::of_int(c_.hidden)}});
  };
  TESSERA_ASSIGN_OR_RETURN(int tok, embedding(ids, "token_embd.weight", c_.vocab_size, "tok_embd"));
  TESSERA_ASSIGN_OR_RETURN(int pos, embedding(positions_, "position_embd.weight", c_.context_length, "pos_embd"));
  int x = g_.add_value("embd");
  g_.add_node("Add", {tok, pos}, {x}, {}, "embd");
  for (int64_t l = 0; l < c_.layers; ++l) {
    TESSERA_ASSIGN_OR_RETURN(x, layer(l, x));
  }
  TESSERA_RETURN_IF_ERROR(lm_head(x, [&](int last) { return layer_norm(last, "output_norm", "output_norm"); }).status());
  TESSERA_RETURN_IF_ERROR(finish());
  return std::move(g_);
}

}  // namespace

Result<Graph> build_gpt2_graph(const ModelConfig& config, const WeightMap& weights, const KvCacheShape& cache) {
  return Gpt2GraphBuilder(config, weights, cache).build();
}

}  // namespace tessera::llm
