#include "llm/graph_builder.h"

#include <cmath>

#include "ops/op_registry.h"

namespace tessera::llm {

int ModelGraphBuilder::add_step_inputs() {
  g_.name = c_.name.empty() ? architecture_name(c_.arch) : c_.name;
  g_.opsets[""] = 17;
  g_.opsets["tessera"] = 1;
  const Dim tokens = Dim::symbolic("tokens");
  auto int_input = [&](const std::string& name, std::vector<Dim> dims) {
    TensorType t;
    t.dtype = DType::kInt32;
    t.shape = std::move(dims);
    return g_.add_input(name, t);
  };
  const int ids = int_input("tokens", {tokens});
  positions_ = int_input("positions", {tokens});
  token_seq_ = int_input("token_seq", {tokens});
  block_tables_ = int_input("block_tables", {Dim::symbolic("sequences"), Dim::symbolic("max_blocks")});
  logit_rows_ = int_input("logit_rows", {Dim::symbolic("logit_rows")});
  return ids;
}

Result<int> ModelGraphBuilder::matrix(const std::string& name, int64_t k, int64_t n) {
  auto it = w_.find(name);
  if (it == w_.end()) return invalid_argument("the model has no tensor '" + name + "'");
  const ModelWeight& mw = it->second;
  if (mw.dims.size() != 2 || mw.dims[0] != k || mw.dims[1] != n) {
    return invalid_argument("tensor '" + name + "' has dims " + dims_to_string(mw.dims) + ", expected " +
                            std::to_string(k) + "x" + std::to_string(n));
  }
  return constant(name, mw.data);
}

int ModelGraphBuilder::constant(const std::string& name, const Tensor& t) {
  if (auto id = g_.find_value(name)) return *id;  // a tied weight, used twice
  return g_.add_constant(name, t);
}

Result<int> ModelGraphBuilder::vector(const std::string& name, int64_t n) {
  auto it = w_.find(name);
  if (it == w_.end()) return invalid_argument("the model has no tensor '" + name + "'");
  const ModelWeight& mw = it->second;
  if (mw.dims != std::vector<int64_t>{n} || mw.data.dtype() != DType::kFloat32) {
    return invalid_argument("tensor '" + name + "' must be float32[" + std::to_string(n) + "], got " +
                            quant::qtype_name(mw.type) + "[" + dims_to_string(mw.dims) + "]");
  }
  return constant(name, mw.data);
}

int ModelGraphBuilder::node(const std::string& op, std::vector<int> inputs, const std::string& out, AttrMap attrs) {
  const int y = g_.add_value(out);
  g_.add_node(op, std::move(inputs), {y}, std::move(attrs), out, "tessera");
  return y;
}

Result<int> ModelGraphBuilder::linear(int x, const std::string& weight, int64_t k, int64_t n, const std::string& out,
                                      int residual, const std::string& bias) {
  TESSERA_ASSIGN_OR_RETURN(int w, matrix(weight, k, n));
  std::vector<int> in = {x, w};
  if (!bias.empty() || residual != kNoValue) {
    int b = kNoValue;
    if (!bias.empty()) {
      TESSERA_ASSIGN_OR_RETURN(b, vector(bias, n));
    }
    in.push_back(b);
  }
  if (residual != kNoValue) in.push_back(residual);
  return node("QMatMul", in, out,
              {{"qtype", Attribute::of_string(quant::qtype_name(w_.at(weight).type))},
               {"n", Attribute::of_int(n)},
               {"k", Attribute::of_int(k)}});
}

int ModelGraphBuilder::paged_attention(int64_t layer, int q, int k, int v, const std::string& out) {
  const int64_t hd = c_.head_dim();
  const int kc = g_.add_input(k_cache_input(layer), TensorType::of(DType::kFloat32, {cache_.blocks, c_.kv_heads, hd, cache_.block_size}));
  const int vc = g_.add_input(v_cache_input(layer), TensorType::of(DType::kFloat32, {cache_.blocks, c_.kv_heads, cache_.block_size, hd}));
  return node("PagedAttention", {q, k, v, kc, vc, token_seq_, positions_, block_tables_}, out,
              {{"num_heads", Attribute::of_int(c_.heads)},
               {"num_kv_heads", Attribute::of_int(c_.kv_heads)},
               {"head_dim", Attribute::of_int(hd)},
               {"block_size", Attribute::of_int(cache_.block_size)},
               {"scale", Attribute::of_float(static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd))))}});
}

Result<int> ModelGraphBuilder::lm_head(int x, const std::function<Result<int>(int)>& final_norm) {
  const int last = g_.add_value("last_hidden");
  g_.add_node("Gather", {x, logit_rows_}, {last}, {{"axis", Attribute::of_int(0)}}, "last_hidden");
  TESSERA_ASSIGN_OR_RETURN(int normed, final_norm(last));
  const std::string head = w_.count("output.weight") ? "output.weight" : "token_embd.weight";
  TESSERA_ASSIGN_OR_RETURN(int logits, linear(normed, head, c_.hidden, c_.vocab_size, "logits"));
  g_.mark_output(logits);
  return logits;
}

Status ModelGraphBuilder::finish() {
  TESSERA_RETURN_IF_ERROR(g_.finalize());
  return infer_graph_types(g_);
}

}  // namespace tessera::llm
