// Hugging Face folders (config.json + safetensors) against the same weights given in GGUF naming:
// random weights are written out the way transformers stores them (q/k rows in HF's rotate-half
// order, GPT-2's Conv1D transposed), loaded back with load_hf_model, and must give the logits of
// LanguageModel::create on the originals. Bad configs and tensors fail naming the key or tensor.
#include "llm/hf_model.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "llm/language_model.h"
#include "llm/model_writer.h"

namespace tessera::llm {
namespace {
namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

class TempDir {
 public:
  explicit TempDir(const std::string& name)
      : path_(fs::temp_directory_path() /
              ("tessera_hf_model_" + std::to_string(getpid()) + "_" + name)) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

ModelConfig llama_config() {
  ModelConfig c;
  c.hidden = 64;
  c.ffn_hidden = 96;
  c.layers = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.context_length = 128;
  c.vocab_size = 300;
  c.rope_theta = 10000.0f;
  c.norm_eps = 1e-5f;
  return c;
}

ModelConfig gpt2_config() {
  ModelConfig c = llama_config();
  c.arch = Architecture::kGpt2;
  c.kv_heads = c.heads;
  c.ffn_hidden = 4 * c.hidden;  // config.json leaves n_inner out: the default
  c.context_length = 64;
  c.tied_embeddings = true;
  return c;
}

json config_json(const ModelConfig& c) {
  if (c.arch == Architecture::kGpt2) {
    return {{"model_type", "gpt2"},
            {"n_embd", c.hidden},
            {"n_layer", c.layers},
            {"n_head", c.heads},
            {"n_positions", c.context_length},
            {"vocab_size", c.vocab_size},
            {"layer_norm_epsilon", 1e-5}};
  }
  return {{"model_type", "llama"},
          {"hidden_size", c.hidden},
          {"intermediate_size", c.ffn_hidden},
          {"num_hidden_layers", c.layers},
          {"num_attention_heads", c.heads},
          {"num_key_value_heads", c.kv_heads},
          {"rms_norm_eps", 1e-5},
          {"rope_theta", 10000.0},
          {"max_position_embeddings", c.context_length},
          {"vocab_size", c.vocab_size},
          {"tie_word_embeddings", c.tied_embeddings},
          {"rope_scaling", nullptr}};
}

// One tensor as transformers saves it.
struct HfTensor {
  std::string name;
  std::string dtype;  // "F32" / "F16"
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// GGUF name -> the HF name (written separately from the loader's table).
std::string hf_name(const ModelConfig& c, const std::string& gguf) {
  static const std::map<std::string, std::string> llama = {
      {"attn_norm.weight", "input_layernorm.weight"},
      {"attn_q.weight", "self_attn.q_proj.weight"},
      {"attn_k.weight", "self_attn.k_proj.weight"},
      {"attn_v.weight", "self_attn.v_proj.weight"},
      {"attn_output.weight", "self_attn.o_proj.weight"},
      {"ffn_norm.weight", "post_attention_layernorm.weight"},
      {"ffn_gate.weight", "mlp.gate_proj.weight"},
      {"ffn_up.weight", "mlp.up_proj.weight"},
      {"ffn_down.weight", "mlp.down_proj.weight"}};
  static const std::map<std::string, std::string> gpt2 = {
      {"attn_norm", "ln_1"}, {"attn_qkv", "attn.c_attn"}, {"attn_output", "attn.c_proj"},
      {"ffn_norm", "ln_2"},  {"ffn_up", "mlp.c_fc"},      {"ffn_down", "mlp.c_proj"}};
  const bool is_gpt2 = c.arch == Architecture::kGpt2;
  if (gguf.rfind("blk.", 0) == 0) {
    const size_t dot = gguf.find('.', 4);
    const std::string layer = gguf.substr(4, dot - 4), rest = gguf.substr(dot + 1);
    if (!is_gpt2) return "model.layers." + layer + "." + llama.at(rest);
    const size_t d = rest.find('.');
    return "transformer.h." + layer + "." + gpt2.at(rest.substr(0, d)) + rest.substr(d);
  }
  if (is_gpt2) {
    const std::map<std::string, std::string> top = {{"token_embd.weight", "wte.weight"},
                                                    {"position_embd.weight", "wpe.weight"},
                                                    {"output_norm.weight", "ln_f.weight"},
                                                    {"output_norm.bias", "ln_f.bias"}};
    return "transformer." + top.at(gguf);
  }
  const std::map<std::string, std::string> top = {
      {"token_embd.weight", "model.embed_tokens.weight"},
      {"output_norm.weight", "model.norm.weight"},
      {"output.weight", "lm_head.weight"}};
  return top.at(gguf);
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The model's random weights in GGUF naming (for create) and in HF naming and layout (for the
// file).
struct TwoForms {
  WeightMap gguf;
  std::vector<HfTensor> hf;
};

TwoForms make_weights(const ModelConfig& c, quant::QType type, uint64_t seed) {
  TwoForms out;
  for (const RandomTensor& t : model_tensor_list(c, type)) {
    const int64_t cols = t.dims[0], rows = t.dims.size() > 1 ? t.dims[1] : 1;
    const int64_t eb = t.type == quant::QType::kF32 ? 4 : 2;
    std::vector<uint8_t> gguf(static_cast<size_t>(rows * cols * eb));
    fill_random_tensor(t, seed, gguf.data());
    auto w = make_weight(t.type, t.dims, [&](void* dst) {
      std::memcpy(dst, gguf.data(), gguf.size());
      return Status();
    });
    EXPECT_TRUE(w.ok()) << w.status().to_string();
    out.gguf.emplace(t.name, std::move(*w));

    HfTensor h{hf_name(c, t.name), eb == 4 ? "F32" : "F16", {}, gguf};
    const bool matrix = t.dims.size() == 2;
    const bool conv1d = c.arch == Architecture::kGpt2 && matrix && t.name.rfind("blk.", 0) == 0;
    const bool rope_rows = c.arch == Architecture::kLlama && (ends_with(t.name, "attn_q.weight") ||
                                                              ends_with(t.name, "attn_k.weight"));
    if (!matrix) {
      h.shape = {cols};
    } else if (conv1d) {
      // Conv1D stores [in, out]: element (i, o) = GGUF row o, column i.
      h.shape = {cols, rows};
      for (int64_t i = 0; i < cols; ++i)
        for (int64_t o = 0; o < rows; ++o)
          std::memcpy(&h.bytes[(i * rows + o) * eb], &gguf[(o * cols + i) * eb], eb);
    } else {
      h.shape = {rows, cols};
      if (rope_rows) {
        // HF order: row p * half + j of a head is GGUF's row 2j + p (the inverse of llama.cpp's
        // permute).
        const int64_t hd = c.head_dim(), half = hd / 2;
        for (int64_t head = 0; head < rows / hd; ++head)
          for (int64_t j = 0; j < half; ++j)
            for (int64_t p = 0; p < 2; ++p)
              std::memcpy(&h.bytes[(head * hd + p * half + j) * cols * eb],
                          &gguf[(head * hd + 2 * j + p) * cols * eb], cols * eb);
      }
    }
    out.hf.push_back(std::move(h));
  }
  if (c.arch == Architecture::kGpt2) {  // the causal-mask buffer transformers saves: skipped
    HfTensor mask{"transformer.h.0.attn.bias", "F32", {1, 1, 4, 4}, std::vector<uint8_t>(64, 0)};
    out.hf.push_back(std::move(mask));
  }
  return out;
}

void write_safetensors(const fs::path& path, const std::vector<HfTensor>& tensors) {
  json header = json::object();
  uint64_t offset = 0;
  for (const HfTensor& t : tensors) {
    header[t.name] = {{"dtype", t.dtype},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  header["__metadata__"] = {{"format", "pt"}};
  std::string text = header.dump();
  while (text.size() % 8) text += ' ';
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = text.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const HfTensor& t : tensors)
    out.write(reinterpret_cast<const char*>(t.bytes.data()),
              static_cast<std::streamsize>(t.bytes.size()));
}

void write_text(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

void write_folder(const fs::path& dir, const json& config, const std::vector<HfTensor>& tensors) {
  write_text(dir / "config.json", config.dump(2));
  write_safetensors(dir / "model.safetensors", tensors);
}

ModelOptions small_options() {
  ModelOptions o;
  o.kv_cache_tokens = 64;
  o.kv_block_size = 4;
  return o;
}

// max |a - b| / max |b|.
double relative_error(const Tensor& a, const Tensor& b) {
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < b.numel(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a.data<float>()[i]) - b.data<float>()[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b.data<float>()[i])));
  }
  return diff / std::max(scale, 1e-30);
}

void expect_folder_matches_weights(const ModelConfig& c, quant::QType type,
                                   const std::string& name) {
  TempDir dir(name);
  TwoForms w = make_weights(c, type, 11);
  write_folder(dir.path(), config_json(c), w.hf);
  auto from_hf = load_hf_model(dir.path().string(), small_options());
  ASSERT_TRUE(from_hf.ok()) << from_hf.status().to_string();
  const ModelConfig& got = (*from_hf)->config();
  EXPECT_EQ(got.arch, c.arch);
  EXPECT_EQ(got.hidden, c.hidden);
  EXPECT_EQ(got.ffn_hidden, c.ffn_hidden);
  EXPECT_EQ(got.kv_heads, c.kv_heads);
  EXPECT_EQ(got.context_length, c.context_length);
  EXPECT_EQ(got.tied_embeddings, c.tied_embeddings);
  EXPECT_EQ((*from_hf)->tokenizer(), nullptr);  // no tokenizer.json
  auto reference = LanguageModel::create(c, std::move(w.gguf), nullptr, small_options());
  ASSERT_TRUE(reference.ok()) << reference.status().to_string();
  const std::vector<int32_t> prompt = {5, 77, 123, 9, 250, 31, 64, 199, 2, 140};
  SequenceBlocks s1, s2;
  auto a = (*from_hf)->step({{&s1, prompt, true}});
  auto b = (*reference)->step({{&s2, prompt, true}});
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  ASSERT_EQ(a->numel(), c.vocab_size);
  EXPECT_LT(relative_error(*a, *b), 1e-5);
}

TEST(HfModel, LlamaF32FolderGivesTheLogitsOfItsWeights) {
  expect_folder_matches_weights(llama_config(), quant::QType::kF32, "llama_f32");
}
TEST(HfModel, LlamaF16FolderGivesTheLogitsOfItsWeights) {
  expect_folder_matches_weights(llama_config(), quant::QType::kF16, "llama_f16");
}
TEST(HfModel, Gpt2F32FolderGivesTheLogitsOfItsWeights) {
  expect_folder_matches_weights(gpt2_config(), quant::QType::kF32, "gpt2_f32");
}
TEST(HfModel, Gpt2F16FolderGivesTheLogitsOfItsWeights) {
  expect_folder_matches_weights(gpt2_config(), quant::QType::kF16, "gpt2_f16");
}

Result<ModelConfig> config_of(const json& j, const std::string& name) {
  TempDir dir(name);
  write_text(dir.path() / "config.json", j.dump());
  return config_from_hf_json((dir.path() / "config.json").string());
}

TEST(HfModel, ConfigReadsDefaultsAndRopeScaling) {
  json j = config_json(llama_config());
  j.erase("num_key_value_heads");
  j.erase("rope_theta");
  j["model_type"] = "mistral";
  j["rope_scaling"] = {{"rope_type", "llama3"},
                       {"factor", 8.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 64}};
  auto c = config_of(j, "defaults");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->kv_heads, 4);
  EXPECT_EQ(c->rope_theta, 10000.0f);
  EXPECT_EQ(c->rope_scaling, RopeScaling::kLlama3);
  EXPECT_EQ(c->rope_scale_factor, 8.0f);
  EXPECT_EQ(c->rope_original_context, 64);
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  c = config_of(j, "linear");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->rope_scaling, RopeScaling::kLinear);
  EXPECT_EQ(c->rope_scale_factor, 2.0f);
  json g = config_json(gpt2_config());
  g.erase("n_positions");
  g["n_ctx"] = 32;
  c = config_of(g, "gpt2_nctx");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->context_length, 32);
  EXPECT_EQ(c->ffn_hidden, 256);
  EXPECT_TRUE(c->tied_embeddings);
}

TEST(HfModel, BadConfigsFailNamingTheKey) {
  json j = config_json(llama_config());
  j.erase("hidden_size");
  auto c = config_of(j, "missing");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("missing \"hidden_size\""), std::string::npos)
      << c.status().to_string();

  j = config_json(llama_config());
  j["num_hidden_layers"] = "2";
  c = config_of(j, "mistyped");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("\"num_hidden_layers\" must be an integer"),
            std::string::npos)
      << c.status().to_string();

  j = config_json(llama_config());
  j["model_type"] = "bert";
  c = config_of(j, "bert");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(c.status().message().find("model_type 'bert'"), std::string::npos)
      << c.status().to_string();

  j = config_json(llama_config());
  j["head_dim"] = 32;
  c = config_of(j, "head_dim");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnimplemented);

  j = config_json(llama_config());
  j["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}};
  c = config_of(j, "dynamic");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("'dynamic'"), std::string::npos) << c.status().to_string();

  TempDir dir("not_json");
  write_text(dir.path() / "config.json", "{\"model_type\": ");
  EXPECT_FALSE(config_from_hf_json((dir.path() / "config.json").string()).ok());
}

// Loads a llama folder whose tensors `edit` changed; returns the error.
Status load_edited(const std::string& name,
                   const std::function<void(std::vector<HfTensor>&)>& edit) {
  TempDir dir(name);
  const ModelConfig c = llama_config();
  TwoForms w = make_weights(c, quant::QType::kF32, 3);
  edit(w.hf);
  write_folder(dir.path(), config_json(c), w.hf);
  auto m = load_hf_model(dir.path().string(), small_options());
  return m.ok() ? Status() : m.status();
}

TEST(HfModel, BadTensorsFailNamingTheTensor) {
  const std::string k = "model.layers.1.self_attn.k_proj.weight";
  Status s = load_edited("wrong_shape", [&](std::vector<HfTensor>& t) {
    for (HfTensor& x : t) {
      if (x.name == k) {  // as many rows as q: kv_heads ignored
        x.shape = {64, 64};
        x.bytes.resize(64 * 64 * 4);
      }
    }
  });
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'" + k + "' has shape [64, 64], but config.json means [32, 64]"),
            std::string::npos)
      << s.to_string();

  s = load_edited("missing_tensor", [](std::vector<HfTensor>& t) {
    std::erase_if(t, [](const HfTensor& x) { return x.name == "model.norm.weight"; });
  });
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("'model.norm.weight'"), std::string::npos) << s.to_string();

  s = load_edited("unused_tensor", [](std::vector<HfTensor>& t) {
    t.push_back(
        {"model.layers.0.self_attn.q_proj.bias", "F32", {64}, std::vector<uint8_t>(256, 0)});
  });
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("'model.layers.0.self_attn.q_proj.bias'"), std::string::npos)
      << s.to_string();

  TempDir empty("empty");
  auto m = load_hf_model(empty.path().string(), small_options());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("config.json"), std::string::npos) << m.status().to_string();
}

}  // namespace
}  // namespace tessera::llm
