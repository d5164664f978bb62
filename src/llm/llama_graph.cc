#include "llm/llama_graph.h"

#include <cmath>
#include <cstring>

#include "llm/graph_builder.h"

namespace tessera::llm {

Result<ModelWeight> make_weight(quant::QType type, std::vector<int64_t> dims,
                                const std::function<Status(void* dst)>& fill) {
  if (dims.empty() || dims.size() > 2) return unimplemented("weights of " + std::to_string(dims.size()) + " dims");
  for (int64_t d : dims) {
    if (d <= 0) return invalid_argument("weight dims must be positive, got " + dims_to_string(dims));
  }
  if (dims[0] % quant::block_elements(type) != 0) {
    return invalid_argument("rows of " + std::to_string(dims[0]) + " are not whole " + quant::qtype_name(type) + " blocks");
  }
  ModelWeight w;
  w.type = type;
  w.dims = dims;
  const int64_t rows = dims.size() == 2 ? dims[1] : 1, row_bytes = quant::row_bytes(type, dims[0]);
  const size_t nbytes = static_cast<size_t>(rows * row_bytes);
  if (dims.size() == 1) {
    std::vector<uint8_t> raw(nbytes);
    TESSERA_RETURN_IF_ERROR(fill(raw.data()));
    w.type = quant::QType::kF32;
    w.data = Tensor(DType::kFloat32, {dims[0]});
    quant::dequantize_row(type, raw.data(), dims[0], w.data.data<float>());
    return w;
  }
  const bool f32 = type == quant::QType::kF32;
  w.data = Tensor(f32 ? DType::kFloat32 : DType::kUint8, {rows, f32 ? dims[0] : row_bytes},
                  Storage::allocate_bytes_uninitialized(nbytes));
  TESSERA_RETURN_IF_ERROR(fill(w.data.raw_data()));
  return w;
}

std::vector<float> rope_inverse_frequencies(const ModelConfig& c, const std::vector<float>& freq_factors) {
  const int64_t half = c.head_dim() / 2;
  std::vector<float> inv(half);
  for (int64_t i = 0; i < half; ++i) {
    double f = std::pow(static_cast<double>(c.rope_theta), -2.0 * i / c.head_dim());
    if (c.rope_scaling == RopeScaling::kLinear) {
      f /= c.rope_scale_factor;
    } else if (c.rope_scaling == RopeScaling::kLlama3) {
      // Llama 3.1: long wavelengths are scaled, short ones kept, a smooth blend between.
      const double old_ctx = static_cast<double>(c.rope_original_context);
      const double low_wavelen = old_ctx / c.rope_low_freq_factor;
      const double high_wavelen = old_ctx / c.rope_high_freq_factor;
      const double wavelen = 2.0 * M_PI / f;
      if (wavelen > low_wavelen) {
        f /= c.rope_scale_factor;
      } else if (wavelen >= high_wavelen) {
        const double smooth = (old_ctx / wavelen - c.rope_low_freq_factor) /
                              (c.rope_high_freq_factor - c.rope_low_freq_factor);
        f = (1.0 - smooth) * f / c.rope_scale_factor + smooth * f;
      }
    }
    if (static_cast<size_t>(i) < freq_factors.size()) f /= freq_factors[i];
    inv[i] = static_cast<float>(f);
  }
  return inv;
}

namespace {

class LlamaGraphBuilder : public ModelGraphBuilder {
 public:
  using ModelGraphBuilder::ModelGraphBuilder;
  Result<Graph> build();

 private:
  Result<int> rms_norm(int x, const std::string& weight, const std::string& out) {
    TESSERA_ASSIGN_OR_RETURN(int w, vector(weight, c_.hidden));
    return node("RMSNorm", {x, w}, out, {{"epsilon", Attribute::of_float(c_.norm_eps)}});
  }
  Result<int> layer(int64_t l, int x);
  int inv_freq_ = -1;
};

Result<int> LlamaGraphBuilder::layer(int64_t l, int x) {
  const std::string p = "blk." + std::to_string(l) + ".";
  const int64_t hd = c_.head_dim(), kv_dim = c_.kv_heads * hd;
  TESSERA_ASSIGN_OR_RETURN(int h, rms_norm(x, p + "attn_norm.weight", p + "attn_in"));
  int q, k, v;
  if (w_.count(p + "attn_qkv.weight")) {
    TESSERA_ASSIGN_OR_RETURN(int qkv, linear(h, p + "attn_qkv.weight", c_.hidden, c_.hidden + 2 * kv_dim, p + "qkv"));
    const std::vector<int64_t> sizes = {c_.hidden, kv_dim, kv_dim};
    const int split = constant(p + "qkv_split", Tensor::from_vector<int64_t>({3}, sizes));
    q = g_.add_value(p + "q");
    k = g_.add_value(p + "k");
    v = g_.add_value(p + "v");
    const int node = g_.add_node("Split", {qkv, split}, {q, k, v}, {{"axis", Attribute::of_int(1)}}, p + "qkv_split", "");
    g_.node(node).opset = 13;
  } else {
    TESSERA_ASSIGN_OR_RETURN(q, linear(h, p + "attn_q.weight", c_.hidden, c_.hidden, p + "q"));
    TESSERA_ASSIGN_OR_RETURN(k, linear(h, p + "attn_k.weight", c_.hidden, kv_dim, p + "k"));
    TESSERA_ASSIGN_OR_RETURN(v, linear(h, p + "attn_v.weight", c_.hidden, kv_dim, p + "v"));
  }
  const AttrMap rope_attrs = {{"head_dim", Attribute::of_int(hd)}};
  q = node("RoPE", {q, positions_, inv_freq_}, p + "q_rot", rope_attrs);
  k = node("RoPE", {k, positions_, inv_freq_}, p + "k_rot", rope_attrs);
  const int attn = paged_attention(l, q, k, v, p + "attn");
  TESSERA_ASSIGN_OR_RETURN(x, linear(attn, p + "attn_output.weight", c_.hidden, c_.hidden, p + "attn_out", x));
  TESSERA_ASSIGN_OR_RETURN(h, rms_norm(x, p + "ffn_norm.weight", p + "ffn_in"));
  int act;
  if (w_.count(p + "ffn_gate_up.weight")) {
    TESSERA_ASSIGN_OR_RETURN(int gate_up, linear(h, p + "ffn_gate_up.weight", c_.hidden, 2 * c_.ffn_hidden, p + "gate_up"));
    act = node("SiluMul", {gate_up}, p + "act");
  } else {
    TESSERA_ASSIGN_OR_RETURN(int gate, linear(h, p + "ffn_gate.weight", c_.hidden, c_.ffn_hidden, p + "gate"));
    TESSERA_ASSIGN_OR_RETURN(int up, linear(h, p + "ffn_up.weight", c_.hidden, c_.ffn_hidden, p + "up"));
    act = node("SiluMul", {gate, up}, p + "act");
  }
  return linear(act, p + "ffn_down.weight", c_.ffn_hidden, c_.hidden, p + "ffn_out", x);
}

Result<Graph> LlamaGraphBuilder::build() {
  TESSERA_RETURN_IF_ERROR(c_.validate());
  if (c_.rope_scaling == RopeScaling::kYarn) return unimplemented("YaRN RoPE scaling is not supported yet");
  if (cache_.blocks <= 0 || cache_.block_size <= 0) return invalid_argument("the KV cache needs blocks");
  const int ids = add_step_inputs();
  std::vector<float> freq_factors;
  if (auto it = w_.find("rope_freqs.weight"); it != w_.end()) {
    const Tensor& f = it->second.data;
    if (f.dtype() != DType::kFloat32 || f.numel() != c_.head_dim() / 2)
      return invalid_argument("rope_freqs.weight must hold head_dim / 2 floats");
    freq_factors.assign(f.data<float>(), f.data<float>() + f.numel());
  }
  const std::vector<float> inv = rope_inverse_frequencies(c_, freq_factors);
  inv_freq_ = constant("rope.inv_freq", Tensor::from_vector<float>({static_cast<int64_t>(inv.size())}, inv));

  TESSERA_ASSIGN_OR_RETURN(int table, matrix("token_embd.weight", c_.hidden, c_.vocab_size));
  const quant::QType embd_type = w_.at("token_embd.weight").type;
  int x = node("Embedding", {ids, table}, "embd",
               {{"qtype", Attribute::of_string(quant::qtype_name(embd_type))}, {"dim", Attribute::of_int(c_.hidden)}});
  for (int64_t l = 0; l < c_.layers; ++l) {
    TESSERA_ASSIGN_OR_RETURN(x, layer(l, x));
  }
  TESSERA_RETURN_IF_ERROR(lm_head(x, [&](int last) { return rms_norm(last, "output_norm.weight", "output_norm"); }).status());
  TESSERA_RETURN_IF_ERROR(finish());
  return std::move(g_);
}

}  // namespace

namespace {

// The join j of `weights`' matrices, the parts dropped. Nothing happens unless every part is there
// with exactly its shape and all share one type (the graph builder then reports what is wrong, by
// the part's name).
void join_rows(WeightMap& weights, const JoinedProjection& j) {
  std::vector<const ModelWeight*> ws;
  for (size_t i = 0; i < j.parts.size(); ++i) {
    auto it = weights.find(j.parts[i]);
    if (it == weights.end()) return;
    const ModelWeight& w = it->second;
    if (w.dims != std::vector<int64_t>{j.k, j.rows[i]} || w.data.rank() != 2 || w.data.dim(0) != j.rows[i]) return;
    if (!ws.empty() && (w.type != ws[0]->type || w.data.dtype() != ws[0]->data.dtype() || w.data.dim(1) != ws[0]->data.dim(1))) {
      return;
    }
    ws.push_back(&w);
  }
  int64_t rows = 0, bytes = 0;
  for (const ModelWeight* w : ws) {
    rows += w->dims[1];
    bytes += static_cast<int64_t>(w->data.nbytes());
  }
  ModelWeight joined;
  joined.type = ws[0]->type;
  joined.dims = {j.k, rows};
  joined.data = Tensor(ws[0]->data.dtype(), {rows, ws[0]->data.dim(1)}, Storage::allocate_bytes_uninitialized(static_cast<size_t>(bytes)));
  auto* dst = static_cast<uint8_t*>(joined.data.raw_data());
  for (const ModelWeight* w : ws) {
    std::memcpy(dst, w->data.raw_data(), w->data.nbytes());
    dst += w->data.nbytes();
  }
  for (const std::string& part : j.parts) weights.erase(part);
  weights[j.name] = std::move(joined);
}

}  // namespace

std::vector<JoinedProjection> joined_projections(const ModelConfig& c) {
  std::vector<JoinedProjection> out;
  if (c.arch == Architecture::kGpt2) return out;
  const int64_t kv_dim = c.kv_heads * c.head_dim();
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    out.push_back({p + "attn_qkv.weight", {p + "attn_q.weight", p + "attn_k.weight", p + "attn_v.weight"},
                   {c.hidden, kv_dim, kv_dim}, c.hidden});
    out.push_back({p + "ffn_gate_up.weight", {p + "ffn_gate.weight", p + "ffn_up.weight"}, {c.ffn_hidden, c.ffn_hidden},
                   c.hidden});
  }
  return out;
}

void fuse_projections(WeightMap& weights, const ModelConfig& c) {
  for (const JoinedProjection& j : joined_projections(c)) join_rows(weights, j);
}

Result<Graph> build_llama_graph(const ModelConfig& config, const WeightMap& weights, const KvCacheShape& cache) {
  return LlamaGraphBuilder(config, weights, cache).build();
}

}  // namespace tessera::llm
