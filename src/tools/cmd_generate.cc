// `tessera generate MODEL.gguf --prompt TEXT`: streams a continuation and reports prompt and
// decode speed.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "llm/generate.h"
#include "llm/hf_model.h"
#include "llm/language_model.h"
#include "tools/cli.h"

namespace tessera {
namespace {

struct GenerateCliOptions {
  std::string model;
  std::string prompt;
  std::string backend = "native";
  llm::GenerateOptions gen;
  int threads = 2;
  int64_t context = 0;
  bool no_bos = false;
  bool json = false;
  bool profile = false;
};

// Wall time per op type over the whole generation, most expensive first (stderr).
void print_profile(const llm::LanguageModel& m, double total_seconds) {
  std::vector<std::pair<std::string, llm::LanguageModel::OpTime>> rows(m.op_times().begin(), m.op_times().end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  double sum = 0;
  for (const auto& r : rows) sum += r.second.seconds;
  std::fprintf(stderr, "%-24s %10s %8s %8s\n", "op", "seconds", "share", "calls");
  for (const auto& [op, t] : rows) {
    std::fprintf(stderr, "%-24s %10.4f %7.1f%% %8lld\n", op.c_str(), t.seconds, 100.0 * t.seconds / std::max(sum, 1e-12),
                 static_cast<long long>(t.calls));
  }
  std::fprintf(stderr, "%-24s %10.4f (of %.4f s in generate: the rest is the executor, sampling and streaming)\n", "all ops", sum,
               total_seconds);
}

int run_generate(const GenerateCliOptions& o) {
  llm::ModelOptions mopts;
  mopts.threads = o.threads;
  mopts.backend = o.backend;
  mopts.context_length = o.context;
  auto model = llm::is_hf_model_path(o.model) ? llm::load_hf_model(o.model, mopts)
                                               : llm::LanguageModel::load_gguf(o.model, mopts);
  if (!model.ok()) {
    std::fprintf(stderr, "error: %s\n", model.status().to_string().c_str());
    return 1;
  }
  llm::LanguageModel& m = **model;
  const llm::Tokenizer* tok = m.tokenizer();
  if (!tok) {
    std::fprintf(stderr, "error: %s has no tokenizer (GGUF tokenizer.ggml.* metadata, or tokenizer.json in a model folder)\n", o.model.c_str());
    return 1;
  }
  std::vector<int32_t> prompt = tok->encode(o.prompt, !o.no_bos, false);
  if (prompt.empty()) {
    std::fprintf(stderr, "error: the prompt is empty and the model adds no BOS token: give --prompt\n");
    return 1;
  }
  if (o.profile) m.set_profile(true);
  llm::StreamDecoder stream(*tok);
  auto on_token = [&](int32_t id) {
    if (!o.json) {
      const std::string piece = stream.push(id);
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    }
    return true;
  };
  if (!o.json) {
    std::fwrite(o.prompt.data(), 1, o.prompt.size(), stdout);
    std::fflush(stdout);
  }
  auto r = llm::generate(m, prompt, o.gen, on_token);
  if (!r.ok()) {
    std::fprintf(stderr, "\nerror: %s\n", r.status().to_string().c_str());
    return 1;
  }
  if (o.profile) print_profile(m, r->prompt_seconds + r->decode_seconds);
  if (o.json) {
    nlohmann::json j;
    j["model"] = o.model;
    j["text"] = tok->decode(r->output_ids);
    j["prompt_ids"] = r->prompt_ids;
    j["output_ids"] = r->output_ids;
    j["stop_reason"] = r->stop_reason;
    j["prompt_tokens"] = r->prompt_ids.size();
    j["output_tokens"] = r->output_ids.size();
    j["prompt_seconds"] = r->prompt_seconds;
    j["decode_seconds"] = r->decode_seconds;
    j["prompt_tokens_per_second"] = r->prompt_tokens_per_second();
    j["decode_tokens_per_second"] = r->decode_tokens_per_second();
    j["threads"] = m.threads();
    // Generated text may end inside a UTF-8 sequence: such bytes become U+FFFD in the JSON.
    std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  const std::string rest = stream.flush();
  std::fwrite(rest.data(), 1, rest.size(), stdout);
  std::printf("\n");
  std::fprintf(stderr, "prompt: %zu tokens in %.3f s (%.2f tokens/s); decode: %zu tokens in %.3f s (%.2f tokens/s); stop: %s\n",
               r->prompt_ids.size(), r->prompt_seconds, r->prompt_tokens_per_second(), r->output_ids.size(),
               r->decode_seconds, r->decode_tokens_per_second(), r->stop_reason.c_str());
  return 0;
}

}  // namespace

void add_generate_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<GenerateCliOptions>();
  CLI::App* sub = app.add_subcommand("generate", "Generate text with a language model (GGUF), streaming it as it is produced");
  sub->add_option("model", o->model, "GGUF file, or a Hugging Face model folder (config.json + safetensors)")->required();
  sub->add_option("--prompt,-p", o->prompt, "Text to continue")->required();
  sub->add_option("--max-tokens,-n", o->gen.max_tokens, "Most tokens to generate")->capture_default_str()->check(CLI::NonNegativeNumber);
  sub->add_option("--temperature", o->gen.sampling.temperature, "Sampling temperature; 0 = greedy")->capture_default_str()->check(CLI::NonNegativeNumber);
  sub->add_option("--top-k", o->gen.sampling.top_k, "Keep the k most likely tokens; 0 = all")->capture_default_str()->check(CLI::NonNegativeNumber);
  sub->add_option("--top-p", o->gen.sampling.top_p, "Keep the smallest set with this much probability")->capture_default_str()->check(CLI::Range(0.0, 1.0));
  sub->add_option("--min-p", o->gen.sampling.min_p, "Drop tokens below this fraction of the top probability")->capture_default_str()->check(CLI::Range(0.0, 1.0));
  sub->add_option("--repeat-penalty", o->gen.sampling.repeat_penalty, "Penalty on recent tokens; 1 = off")->capture_default_str()->check(CLI::PositiveNumber);
  sub->add_option("--repeat-last-n", o->gen.sampling.repeat_last_n, "Recent tokens the penalty looks at")->capture_default_str()->check(CLI::NonNegativeNumber);
  sub->add_option("--seed", o->gen.sampling.seed, "Sampling seed: same seed, same output")->capture_default_str();
  sub->add_option("--threads,-t", o->threads, "Threads")->capture_default_str()->check(CLI::Range(1, 256));
  sub->add_option("--ctx-size,-c", o->context, "Longest sequence; 0 = the model's context length")->capture_default_str()->check(CLI::NonNegativeNumber);
  sub->add_option("--chunk", o->gen.prefill_chunk, "Prompt tokens per prefill step")->capture_default_str()->check(CLI::PositiveNumber);
  sub->add_option("--backend", o->backend, "Where the graph runs: native (default) or ref (reference kernels)")->capture_default_str();
  sub->add_flag("--no-bos", o->no_bos, "Do not prepend the BOS token");
  sub->add_flag("--ignore-eos", [o](int64_t) { o->gen.stop_at_end_of_generation = false; }, "Keep generating past end-of-generation tokens");
  sub->add_flag("--profile", o->profile, "Print the wall time per op type (stderr)");
  sub->add_flag("--json", o->json, "Print one JSON object (text, token ids, timings) instead of streaming");
  sub->callback([o, &exit_code] { exit_code = run_generate(*o); });
}

}  // namespace tessera
