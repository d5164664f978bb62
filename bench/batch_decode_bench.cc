// Decode throughput of a language model at batch 1 and at batch B (a server's decode step with B
// requests running), the model alone: no HTTP, no sampling beyond argmax. Rounds alternate
// between the two batch sizes in one process, so the ratio compares like moments of a shared
// machine. With --profile, the wall time per op and role at each batch size.
//
//   batch_decode_bench MODEL.gguf [--batch 8] [--threads 2] [--prompt-tokens 32] [--steps 32]
//                      [--rounds 3] [--profile] [--json FILE]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "llm/language_model.h"

namespace tessera::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string model;
  int batch = 8;
  int threads = 2;
  int64_t prompt_tokens = 32;
  int64_t steps = 32;
  int rounds = 3;
  bool profile = false;
  std::string json_path;
};

int32_t argmax(const float* row, int64_t n) { return static_cast<int32_t>(std::max_element(row, row + n) - row); }

// B sequences with distinct prompts, prefilled, then `steps` decode steps of all B together.
// Returns the decode seconds; the sequences' blocks are freed.
Result<double> decode_round(llm::LanguageModel& m, const Options& o, int batch, uint32_t seed, bool profile) {
  const int64_t vocab = m.config().vocab_size;
  std::vector<llm::SequenceBlocks> seqs(batch);
  struct Release {
    llm::KvCache& cache;
    std::vector<llm::SequenceBlocks>& seqs;
    ~Release() {
      for (auto& s : seqs) cache.release(s);
    }
  } release{m.cache(), seqs};
  std::vector<int32_t> next(batch);
  for (int b = 0; b < batch; ++b) {
    TESSERA_RETURN_IF_ERROR(m.cache().reserve(seqs[b], o.prompt_tokens + o.steps + 1));
    m.cache().commit(seqs[b]);
    std::vector<int32_t> prompt(o.prompt_tokens);
    uint32_t x = seed * 2654435761u + static_cast<uint32_t>(b) * 40503u + 1;
    for (auto& t : prompt) t = static_cast<int32_t>((x = x * 1664525u + 1013904223u) >> 8) % static_cast<int32_t>(vocab);
    TESSERA_ASSIGN_OR_RETURN(Tensor logits, m.step({llm::StepSequence{&seqs[b], prompt, true}}));
    next[b] = argmax(logits.data<float>(), vocab);
  }
  m.set_profile(profile);  // the decode steps only
  const Clock::time_point t0 = Clock::now();
  for (int64_t s = 0; s < o.steps; ++s) {
    std::vector<llm::StepSequence> step;
    for (int b = 0; b < batch; ++b) step.push_back(llm::StepSequence{&seqs[b], {next[b]}, true});
    TESSERA_ASSIGN_OR_RETURN(Tensor logits, m.step(step));
    for (int b = 0; b < batch; ++b) next[b] = argmax(logits.data<float>() + b * vocab, vocab);
  }
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void print_profile(const std::map<std::string, llm::LanguageModel::OpTime>& ops, int batch, double steps) {
  std::vector<std::pair<std::string, llm::LanguageModel::OpTime>> rows(ops.begin(), ops.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  std::printf("\nbatch %d: ms per decode step by op and role\n", batch);
  for (const auto& [op, t] : rows) std::printf("  %-28s %8.3f\n", op.c_str(), 1e3 * t.seconds / steps);
}

int run(const Options& o) {
  // Named here so the linker takes the backend table before the libraries that look it up.
  if (all_backends().empty()) return 1;
  llm::ModelOptions mo;
  mo.threads = o.threads;
  mo.kv_cache_tokens = (o.batch + 1) * (o.prompt_tokens + o.steps + 32);
  auto model = llm::LanguageModel::load_gguf(o.model, mo);
  if (!model.ok()) {
    std::fprintf(stderr, "error: %s\n", model.status().to_string().c_str());
    return 1;
  }
  llm::LanguageModel& m = **model;
  const int sizes[2] = {1, o.batch};
  std::vector<double> best(2, 1e30);
  std::map<std::string, llm::LanguageModel::OpTime> profiles[2];
  // Round 0 warms up (page faults, step buffers at both sizes); rounds 1.. are timed.
  for (int round = 0; round <= o.rounds; ++round) {
    for (int i = 0; i < 2; ++i) {
      const bool prof = o.profile && round == o.rounds;
      const auto before = m.op_times();  // op_times() accumulates over every profiled step
      auto s = decode_round(m, o, sizes[i], static_cast<uint32_t>(round * 2 + i), prof);
      m.set_profile(false);
      if (!s.ok()) {
        std::fprintf(stderr, "error: %s\n", s.status().to_string().c_str());
        return 1;
      }
      if (prof) {
        profiles[i] = m.op_times();
        for (auto& [op, t] : profiles[i]) {
          if (auto it = before.find(op); it != before.end()) t.seconds -= it->second.seconds, t.calls -= it->second.calls;
        }
      }
      if (round > 0) best[i] = std::min(best[i], *s);
      std::fprintf(stderr, "round %d batch %d: %.1f tok/s\n", round, sizes[i], sizes[i] * o.steps / *s);
    }
  }
  const double tps1 = o.steps / best[0], tpsb = o.batch * o.steps / best[1];
  std::printf("%-10s %12s %14s\n", "batch", "step ms", "tokens/s");
  std::printf("%-10d %12.2f %14.1f\n", 1, 1e3 * best[0] / o.steps, tps1);
  std::printf("%-10d %12.2f %14.1f\n", o.batch, 1e3 * best[1] / o.steps, tpsb);
  std::printf("throughput ratio batch %d / batch 1: %.2fx (best of %d rounds each)\n", o.batch, tpsb / tps1, o.rounds);
  if (o.profile) {
    for (int i = 0; i < 2; ++i) print_profile(profiles[i], sizes[i], static_cast<double>(o.steps));
  }
  if (!o.json_path.empty()) {
    nlohmann::json j = {{"benchmark", "batch_decode"}, {"model", o.model}, {"threads", o.threads},
                        {"batch", o.batch}, {"prompt_tokens", o.prompt_tokens}, {"steps", o.steps},
                        {"rounds", o.rounds}, {"single_tok_s", tps1}, {"batch_tok_s", tpsb},
                        {"ratio", tpsb / tps1}};
    std::ofstream(o.json_path) << j.dump(2) << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) {
  tessera::bench::Options o;
  CLI::App app{"Language-model decode at batch 1 and batch B, alternating in one process (model only)"};
  app.add_option("model", o.model, "GGUF model file")->required();
  app.add_option("--batch", o.batch, "sequences decoded together")->check(CLI::Range(2, 256));
  app.add_option("--threads", o.threads, "threads")->check(CLI::PositiveNumber);
  app.add_option("--prompt-tokens", o.prompt_tokens, "prompt length of each sequence")->check(CLI::PositiveNumber);
  app.add_option("--steps", o.steps, "decode steps timed per round")->check(CLI::PositiveNumber);
  app.add_option("--rounds", o.rounds, "timed rounds per batch size (best kept)")->check(CLI::PositiveNumber);
  app.add_flag("--profile", o.profile, "print the time per op and role of the last round");
  app.add_option("--json", o.json_path, "write the results as JSON");
  CLI11_PARSE(app, argc, argv);
  return tessera::bench::run(o);
}
