#include "llm/hf_model.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "llm/safetensors.h"

namespace tessera::llm {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Typed access to config.json's keys; every error names the file and the key.
class ConfigJson {
 public:
  ConfigJson(std::string path, json doc) : path_(std::move(path)), doc_(std::move(doc)) {}

  bool has(const std::string& key) const { return doc_.contains(key) && !doc_[key].is_null(); }
  const json& at(const std::string& key) const { return doc_[key]; }
  std::string where() const { return path_ + ": "; }
  Status error(const std::string& why) const { return invalid_argument(where() + why); }

  Result<int64_t> positive(const std::string& key) const {
    if (!has(key)) return error("missing \"" + key + "\"");
    return positive_value(key, doc_[key]);
  }
  Result<int64_t> positive_or(const std::string& key, int64_t fallback) const {
    return has(key) ? positive(key) : Result<int64_t>(fallback);
  }
  Result<double> number_or(const std::string& key, double fallback) const {
    if (!has(key)) return fallback;
    return number_value(key, doc_[key]);
  }
  Result<bool> bool_or(const std::string& key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!doc_[key].is_boolean())
      return error("\"" + key + "\" must be true or false, got " + doc_[key].dump());
    return doc_[key].get<bool>();
  }
  Result<std::string> string_or(const std::string& key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!doc_[key].is_string())
      return error("\"" + key + "\" must be a string, got " + doc_[key].dump());
    return doc_[key].get<std::string>();
  }

  Result<int64_t> positive_value(const std::string& key, const json& v) const {
    if (!v.is_number_integer()) return error("\"" + key + "\" must be an integer, got " + v.dump());
    const int64_t n = v.get<int64_t>();
    if (n <= 0 || n > (int64_t{1} << 31))
      return error("\"" + key + "\" = " + std::to_string(n) + " is out of range");
    return n;
  }
  Result<double> number_value(const std::string& key, const json& v) const {
    if (!v.is_number()) return error("\"" + key + "\" must be a number, got " + v.dump());
    return v.get<double>();
  }

 private:
  std::string path_;
  json doc_;
};

Result<json> read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  json doc = json::parse(ss.str(), nullptr, false);
  if (doc.is_discarded()) return invalid_argument(path + ": not valid JSON");
  if (!doc.is_object()) return invalid_argument(path + ": not a JSON object");
  return doc;
}

// rope_scaling: null, {"type" or "rope_type": "linear", "factor"}, or {"rope_type": "llama3", ...}.
Status read_rope_scaling(const ConfigJson& cfg, ModelConfig& c) {
  if (!cfg.has("rope_scaling")) return Status();
  const json& rs = cfg.at("rope_scaling");
  if (!rs.is_object()) return cfg.error("\"rope_scaling\" must be an object, got " + rs.dump());
  std::string type;
  for (const char* key : {"rope_type", "type"}) {
    if (rs.contains(key) && rs[key].is_string()) type = rs[key].get<std::string>();
  }
  if (type.empty()) return cfg.error("\"rope_scaling\" has no \"type\" or \"rope_type\" string");
  if (type == "default") return Status();
  auto number = [&](const char* key, std::optional<double> fallback) -> Result<double> {
    const std::string name = std::string("rope_scaling.") + key;
    if (!rs.contains(key) || rs[key].is_null()) {
      if (fallback) return *fallback;
      return cfg.error("missing \"" + name + "\"");
    }
    return cfg.number_value(name, rs[key]);
  };
  if (type == "linear") {
    TESSERA_ASSIGN_OR_RETURN(double factor, number("factor", std::nullopt));
    if (factor <= 0) return cfg.error("\"rope_scaling.factor\" must be positive");
    if (factor != 1.0) c.rope_scaling = RopeScaling::kLinear;
    c.rope_scale_factor = static_cast<float>(factor);
    return Status();
  }
  if (type == "llama3") {
    TESSERA_ASSIGN_OR_RETURN(double factor, number("factor", std::nullopt));
    TESSERA_ASSIGN_OR_RETURN(double low, number("low_freq_factor", 1.0));
    TESSERA_ASSIGN_OR_RETURN(double high, number("high_freq_factor", 4.0));
    if (!rs.contains("original_max_position_embeddings"))
      return cfg.error("missing \"rope_scaling.original_max_position_embeddings\"");
    TESSERA_ASSIGN_OR_RETURN(int64_t original,
                             cfg.positive_value("rope_scaling.original_max_position_embeddings",
                                                rs["original_max_position_embeddings"]));
    if (factor <= 0 || low <= 0 || high <= low)
      return cfg.error("\"rope_scaling\" llama3 factors are out of range");
    c.rope_scaling = RopeScaling::kLlama3;
    c.rope_scale_factor = static_cast<float>(factor);
    c.rope_low_freq_factor = static_cast<float>(low);
    c.rope_high_freq_factor = static_cast<float>(high);
    c.rope_original_context = original;
    return Status();
  }
  return unimplemented(cfg.where() + "RoPE scaling '" + type +
                       "' is not supported (tessera reads linear and llama3)");
}

Status read_llama_config(const ConfigJson& cfg, ModelConfig& c) {
  c.arch = Architecture::kLlama;
  TESSERA_ASSIGN_OR_RETURN(c.hidden, cfg.positive("hidden_size"));
  TESSERA_ASSIGN_OR_RETURN(c.ffn_hidden, cfg.positive("intermediate_size"));
  TESSERA_ASSIGN_OR_RETURN(c.layers, cfg.positive("num_hidden_layers"));
  TESSERA_ASSIGN_OR_RETURN(c.heads, cfg.positive("num_attention_heads"));
  TESSERA_ASSIGN_OR_RETURN(c.kv_heads, cfg.positive_or("num_key_value_heads", c.heads));
  TESSERA_ASSIGN_OR_RETURN(c.context_length, cfg.positive("max_position_embeddings"));
  TESSERA_ASSIGN_OR_RETURN(c.vocab_size, cfg.positive("vocab_size"));
  TESSERA_ASSIGN_OR_RETURN(double eps, cfg.number_or("rms_norm_eps", 1e-6));
  TESSERA_ASSIGN_OR_RETURN(double theta, cfg.number_or("rope_theta", 10000.0));
  c.norm_eps = static_cast<float>(eps);
  c.rope_theta = static_cast<float>(theta);
  TESSERA_ASSIGN_OR_RETURN(c.tied_embeddings, cfg.bool_or("tie_word_embeddings", false));
  // Sliding-window attention (Mistral): tessera attends to the whole sequence, which is the same
  // up to the window's length, so the context stops there.
  if (cfg.has("sliding_window")) {
    TESSERA_ASSIGN_OR_RETURN(int64_t window, cfg.positive("sliding_window"));
    c.context_length = std::min(c.context_length, window);
  }
  if (cfg.has("head_dim")) {
    TESSERA_ASSIGN_OR_RETURN(int64_t head_dim, cfg.positive("head_dim"));
    if (head_dim * c.heads != c.hidden) {
      return unimplemented(cfg.where() + "head_dim " + std::to_string(head_dim) + " x " +
                           std::to_string(c.heads) + " heads differs from hidden_size " +
                           std::to_string(c.hidden) + ", which tessera does not support");
    }
  }
  TESSERA_ASSIGN_OR_RETURN(std::string act, cfg.string_or("hidden_act", "silu"));
  if (act != "silu")
    return unimplemented(cfg.where() + "hidden_act '" + act +
                         "' is not supported (LLaMA uses silu)");
  for (const char* key : {"attention_bias", "mlp_bias"}) {
    TESSERA_ASSIGN_OR_RETURN(bool bias, cfg.bool_or(key, false));
    if (bias) return unimplemented(cfg.where() + std::string(key) + " is not supported");
  }
  return read_rope_scaling(cfg, c);
}

Status read_gpt2_config(const ConfigJson& cfg, ModelConfig& c) {
  c.arch = Architecture::kGpt2;
  TESSERA_ASSIGN_OR_RETURN(c.hidden, cfg.positive("n_embd"));
  TESSERA_ASSIGN_OR_RETURN(c.layers, cfg.positive("n_layer"));
  TESSERA_ASSIGN_OR_RETURN(c.heads, cfg.positive("n_head"));
  c.kv_heads = c.heads;
  if (cfg.has("n_positions")) {
    TESSERA_ASSIGN_OR_RETURN(c.context_length, cfg.positive("n_positions"));
  } else {
    TESSERA_ASSIGN_OR_RETURN(c.context_length, cfg.positive("n_ctx"));
  }
  TESSERA_ASSIGN_OR_RETURN(c.vocab_size, cfg.positive("vocab_size"));
  TESSERA_ASSIGN_OR_RETURN(c.ffn_hidden, cfg.positive_or("n_inner", 4 * c.hidden));
  TESSERA_ASSIGN_OR_RETURN(double eps, cfg.number_or("layer_norm_epsilon", 1e-5));
  c.norm_eps = static_cast<float>(eps);
  TESSERA_ASSIGN_OR_RETURN(c.tied_embeddings, cfg.bool_or("tie_word_embeddings", true));
  if (!c.tied_embeddings)
    return unimplemented(cfg.where() + "GPT-2 with an untied LM head is not supported");
  return Status();
}

// ---- weights ----

int64_t element_bytes(quant::QType t) { return t == quant::QType::kF32 ? 4 : 2; }

// How a tensor's rows are laid out relative to GGUF's.
enum class Layout {
  kAsIs,       // torch Linear [out, in], embeddings, vectors
  kRopeRows,   // LLaMA q/k: rows permuted per head (the value is the head count)
  kTranspose,  // GPT-2 Conv1D [in, out]
};

struct Wanted {
  std::string hf_name;  // as in the file (GPT-2: without "transformer.")
  std::string gguf_name;
  std::vector<int64_t> shape;  // the HF (row-major) shape expected
  Layout layout = Layout::kAsIs;
  int64_t heads = 0;  // kRopeRows
};

std::vector<Wanted> llama_tensors(const ModelConfig& c) {
  const int64_t h = c.hidden, kv = c.kv_heads * c.head_dim(), f = c.ffn_hidden;
  std::vector<Wanted> t;
  t.push_back({"model.embed_tokens.weight", "token_embd.weight", {c.vocab_size, h}});
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string hf = "model.layers." + std::to_string(l) + ".",
                      g = "blk." + std::to_string(l) + ".";
    t.push_back({hf + "input_layernorm.weight", g + "attn_norm.weight", {h}});
    t.push_back(
        {hf + "self_attn.q_proj.weight", g + "attn_q.weight", {h, h}, Layout::kRopeRows, c.heads});
    t.push_back({hf + "self_attn.k_proj.weight",
                 g + "attn_k.weight",
                 {kv, h},
                 Layout::kRopeRows,
                 c.kv_heads});
    t.push_back({hf + "self_attn.v_proj.weight", g + "attn_v.weight", {kv, h}});
    t.push_back({hf + "self_attn.o_proj.weight", g + "attn_output.weight", {h, h}});
    t.push_back({hf + "post_attention_layernorm.weight", g + "ffn_norm.weight", {h}});
    t.push_back({hf + "mlp.gate_proj.weight", g + "ffn_gate.weight", {f, h}});
    t.push_back({hf + "mlp.up_proj.weight", g + "ffn_up.weight", {f, h}});
    t.push_back({hf + "mlp.down_proj.weight", g + "ffn_down.weight", {h, f}});
  }
  t.push_back({"model.norm.weight", "output_norm.weight", {h}});
  if (!c.tied_embeddings) t.push_back({"lm_head.weight", "output.weight", {c.vocab_size, h}});
  return t;
}

std::vector<Wanted> gpt2_tensors(const ModelConfig& c) {
  const int64_t h = c.hidden, f = c.ffn_hidden;
  std::vector<Wanted> t;
  t.push_back({"wte.weight", "token_embd.weight", {c.vocab_size, h}});
  t.push_back({"wpe.weight", "position_embd.weight", {c.context_length, h}});
  auto norm = [&](const std::string& hf, const std::string& g) {
    t.push_back({hf + ".weight", g + ".weight", {h}});
    t.push_back({hf + ".bias", g + ".bias", {h}});
  };
  auto conv1d = [&](const std::string& hf, const std::string& g, int64_t in, int64_t out) {
    t.push_back({hf + ".weight", g + ".weight", {in, out}, Layout::kTranspose});
    t.push_back({hf + ".bias", g + ".bias", {out}});
  };
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string hf = "h." + std::to_string(l) + ".", g = "blk." + std::to_string(l) + ".";
    norm(hf + "ln_1", g + "attn_norm");
    conv1d(hf + "attn.c_attn", g + "attn_qkv", h, 3 * h);
    conv1d(hf + "attn.c_proj", g + "attn_output", h, h);
    norm(hf + "ln_2", g + "ffn_norm");
    conv1d(hf + "mlp.c_fc", g + "ffn_up", h, f);
    conv1d(hf + "mlp.c_proj", g + "ffn_down", f, h);
  }
  norm("ln_f", "output_norm");
  return t;
}

// Buffers and duplicates that checkpoints carry and the graph does not need.
bool ignorable(const std::string& name, const ModelConfig& c) {
  if (ends_with(name, ".attn.bias") || ends_with(name, ".attn.masked_bias"))
    return c.arch == Architecture::kGpt2;
  if (ends_with(name, "rotary_emb.inv_freq")) return true;
  return name == "lm_head.weight" && c.tied_embeddings;  // a saved copy of the tied embedding
}

// The rows of a [rows, cols] matrix of `eb`-byte elements in GGUF's layout.
void convert_layout(const Wanted& w, int64_t eb, const uint8_t* src, uint8_t* dst) {
  if (w.layout == Layout::kTranspose) {
    const int64_t in = w.shape[0], out = w.shape[1];  // src [in][out] -> dst [out][in]
    for (int64_t i = 0; i < in; ++i) {
      for (int64_t o = 0; o < out; ++o)
        std::memcpy(dst + (o * in + i) * eb, src + (i * out + o) * eb, eb);
    }
    return;
  }
  // kRopeRows: within each head, new row 2j + p = old row p * half + j (llama.cpp's permute:
  // reshape(heads, 2, half, cols).swapaxes(1, 2)).
  const int64_t rows = w.shape[0], row_bytes = w.shape[1] * eb, hd = rows / w.heads, half = hd / 2;
  for (int64_t h = 0; h < w.heads; ++h) {
    for (int64_t j = 0; j < half; ++j) {
      for (int64_t p = 0; p < 2; ++p) {
        std::memcpy(dst + (h * hd + 2 * j + p) * row_bytes,
                    src + (h * hd + p * half + j) * row_bytes, row_bytes);
      }
    }
  }
}

struct Located {
  const SafetensorsFile* file = nullptr;
  const SafetensorsFile::Entry* entry = nullptr;
};

Result<ModelWeight> convert(const Wanted& w, const std::string& stored_name, const Located& at) {
  const SafetensorsFile::Entry& e = *at.entry;
  const std::string where = at.file->path() + ": tensor '" + stored_name + "'";
  if (e.shape != w.shape) {
    return invalid_argument(where + " has shape " + shape_string(e.shape) +
                            ", but config.json means " + shape_string(w.shape));
  }
  // GGUF dims: the contiguous (reduction) dim first.
  std::vector<int64_t> dims;
  if (w.shape.size() == 1) {
    dims = {w.shape[0]};
  } else if (w.layout == Layout::kTranspose) {
    dims = {w.shape[0], w.shape[1]};
  } else {
    dims = {w.shape[1], w.shape[0]};
  }
  if (w.layout == Layout::kRopeRows &&
      (w.shape[0] % w.heads != 0 || (w.shape[0] / w.heads) % 2 != 0)) {
    return invalid_argument(where + ": rows do not split into " + std::to_string(w.heads) +
                            " heads of even size");
  }
  auto weight = make_weight(e.type, dims, [&](void* dst) -> Status {
    if (w.layout == Layout::kAsIs || w.shape.size() == 1) return at.file->read(e, dst);
    std::vector<uint8_t> stored(static_cast<size_t>(e.nbytes));
    TESSERA_RETURN_IF_ERROR(at.file->read(e, stored.data()));
    convert_layout(w, element_bytes(e.type), stored.data(), static_cast<uint8_t*>(dst));
    return Status();
  });
  if (!weight.ok()) return weight.status().with_context(where);
  return weight;
}

}  // namespace

Result<ModelConfig> config_from_hf_json(const std::string& config_json_path) {
  TESSERA_ASSIGN_OR_RETURN(json doc, read_json(config_json_path));
  const ConfigJson cfg(config_json_path, std::move(doc));
  if (!cfg.has("model_type")) return cfg.error("missing \"model_type\"");
  TESSERA_ASSIGN_OR_RETURN(std::string type, cfg.string_or("model_type", ""));
  ModelConfig c;
  if (type == "llama" || type == "mistral") {
    TESSERA_RETURN_IF_ERROR(read_llama_config(cfg, c));
  } else if (type == "gpt2") {
    TESSERA_RETURN_IF_ERROR(read_gpt2_config(cfg, c));
  } else {
    return unimplemented(config_json_path + ": model_type '" + type +
                         "' is not supported (tessera reads llama, mistral and gpt2)");
  }
  TESSERA_ASSIGN_OR_RETURN(c.name, cfg.string_or("_name_or_path", type));
  if (c.name.empty()) c.name = type;
  TESSERA_RETURN_IF_ERROR(c.validate().with_context(config_json_path));
  return c;
}

Result<WeightMap> weights_from_safetensors(const std::vector<std::string>& shards,
                                           const ModelConfig& config) {
  if (shards.empty()) return invalid_argument("no safetensors files");
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  std::map<std::string, Located> by_name;
  for (const std::string& path : shards) {
    TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> f, SafetensorsFile::open(path));
    for (const SafetensorsFile::Entry& e : f->tensors()) {
      if (!by_name.emplace(e.name, Located{f.get(), &e}).second) {
        return invalid_argument(path + ": tensor '" + e.name + "' is also in " +
                                by_name[e.name].file->path());
      }
    }
    files.push_back(std::move(f));
  }
  const bool gpt2 = config.arch == Architecture::kGpt2;
  // GPT2LMHeadModel checkpoints name the tensors "transformer.h.0...", GPT2Model ones "h.0...".
  auto stored_name = [&](const std::string& hf) {
    if (gpt2 && !by_name.count(hf) && by_name.count("transformer." + hf))
      return "transformer." + hf;
    return hf;
  };
  WeightMap weights;
  std::set<std::string> used;
  for (const Wanted& w : gpt2 ? gpt2_tensors(config) : llama_tensors(config)) {
    const std::string name = stored_name(w.hf_name);
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      return not_found(shards[0] + (shards.size() > 1 ? " (and the other shards)" : "") +
                       ": no tensor '" + w.hf_name + "'");
    }
    TESSERA_ASSIGN_OR_RETURN(ModelWeight mw, convert(w, name, it->second));
    weights.emplace(w.gguf_name, std::move(mw));
    used.insert(name);
  }
  for (const auto& [name, at] : by_name) {
    const std::string bare = gpt2 && name.rfind("transformer.", 0) == 0 ? name.substr(12) : name;
    if (!used.count(name) && !ignorable(bare, config)) {
      return unimplemented(at.file->path() + ": tensor '" + name + "' is not one tessera's " +
                           architecture_name(config.arch) + " graph uses");
    }
  }
  return weights;
}

bool is_hf_model_path(const std::string& path) {
  std::error_code ec;
  return ends_with(path, ".safetensors") || fs::is_directory(path, ec);
}

Result<std::unique_ptr<LanguageModel>> load_hf_model(const std::string& dir,
                                                     const ModelOptions& opts) {
  std::error_code ec;
  fs::path folder(dir);
  if (ends_with(dir, ".safetensors")) {
    if (!fs::is_regular_file(folder, ec)) return not_found(dir + ": no such file");
    folder = folder.parent_path();
  }
  if (folder.empty()) folder = ".";
  if (!fs::is_directory(folder, ec)) return not_found(dir + ": not a model folder");
  TESSERA_ASSIGN_OR_RETURN(ModelConfig config,
                           config_from_hf_json((folder / "config.json").string()));
  TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> shards, safetensors_shards(folder.string()));
  TESSERA_ASSIGN_OR_RETURN(WeightMap weights, weights_from_safetensors(shards, config));
  std::optional<TokenizerVocab> vocab;
  const fs::path tokenizer = folder / "tokenizer.json";
  if (fs::is_regular_file(tokenizer, ec)) {
    TESSERA_ASSIGN_OR_RETURN(TokenizerVocab v, load_hf_tokenizer_json(tokenizer.string()));
    if (static_cast<int64_t>(v.tokens.size()) > config.vocab_size) {
      return invalid_argument(tokenizer.string() + ": " + std::to_string(v.tokens.size()) +
                              " tokens, more than config.json's vocab_size " +
                              std::to_string(config.vocab_size));
    }
    vocab = std::move(v);
  }
  return LanguageModel::create(config, std::move(weights), vocab ? &*vocab : nullptr, opts);
}

}  // namespace tessera::llm
