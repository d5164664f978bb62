#include "llm/model_writer.h"

#include <cmath>
#include <cstring>

#include "llm/gguf_model.h"
#include "llm/gguf_writer.h"

namespace tessera::llm {

namespace {

ModelConfig llama(int64_t hidden, int64_t ffn, int64_t layers, int64_t heads, int64_t kv_heads, int64_t ctx,
                  int64_t vocab) {
  ModelConfig c;
  c.arch = Architecture::kLlama;
  c.hidden = hidden;
  c.ffn_hidden = ffn;
  c.layers = layers;
  c.heads = heads;
  c.kv_heads = kv_heads;
  c.context_length = ctx;
  c.vocab_size = vocab;
  c.norm_eps = 1e-5f;
  c.rope_theta = 10000.0f;
  return c;
}

// splitmix64: a fast, seedable stream for weights.
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Approximately standard normal (sum of four uniforms, scaled to unit variance).
  float normal() {
    const uint64_t r = next();
    float sum = 0;
    for (int i = 0; i < 4; ++i) sum += static_cast<float>((r >> (16 * i)) & 0xffff) * (1.0f / 65536.0f);
    return (sum - 2.0f) * 1.7320508f;
  }
};

uint64_t name_hash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

const std::vector<ModelPreset>& model_presets() {
  static const std::vector<ModelPreset> presets = [] {
    std::vector<ModelPreset> p;
    p.push_back({"tinyllama-1.1b", "TinyLlama 1.1B shapes: 22 layers, hidden 2048, FFN 5632, 32 heads / 4 KV heads",
                 llama(2048, 5632, 22, 32, 4, 2048, 0)});
    p.push_back({"llama-small", "4 layers, hidden 256, FFN 704, 8 heads / 2 KV heads (quick benchmarks)",
                 llama(256, 704, 4, 8, 2, 1024, 0)});
    p.push_back({"llama-tiny", "2 layers, hidden 64, FFN 160, 4 heads / 2 KV heads (tests)",
                 llama(64, 160, 2, 4, 2, 256, 0)});
    ModelConfig gpt2_small = llama(768, 3072, 12, 12, 12, 1024, 0);
    gpt2_small.arch = Architecture::kGpt2;
    gpt2_small.tied_embeddings = true;
    p.push_back({"gpt2-small", "GPT-2 124M shapes: 12 layers, hidden 768, 12 heads, context 1024, tied LM head", gpt2_small});
    ModelConfig gpt2_tiny = llama(64, 256, 2, 4, 4, 128, 0);
    gpt2_tiny.arch = Architecture::kGpt2;
    gpt2_tiny.tied_embeddings = true;
    p.push_back({"gpt2-tiny", "GPT-2, 2 layers, hidden 64, 4 heads (tests)", gpt2_tiny});
    for (ModelPreset& m : p) m.config.name = m.name + " (random weights)";
    return p;
  }();
  return presets;
}

const ModelPreset* find_preset(const std::string& name) {
  for (const ModelPreset& p : model_presets()) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

TokenizerVocab builtin_llama_vocab(int64_t size) {
  TokenizerVocab v;
  v.model = "llama";
  auto add = [&](std::string text, float score, int32_t type) {
    v.tokens.push_back(std::move(text));
    v.scores.push_back(score);
    v.token_types.push_back(type);
  };
  add("<unk>", 0, 2);
  add("<s>", 0, 3);
  add("</s>", 0, 3);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    add(name, 0, 6);
  }
  for (int c = 32; c < 127; ++c) add(std::string(1, static_cast<char>(c)), -1.0f - static_cast<float>(c) / 1000, 1);
  add("\xe2\x96\x81", -0.4f, 1);  // the word marker alone: "▁" + "H" merge into "▁H" instead of bytes
  for (int c = 33; c < 127; ++c) add("\xe2\x96\x81" + std::string(1, static_cast<char>(c)), -0.5f, 1);
  for (int64_t i = static_cast<int64_t>(v.tokens.size()); i < size; ++i) add("<unused" + std::to_string(i) + ">", -1e9f, 5);
  v.unk_id = 0;
  v.bos_id = 1;
  v.eos_id = 2;
  v.add_bos = true;
  v.add_space_prefix = true;
  return v;
}

TokenizerVocab builtin_gpt2_vocab() {
  TokenizerVocab v;
  v.model = "gpt2";
  // GPT-2's byte -> code point map: printable bytes stand for themselves, the others for 256 + i.
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    const int cp = printable ? b : next++;
    std::string utf8;
    if (cp < 0x80) {
      utf8 += static_cast<char>(cp);
    } else {
      utf8 += static_cast<char>(0xC0 | (cp >> 6));
      utf8 += static_cast<char>(0x80 | (cp & 0x3F));
    }
    v.tokens.push_back(utf8);
  }
  // "Ġ" (the mapped space) joined with each ASCII letter: a few merges so the BPE has work to do.
  for (char c = 'a'; c <= 'z'; ++c) {
    v.tokens.push_back("\xc4\xa0" + std::string(1, c));
    v.merges.push_back("\xc4\xa0 " + std::string(1, c));
  }
  v.token_types.assign(v.tokens.size(), 1);
  v.tokens.push_back("<|endoftext|>");
  v.token_types.push_back(3);
  v.bos_id = v.eos_id = static_cast<int32_t>(v.tokens.size()) - 1;
  v.add_bos = false;
  v.add_space_prefix = false;
  return v;
}

std::vector<RandomTensor> gpt2_tensor_list(const ModelConfig& c, quant::QType type) {
  std::vector<RandomTensor> t;
  const quant::QType f32 = quant::QType::kF32;
  t.push_back({"token_embd.weight", {c.hidden, c.vocab_size}, type});
  t.push_back({"position_embd.weight", {c.hidden, c.context_length}, f32});
  auto norm = [&](const std::string& p) {
    t.push_back({p + ".weight", {c.hidden}, f32});
    t.push_back({p + ".bias", {c.hidden}, f32});
  };
  auto linear = [&](const std::string& p, int64_t k, int64_t n) {
    t.push_back({p + ".weight", {k, n}, type});
    t.push_back({p + ".bias", {n}, f32});
  };
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    norm(p + "attn_norm");
    linear(p + "attn_qkv", c.hidden, 3 * c.hidden);
    linear(p + "attn_output", c.hidden, c.hidden);
    norm(p + "ffn_norm");
    linear(p + "ffn_up", c.hidden, c.ffn_hidden);
    linear(p + "ffn_down", c.ffn_hidden, c.hidden);
  }
  norm("output_norm");
  if (!c.tied_embeddings) t.push_back({"output.weight", {c.hidden, c.vocab_size}, type});
  return t;
}

std::vector<RandomTensor> model_tensor_list(const ModelConfig& c, quant::QType type) {
  if (c.arch == Architecture::kGpt2) return gpt2_tensor_list(c, type);
  std::vector<RandomTensor> t;
  const int64_t kv = c.kv_heads * c.head_dim();
  t.push_back({"token_embd.weight", {c.hidden, c.vocab_size}, type});
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    t.push_back({p + "attn_norm.weight", {c.hidden}, quant::QType::kF32});
    t.push_back({p + "attn_q.weight", {c.hidden, c.hidden}, type});
    t.push_back({p + "attn_k.weight", {c.hidden, kv}, type});
    t.push_back({p + "attn_v.weight", {c.hidden, kv}, type});
    t.push_back({p + "attn_output.weight", {c.hidden, c.hidden}, type});
    t.push_back({p + "ffn_norm.weight", {c.hidden}, quant::QType::kF32});
    t.push_back({p + "ffn_gate.weight", {c.hidden, c.ffn_hidden}, type});
    t.push_back({p + "ffn_up.weight", {c.hidden, c.ffn_hidden}, type});
    t.push_back({p + "ffn_down.weight", {c.ffn_hidden, c.hidden}, type});
  }
  t.push_back({"output_norm.weight", {c.hidden}, quant::QType::kF32});
  if (!c.tied_embeddings) t.push_back({"output.weight", {c.hidden, c.vocab_size}, type});
  return t;
}

void fill_random_tensor(const RandomTensor& t, uint64_t seed, uint8_t* dst) {
  Rng rng{seed ^ name_hash(t.name)};
  const int64_t cols = t.dims[0];
  const int64_t rows = t.dims.size() > 1 ? t.dims[1] : 1;
  std::vector<float> row(cols);
  // Norm weights near 1; matrices N(0, 1/cols), the embedding N(0, 1), the LM head a little
  // sharper so that next-token distributions are not flat.
  const bool vector = t.dims.size() == 1;
  const bool bias = vector && t.name.size() > 5 && t.name.compare(t.name.size() - 5, 5, ".bias") == 0;
  const bool embd = t.name == "token_embd.weight" || t.name == "position_embd.weight";
  const bool head = t.name == "output.weight";
  const float scale = bias ? 0.1f : embd ? 1.0f : (head ? 4.0f : 1.0f) / std::sqrt(static_cast<float>(cols));
  const int64_t row_bytes = quant::row_bytes(t.type, cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < cols; ++i) row[i] = vector && !bias ? 1.0f + 0.1f * rng.normal() : scale * rng.normal();
    quant::quantize_row(t.type, row.data(), cols, dst + r * row_bytes);
  }
}

Status write_random_gguf(const ModelConfig& config, const TokenizerVocab& vocab, const RandomModelOptions& opts,
                               const std::string& path) {
  ModelConfig c = config;
  if (c.vocab_size == 0) c.vocab_size = static_cast<int64_t>(vocab.tokens.size());
  TESSERA_RETURN_IF_ERROR(c.validate());
  if (static_cast<int64_t>(vocab.tokens.size()) > c.vocab_size) {
    return invalid_argument("the vocabulary has more tokens than the model's vocab size");
  }
  for (int64_t k : {c.hidden, c.ffn_hidden}) {
    if (k % quant::block_elements(opts.type) != 0) {
      return invalid_argument(std::string("dims must be multiples of ") + std::to_string(quant::block_elements(opts.type)) +
                              " for " + quant::qtype_name(opts.type));
    }
  }
  GgufWriter w;
  write_config_to_gguf(c, w);
  // llama.cpp's file-type numbers (LLAMA_FTYPE_MOSTLY_*), not ggml's tensor types.
  auto file_type = [](quant::QType t) -> uint32_t {
    switch (t) {
      case quant::QType::kF32: return 0;
      case quant::QType::kF16: return 1;
      case quant::QType::kQ4_0: return 2;
      case quant::QType::kQ8_0: return 7;
      case quant::QType::kBF16: return 32;
      default: return 0;
    }
  };
  w.set_uint32("general.file_type", file_type(opts.type));
  w.set_string("general.description", "random weights (tessera gguf-create, seed " + std::to_string(opts.seed) + ")");
  write_vocab_to_gguf(vocab, w);
  const std::vector<RandomTensor> tensors = model_tensor_list(c, opts.type);
  const int64_t total = static_cast<int64_t>(tensors.size());
  auto done = std::make_shared<int64_t>(0);
  for (const RandomTensor& t : tensors) {
    w.add_tensor(t.name, t.type, t.dims, [t, seed = opts.seed, done, total, progress = opts.progress](uint8_t* dst) {
      fill_random_tensor(t, seed, dst);
      if (progress) progress(++*done, total);
      return Status();
    });
  }
  return w.write(path);
}

}  // namespace tessera::llm
