// GGUF models end to end: gguf-create's files load back to the weights they were written from,
// generation is reproducible, and the CLI reports bad files and flags clearly.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "llm/generate.h"
#include "llm/language_model.h"
#include "llm/model_writer.h"
#include "llm/test_weights.h"
#include "tools/run_tessera.h"

namespace tessera::llm {
namespace {
namespace fs = std::filesystem;

fs::path temp_file(const std::string& name) {
  return fs::temp_directory_path() / ("tessera_gguf_model_" + std::to_string(getpid()) + "_" + name);
}

// A small model's weights as gguf-create writes them, in memory.
WeightMap weights_of(const ModelConfig& c, quant::QType type, uint64_t seed) {
  return testing::make_weights(c, type, seed).weights;
}

void expect_file_matches_memory(const std::string& preset, quant::QType type) {
  ModelConfig c = find_preset(preset)->config;
  const TokenizerVocab vocab = c.arch == Architecture::kGpt2 ? builtin_gpt2_vocab() : builtin_llama_vocab();
  c.vocab_size = static_cast<int64_t>(vocab.tokens.size());
  const fs::path path = temp_file(preset + ".gguf");
  RandomModelOptions o;
  o.type = type;
  o.seed = 5;
  ASSERT_TRUE(write_random_gguf(c, vocab, o, path.string()).ok());
  ModelOptions mo;
  mo.kv_cache_tokens = 64;
  auto from_file = LanguageModel::load_gguf(path.string(), mo);
  ASSERT_TRUE(from_file.ok()) << from_file.status().to_string();
  EXPECT_EQ((*from_file)->config().hidden, c.hidden);
  EXPECT_EQ((*from_file)->config().layers, c.layers);
  EXPECT_EQ((*from_file)->config().kv_heads, c.kv_heads);
  ASSERT_NE((*from_file)->tokenizer(), nullptr);
  EXPECT_EQ((*from_file)->tokenizer()->vocab_size(), static_cast<int32_t>(vocab.tokens.size()));
  auto in_memory = LanguageModel::create(c, weights_of(c, type, 5), &vocab, mo);
  ASSERT_TRUE(in_memory.ok()) << in_memory.status().to_string();
  const std::vector<int32_t> prompt = (*from_file)->tokenizer()->encode("Hello, world! 123", true);
  ASSERT_GE(prompt.size(), 5u);
  SequenceBlocks s1, s2;
  auto a = (*from_file)->step({{&s1, prompt, true}});
  auto b = (*in_memory)->step({{&s2, prompt, true}});
  ASSERT_TRUE(a.ok() && b.ok());
  for (int64_t i = 0; i < a->numel(); ++i) ASSERT_EQ(a->data<float>()[i], b->data<float>()[i]) << i;
  // The loader joins q/k/v and gate/up as it reads them (LLaMA); unjoined, the logits are the same.
  mo.fuse_projections = false;
  auto separate = LanguageModel::load_gguf(path.string(), mo);
  ASSERT_TRUE(separate.ok()) << separate.status().to_string();
  auto count = [](const LanguageModel& m, const std::string& op) {
    int64_t n = 0;
    for (int i = 0; i < m.session().graph().num_nodes(); ++i) n += m.session().graph().node(i).op_type == op;
    return n;
  };
  const int64_t joins = c.arch == Architecture::kGpt2 ? 0 : 3 * c.layers;
  EXPECT_EQ(count(**from_file, "QMatMul") + joins, count(**separate, "QMatMul"));
  SequenceBlocks s3;
  auto d = (*separate)->step({{&s3, prompt, true}});
  ASSERT_TRUE(d.ok());
  for (int64_t i = 0; i < a->numel(); ++i) ASSERT_EQ(a->data<float>()[i], d->data<float>()[i]) << i;
  fs::remove(path);
}

TEST(GgufModel, LlamaFileLoadsToTheWeightsItWasWrittenFrom) { expect_file_matches_memory("llama-tiny", quant::QType::kQ8_0); }
TEST(GgufModel, Gpt2FileLoadsToTheWeightsItWasWrittenFrom) { expect_file_matches_memory("gpt2-tiny", quant::QType::kQ4_0); }

TEST(GgufModel, SameSeedSameTokensOtherSeedOtherTokens) {
  ModelConfig c = find_preset("llama-tiny")->config;
  const TokenizerVocab vocab = builtin_llama_vocab();
  c.vocab_size = static_cast<int64_t>(vocab.tokens.size());
  ModelOptions mo;
  mo.kv_cache_tokens = 128;
  auto m = LanguageModel::create(c, weights_of(c, quant::QType::kQ4_0, 1), &vocab, mo);
  ASSERT_TRUE(m.ok());
  const std::vector<int32_t> prompt = (*m)->tokenizer()->encode("Once upon a time", true);
  GenerateOptions g;
  g.max_tokens = 24;
  g.stop_at_end_of_generation = false;
  g.sampling.temperature = 1.0f;
  g.sampling.top_k = 0;
  g.sampling.min_p = 0;
  g.sampling.top_p = 1.0f;
  auto run = [&](uint64_t seed) {
    g.sampling.seed = seed;
    auto r = generate(**m, prompt, g);
    EXPECT_TRUE(r.ok());
    EXPECT_EQ((*m)->cache().pool().free_count(), (*m)->cache().blocks());  // blocks given back
    return r.ok() ? r->output_ids : std::vector<int32_t>{};
  };
  const auto a = run(7), b = run(7), other = run(8);
  EXPECT_EQ(a.size(), 24u);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, other);
  // Greedy decoding: each token is the argmax of a fresh full recomputation of the sequence.
  g.sampling.temperature = 0;
  g.max_tokens = 6;
  auto greedy = generate(**m, prompt, g);
  ASSERT_TRUE(greedy.ok());
  std::vector<int32_t> seq = prompt;
  for (int32_t id : greedy->output_ids) {
    SequenceBlocks s;
    auto logits = (*m)->step({{&s, seq, true}});
    ASSERT_TRUE(logits.ok());
    const float* l = logits->data<float>();
    EXPECT_EQ(id, std::max_element(l, l + logits->dim(1)) - l);
    (*m)->cache().release(s);
    seq.push_back(id);
  }
}

using tessera::testing::run_tessera;
using Output = tessera::testing::CliOutput;

TEST(GgufModelCli, CreateThenGenerateIsReproducible) {
  const fs::path path = temp_file("cli.gguf");
  Output made = run_tessera("gguf-create --preset llama-tiny --type q4_0 --seed 2 --vocab builtin -o " + path.string());
  ASSERT_EQ(made.exit_code, 0) << made.text;
  const std::string gen = "generate " + path.string() + " --prompt 'The quick brown fox' -n 12 --seed 4 --temperature 0.9 --ignore-eos --json";
  Output a = run_tessera(gen), b = run_tessera(gen);
  ASSERT_EQ(a.exit_code, 0) << a.text;
  const auto ja = nlohmann::json::parse(a.text.substr(a.text.find('{')));
  const auto jb = nlohmann::json::parse(b.text.substr(b.text.find('{')));
  EXPECT_EQ(ja["output_ids"], jb["output_ids"]);
  EXPECT_EQ(ja["output_ids"].size(), 12u);
  EXPECT_GT(ja["decode_tokens_per_second"].get<double>(), 0.0);
  // Streaming mode prints the prompt, the continuation and the speeds.
  Output s = run_tessera("generate " + path.string() + " --prompt 'The quick brown fox' -n 4 --temperature 0");
  ASSERT_EQ(s.exit_code, 0) << s.text;
  EXPECT_EQ(s.text.rfind("The quick brown fox", 0), 0u) << s.text;
  EXPECT_NE(s.text.find("tokens/s"), std::string::npos) << s.text;

  // A truncated file, a missing file and a bad flag: one clear line, exit code 1.
  const fs::path cut = temp_file("cut.gguf");
  fs::copy_file(path, cut, fs::copy_options::overwrite_existing);
  fs::resize_file(cut, fs::file_size(path) / 2);
  Output t = run_tessera("generate " + cut.string() + " --prompt hi");
  EXPECT_EQ(t.exit_code, 1) << t.text;
  EXPECT_NE(t.text.find("error"), std::string::npos) << t.text;
  Output missing = run_tessera("generate /nonexistent/model.gguf --prompt hi");
  EXPECT_EQ(missing.exit_code, 1) << missing.text;
  Output bad = run_tessera("generate " + path.string() + " --prompt hi --top-p 2");
  EXPECT_EQ(bad.exit_code, 1) << bad.text;
  Output preset = run_tessera("gguf-create --preset nope -o " + cut.string());
  EXPECT_EQ(preset.exit_code, 1);
  EXPECT_NE(preset.text.find("tinyllama-1.1b"), std::string::npos) << preset.text;
  fs::remove(path);
  fs::remove(cut);
}

}  // namespace
}  // namespace tessera::llm
