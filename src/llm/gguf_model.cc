#include "llm/gguf_model.h"

#include <set>

namespace tessera::llm {

namespace {

Result<int64_t> positive_int(const GgufFile& f, const std::string& key) {
  TESSERA_ASSIGN_OR_RETURN(int64_t v, f.get_int(key));
  if (v <= 0 || v > (int64_t{1} << 31)) return invalid_argument(f.path() + ": " + key + " = " + std::to_string(v) + " is out of range");
  return v;
}

}  // namespace

Result<ModelConfig> config_from_gguf(const GgufFile& f) {
  TESSERA_ASSIGN_OR_RETURN(std::string arch, f.get_string("general.architecture"));
  ModelConfig c;
  if (arch == "llama" || arch == "mistral") {
    c.arch = Architecture::kLlama;
  } else if (arch == "gpt2") {
    c.arch = Architecture::kGpt2;
  } else {
    return unimplemented(f.path() + ": architecture '" + arch + "' is not supported (tessera runs llama and gpt2)");
  }
  const std::string p = arch + ".";
  c.name = f.get_string_or("general.name", arch);
  TESSERA_ASSIGN_OR_RETURN(c.context_length, positive_int(f, p + "context_length"));
  TESSERA_ASSIGN_OR_RETURN(c.hidden, positive_int(f, p + "embedding_length"));
  TESSERA_ASSIGN_OR_RETURN(c.layers, positive_int(f, p + "block_count"));
  TESSERA_ASSIGN_OR_RETURN(c.ffn_hidden, positive_int(f, p + "feed_forward_length"));
  TESSERA_ASSIGN_OR_RETURN(c.heads, positive_int(f, p + "attention.head_count"));
  c.kv_heads = f.find(p + "attention.head_count_kv") ? f.get_int_or(p + "attention.head_count_kv", c.heads) : c.heads;
  if (c.arch == Architecture::kLlama) {
    c.norm_eps = static_cast<float>(f.get_float_or(p + "attention.layer_norm_rms_epsilon", 1e-5));
    c.rope_theta = static_cast<float>(f.get_float_or(p + "rope.freq_base", 10000.0));
    const int64_t rope_dims = f.get_int_or(p + "rope.dimension_count", c.head_dim());
    if (rope_dims != c.head_dim()) {
      return unimplemented(f.path() + ": RoPE over " + std::to_string(rope_dims) + " of " +
                           std::to_string(c.head_dim()) + " head dims (partial rotary) is not supported");
    }
    const std::string scaling = f.get_string_or(p + "rope.scaling.type", "none");
    const double factor = f.get_float_or(p + "rope.scaling.factor", 1.0);
    if (scaling == "linear" && factor != 1.0) {
      c.rope_scaling = RopeScaling::kLinear;
      c.rope_scale_factor = static_cast<float>(factor);
    } else if (scaling == "yarn") {
      c.rope_scaling = RopeScaling::kYarn;
      c.rope_scale_factor = static_cast<float>(factor);
      c.rope_original_context = f.get_int_or(p + "rope.scaling.original_context_length", c.context_length);
    } else if (scaling != "none" && scaling != "linear") {
      return unimplemented(f.path() + ": RoPE scaling '" + scaling + "' is not supported");
    }
  } else {
    c.norm_eps = static_cast<float>(f.get_float_or(p + "attention.layer_norm_epsilon", 1e-5));
  }
  const GgufTensorInfo* embd = f.find_tensor("token_embd.weight");
  if (!embd || embd->dims.size() != 2) return invalid_argument(f.path() + ": no 2-D token_embd.weight tensor");
  c.vocab_size = embd->dims[1];
  if (f.find(p + "vocab_size") && f.get_int_or(p + "vocab_size", c.vocab_size) != c.vocab_size) {
    return invalid_argument(f.path() + ": " + p + "vocab_size differs from token_embd.weight's rows");
  }
  c.tied_embeddings = f.find_tensor("output.weight") == nullptr;
  TESSERA_RETURN_IF_ERROR(c.validate().with_context(f.path()));
  return c;
}

Result<WeightMap> load_gguf_weights(const GgufFile& f, const ModelConfig& config, bool join_projections) {
  WeightMap weights;
  std::set<std::string> joined_parts;
  for (const JoinedProjection& j : join_projections ? joined_projections(config) : std::vector<JoinedProjection>{}) {
    std::vector<const GgufTensorInfo*> parts;
    for (size_t i = 0; i < j.parts.size(); ++i) {
      const GgufTensorInfo* t = f.find_tensor(j.parts[i]);
      if (!t || !t->type || t->dims != std::vector<int64_t>{j.k, j.rows[i]} || (!parts.empty() && t->type != parts[0]->type)) break;
      parts.push_back(t);
    }
    if (parts.size() != j.parts.size()) continue;  // loaded one by one: the graph builder names what is wrong
    int64_t rows = 0;
    for (int64_t r : j.rows) rows += r;
    const int64_t row_bytes = quant::row_bytes(*parts[0]->type, j.k);
    auto w = make_weight(*parts[0]->type, {j.k, rows}, [&](void* dst) {
      auto* at = static_cast<uint8_t*>(dst);
      for (size_t i = 0; i < parts.size(); ++i) {
        TESSERA_RETURN_IF_ERROR(f.read_tensor(*parts[i], at).with_context("tensor '" + j.parts[i] + "'"));
        at += j.rows[i] * row_bytes;
      }
      return Status();
    });
    if (!w.ok()) return w.status().with_context(f.path() + ": tensor '" + j.parts[0] + "' and the rest of " + j.name);
    weights.emplace(j.name, std::move(*w));
    joined_parts.insert(j.parts.begin(), j.parts.end());
  }
  for (const GgufTensorInfo& t : f.tensors()) {
    if (joined_parts.count(t.name)) continue;
    if (!t.type) {
      return unimplemented(f.path() + ": tensor '" + t.name + "' has ggml type " + std::to_string(t.ggml_type) +
                           ", which tessera does not read (it reads f32, f16, bf16, q8_0, q4_0, q4_k, q6_k)");
    }
    if (t.dims.size() > 2) {
      return unimplemented(f.path() + ": tensor '" + t.name + "' has " + std::to_string(t.dims.size()) + " dims");
    }
    auto w = make_weight(*t.type, t.dims, [&](void* dst) { return f.read_tensor(t, dst); });
    if (!w.ok()) return w.status().with_context(f.path() + ": tensor '" + t.name + "'");
    weights.emplace(t.name, std::move(*w));
  }
  return weights;
}

Result<TokenizerVocab> vocab_from_gguf(const GgufFile& f) {
  TokenizerVocab v;
  TESSERA_ASSIGN_OR_RETURN(v.model, f.get_string("tokenizer.ggml.model"));
  v.pre = f.get_string_or("tokenizer.ggml.pre", "");
  const GgufValue* tokens = f.find("tokenizer.ggml.tokens");
  if (!tokens || tokens->type != GgufType::kArray || tokens->array_type != GgufType::kString) {
    return invalid_argument(f.path() + ": tokenizer.ggml.tokens must be an array of strings");
  }
  v.tokens = tokens->strings;
  if (const GgufValue* s = f.find("tokenizer.ggml.scores"); s && s->type == GgufType::kArray) {
    v.scores.assign(s->floats.begin(), s->floats.end());
  }
  if (const GgufValue* s = f.find("tokenizer.ggml.token_type"); s && s->type == GgufType::kArray) {
    v.token_types.assign(s->ints.begin(), s->ints.end());
  }
  if (const GgufValue* s = f.find("tokenizer.ggml.merges"); s && s->type == GgufType::kArray) v.merges = s->strings;
  v.bos_id = static_cast<int32_t>(f.get_int_or("tokenizer.ggml.bos_token_id", -1));
  v.eos_id = static_cast<int32_t>(f.get_int_or("tokenizer.ggml.eos_token_id", -1));
  v.unk_id = static_cast<int32_t>(f.get_int_or("tokenizer.ggml.unknown_token_id", -1));
  v.pad_id = static_cast<int32_t>(f.get_int_or("tokenizer.ggml.padding_token_id", -1));
  v.add_bos = f.get_bool_or("tokenizer.ggml.add_bos_token", v.model == "llama");
  v.add_space_prefix = f.get_bool_or("tokenizer.ggml.add_space_prefix", v.model == "llama");
  return v;
}

void write_config_to_gguf(const ModelConfig& c, GgufWriter& w) {
  const std::string arch = architecture_name(c.arch);
  const std::string p = arch + ".";
  w.set_string("general.architecture", arch);
  w.set_string("general.name", c.name);
  w.set_uint32(p + "context_length", static_cast<uint32_t>(c.context_length));
  w.set_uint32(p + "embedding_length", static_cast<uint32_t>(c.hidden));
  w.set_uint32(p + "block_count", static_cast<uint32_t>(c.layers));
  w.set_uint32(p + "feed_forward_length", static_cast<uint32_t>(c.ffn_hidden));
  w.set_uint32(p + "attention.head_count", static_cast<uint32_t>(c.heads));
  w.set_uint32(p + "attention.head_count_kv", static_cast<uint32_t>(c.kv_heads));
  if (c.arch == Architecture::kLlama) {
    w.set_float32(p + "attention.layer_norm_rms_epsilon", c.norm_eps);
    w.set_float32(p + "rope.freq_base", c.rope_theta);
    w.set_uint32(p + "rope.dimension_count", static_cast<uint32_t>(c.head_dim()));
    if (c.rope_scaling == RopeScaling::kLinear) {
      w.set_string(p + "rope.scaling.type", "linear");
      w.set_float32(p + "rope.scaling.factor", c.rope_scale_factor);
    }
  } else {
    w.set_float32(p + "attention.layer_norm_epsilon", c.norm_eps);
  }
  w.set_uint32(p + "vocab_size", static_cast<uint32_t>(c.vocab_size));
}

void write_vocab_to_gguf(const TokenizerVocab& v, GgufWriter& w) {
  w.set_string("tokenizer.ggml.model", v.model);
  if (!v.pre.empty()) w.set_string("tokenizer.ggml.pre", v.pre);
  w.set_string_array("tokenizer.ggml.tokens", v.tokens);
  if (!v.scores.empty()) w.set_float32_array("tokenizer.ggml.scores", v.scores);
  if (!v.token_types.empty()) w.set_int32_array("tokenizer.ggml.token_type", v.token_types);
  if (!v.merges.empty()) w.set_string_array("tokenizer.ggml.merges", v.merges);
  if (v.bos_id >= 0) w.set_uint32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(v.bos_id));
  if (v.eos_id >= 0) w.set_uint32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(v.eos_id));
  if (v.unk_id >= 0) w.set_uint32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(v.unk_id));
  if (v.pad_id >= 0) w.set_uint32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(v.pad_id));
  w.set_bool("tokenizer.ggml.add_bos_token", v.add_bos);
  w.set_bool("tokenizer.ggml.add_space_prefix", v.add_space_prefix);
}

}  // namespace tessera::llm
