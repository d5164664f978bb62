// `tessera bench-serve`: load-tests an OpenAI-compatible server (tessera serve, vLLM, SGLang,
// llama.cpp's server) and reports throughput, TTFT / TPOT / ITL / end-to-end latency, the prefix
// cache hit rate and goodput, as SGLang's bench_serving does.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "serve/bench_client.h"
#include "tools/cli.h"

namespace tessera {
namespace {

using nlohmann::json;

struct BenchServeCliOptions {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string base_url;
  std::string model;
  std::string dataset = "random";
  int64_t num_prompts = 1000;
  int64_t random_input_len = 1024;
  int64_t random_output_len = 128;
  double random_range_ratio = 0.0;
  int64_t vocab_lo = 0;
  int64_t vocab_hi = 0;  // 0: the server's vocab_size
  int64_t gsp_num_groups = 64;
  int64_t gsp_prompts_per_group = 16;
  int64_t gsp_system_prompt_len = 2048;
  int64_t gsp_question_len = 128;
  int64_t gsp_output_len = 256;
  std::string gsp_order = "shuffled";
  int64_t num_turns = 4;
  std::string request_rate = "inf";
  int64_t max_concurrency = 0;
  uint64_t seed = 1;
  double temperature = 0.0;
  bool no_ignore_eos = false;
  double slo_ttft_ms = 0, slo_tpot_ms = 0, slo_e2e_ms = 0;  // 0: no SLO
  bool flush_cache = false;
  int64_t warmup = 0;
  double timeout_s = 600;
  std::string output_file;
  bool output_details = false;
  bool json = false;
};

Result<double> parse_rate(const std::string& s) {
  if (s == "inf" || s == "INF" || s == "infinity") return std::numeric_limits<double>::infinity();
  char* end = nullptr;
  const double r = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0' || !(r > 0)) {
    return invalid_argument("--request-rate must be a positive number or inf, not '" + s + "'");
  }
  return r;
}

Result<serve::BenchWorkload> make_workload(const BenchServeCliOptions& o,
                                           serve::TokenIdRange vocab) {
  if (o.dataset == "random") {
    serve::RandomDatasetOptions r;
    r.num_prompts = o.num_prompts;
    r.input_len = o.random_input_len;
    r.output_len = o.random_output_len;
    r.range_ratio = o.random_range_ratio;
    r.vocab = vocab;
    r.seed = o.seed;
    return serve::make_random_workload(r);
  }
  if (o.dataset == "generated-shared-prefix") {
    serve::SharedPrefixDatasetOptions g;
    g.num_groups = o.gsp_num_groups;
    g.prompts_per_group = o.gsp_prompts_per_group;
    g.system_prompt_len = o.gsp_system_prompt_len;
    g.question_len = o.gsp_question_len;
    g.output_len = o.gsp_output_len;
    g.shuffle = o.gsp_order == "shuffled";
    g.vocab = vocab;
    g.seed = o.seed;
    return serve::make_shared_prefix_workload(g);
  }
  serve::MultiTurnDatasetOptions m;
  m.num_conversations = o.num_prompts;
  m.num_turns = o.num_turns;
  m.words_per_turn = o.random_input_len;
  m.output_len = o.random_output_len;
  m.range_ratio = o.random_range_ratio;
  m.seed = o.seed;
  return serve::make_multi_turn_workload(m);
}

// `n` requests taken from the front of the workload, cycling; a conversation contributes only its
// first turn, so that warmup never depends on replies.
serve::BenchWorkload warmup_workload(const serve::BenchWorkload& w, int64_t n) {
  serve::BenchWorkload out;
  out.dataset = w.dataset;
  for (int64_t i = 0; i < n && !w.jobs.empty(); ++i) {
    serve::BenchJob job = w.jobs[static_cast<size_t>(i) % w.jobs.size()];
    if (job.is_chat()) job.turns.resize(1);
    out.jobs.push_back(std::move(job));
  }
  return out;
}

json latency_json(const serve::LatencySummary& s) {
  return {{"count", s.count},   {"mean_ms", s.mean_ms}, {"median_ms", s.median_ms},
          {"p90_ms", s.p90_ms}, {"p99_ms", s.p99_ms},   {"std_ms", s.std_ms},
          {"max_ms", s.max_ms}};
}

json report_json(const BenchServeCliOptions& o, const std::string& base_url,
                 const std::string& model, double rate, const serve::TokenIdRange& vocab,
                 const serve::BenchMetrics& m, const serve::BenchRunResult& run) {
  json config = {{"base_url", base_url},
                 {"model", model},
                 {"dataset", o.dataset},
                 {"num_requests", run.records.size()},
                 {"max_concurrency", o.max_concurrency},
                 {"seed", o.seed},
                 {"temperature", o.temperature},
                 {"ignore_eos", !o.no_ignore_eos},
                 {"warmup", o.warmup},
                 {"flush_cache", o.flush_cache}};
  // JSON has no infinity: "inf" as SGLang's output files write it.
  config["request_rate"] = std::isinf(rate) ? json("inf") : json(rate);
  if (o.dataset == "random") {
    config["num_prompts"] = o.num_prompts;
    config["random_input_len"] = o.random_input_len;
    config["random_output_len"] = o.random_output_len;
    config["random_range_ratio"] = o.random_range_ratio;
  } else if (o.dataset == "generated-shared-prefix") {
    config["gsp_num_groups"] = o.gsp_num_groups;
    config["gsp_prompts_per_group"] = o.gsp_prompts_per_group;
    config["gsp_system_prompt_len"] = o.gsp_system_prompt_len;
    config["gsp_question_len"] = o.gsp_question_len;
    config["gsp_output_len"] = o.gsp_output_len;
    config["gsp_order"] = o.gsp_order;
  } else {
    config["num_conversations"] = o.num_prompts;
    config["num_turns"] = o.num_turns;
    config["words_per_turn"] = o.random_input_len;
    config["output_len"] = o.random_output_len;
    config["random_range_ratio"] = o.random_range_ratio;
  }
  if (o.dataset != "multi-turn") config["vocab"] = {vocab.lo, vocab.hi};
  json slo = json::object();
  if (o.slo_ttft_ms > 0) slo["ttft_ms"] = o.slo_ttft_ms;
  if (o.slo_tpot_ms > 0) slo["tpot_ms"] = o.slo_tpot_ms;
  if (o.slo_e2e_ms > 0) slo["e2e_ms"] = o.slo_e2e_ms;
  config["slo"] = slo;

  json metrics = {{"completed", m.completed},
                  {"failed", m.failed},
                  {"duration_s", m.duration_s},
                  {"total_input_tokens", m.input_tokens},
                  {"total_output_tokens", m.output_tokens},
                  {"total_cached_tokens", m.cached_tokens},
                  {"request_throughput", m.request_throughput},
                  {"input_token_throughput", m.input_token_throughput},
                  {"output_token_throughput", m.output_token_throughput},
                  {"total_token_throughput", m.total_token_throughput},
                  {"mean_concurrency", m.mean_concurrency},
                  {"cache_hit_rate", m.cache_hit_rate},
                  {"ttft", latency_json(m.ttft)},
                  {"tpot", latency_json(m.tpot)},
                  {"itl", latency_json(m.itl)},
                  {"e2e", latency_json(m.e2e)}};
  metrics["goodput"] = m.goodput ? json(*m.goodput) : json(nullptr);
  metrics["good_requests"] = m.good_requests;
  json errors = json::array();
  for (const auto& [msg, n] : m.errors) errors.push_back({{"message", msg}, {"count", n}});

  json j = {{"config", config}, {"metrics", metrics}, {"errors", errors}};
  if (o.output_details) {
    json reqs = json::array();
    for (const auto& r : run.records) {
      json x = {{"job", r.job},
                {"turn", r.turn},
                {"success", r.success},
                {"http_status", r.http_status},
                {"send_time", r.send_time},
                {"ttft", r.ttft()},
                {"e2e", r.e2e()},
                {"tpot", r.tpot()},
                {"prompt_tokens", r.prompt_tokens},
                {"completion_tokens", r.completion_tokens},
                {"cached_tokens", r.cached_tokens},
                {"chunk_times", r.chunk_times}};
      if (!r.success) x["error"] = r.error;
      reqs.push_back(std::move(x));
    }
    j["requests"] = std::move(reqs);
  }
  return j;
}

int fail(const std::string& msg) {
  std::fprintf(stderr, "error: %s\n", msg.c_str());
  return 1;
}

int run_bench_serve(const BenchServeCliOptions& o) {
  std::string base_url =
      o.base_url.empty() ? "http://" + o.host + ":" + std::to_string(o.port) : o.base_url;
  while (!base_url.empty() && base_url.back() == '/') base_url.pop_back();
  auto rate = parse_rate(o.request_rate);
  if (!rate.ok()) return fail(rate.status().message());
  if (Status st = check_writable(o.output_file, "results file"); !st.ok()) return fail(st.message());

  // The server must answer before anything else; /v1/models also names the model and its
  // vocabulary.
  serve::BenchTarget target;
  target.base_url = base_url;
  target.timeout_s = o.timeout_s;
  target.model = o.model;
  auto info = serve::query_first_model(base_url, std::min(o.timeout_s, 30.0));
  if (!info.ok() && (info.status().code() == StatusCode::kIoError || o.model.empty() ||
                     info.status().code() == StatusCode::kInvalidArgument)) {
    return fail(info.status().message());
  }
  if (!info.ok()) std::fprintf(stderr, "warning: %s\n", info.status().message().c_str());
  if (target.model.empty()) target.model = info->id;
  const int64_t server_vocab = info.ok() ? info->vocab_size : 0;
  serve::TokenIdRange vocab{o.vocab_lo,
                            o.vocab_hi > 0 ? o.vocab_hi : (server_vocab > 0 ? server_vocab : 256)};

  auto workload = make_workload(o, vocab);
  if (!workload.ok()) return fail(workload.status().message());
  if (info.ok() && info->max_model_len > 0) {
    for (const auto& job : workload->jobs) {
      if (!job.is_chat() &&
          static_cast<int64_t>(job.prompt_ids.size()) + job.output_len > info->max_model_len) {
        std::fprintf(stderr,
                     "warning: some prompts + outputs exceed the server's max_model_len %lld\n",
                     static_cast<long long>(info->max_model_len));
        break;
      }
    }
  }

  serve::BenchRunOptions run_opts;
  run_opts.request_rate = *rate;
  run_opts.max_concurrency = o.max_concurrency;
  run_opts.temperature = o.temperature;
  run_opts.ignore_eos = !o.no_ignore_eos;
  run_opts.seed = o.seed;

  if (o.warmup > 0) {
    serve::BenchRunOptions warm = run_opts;
    warm.request_rate = std::numeric_limits<double>::infinity();
    auto w = serve::run_bench(target, warmup_workload(*workload, o.warmup), warm);
    if (!w.ok()) return fail(w.status().message());
    for (const auto& r : w->records) {
      if (!r.success) return fail("warmup request failed: " + r.error);
    }
    std::fprintf(stderr, "warmup: %lld requests done\n", static_cast<long long>(w->records.size()));
  }
  // After warmup, as SGLang does: the measured run starts from an empty prefix cache.
  if (o.flush_cache) {
    const Status s = serve::flush_server_cache(base_url, std::min(o.timeout_s, 30.0));
    if (!s.ok()) return fail(s.message());
  }

  std::fprintf(stderr,
               "bench-serve: %lld requests (%s) to %s, model %s, rate %s, max concurrency %s\n",
               static_cast<long long>(workload->num_requests()), o.dataset.c_str(),
               base_url.c_str(), target.model.c_str(), o.request_rate.c_str(),
               o.max_concurrency > 0 ? std::to_string(o.max_concurrency).c_str() : "unlimited");
  // Progress: one rewritten line on a terminal (at most ten updates a second), else a line per 10%.
  const bool tty = isatty(fileno(stderr)) != 0;
  auto last_print = std::make_shared<std::chrono::steady_clock::time_point>();
  run_opts.on_progress = [last_print, tty](int64_t done, int64_t total, int64_t failed) {
    const auto now = std::chrono::steady_clock::now();
    if (tty ? (done < total && now - *last_print < std::chrono::milliseconds(100))
            : (done * 10 / total == (done - 1) * 10 / total)) {
      return;
    }
    *last_print = now;
    std::fprintf(stderr, "%s%lld/%lld requests done, %lld failed%s", tty ? "\r" : "",
                 static_cast<long long>(done), static_cast<long long>(total),
                 static_cast<long long>(failed), !tty || done == total ? "\n" : "");
  };
  auto run = serve::run_bench(target, *workload, run_opts);
  if (!run.ok()) return fail(run.status().message());

  serve::BenchSlo slo;
  if (o.slo_ttft_ms > 0) slo.ttft_ms = o.slo_ttft_ms;
  if (o.slo_tpot_ms > 0) slo.tpot_ms = o.slo_tpot_ms;
  if (o.slo_e2e_ms > 0) slo.e2e_ms = o.slo_e2e_ms;
  const serve::BenchMetrics m = serve::compute_bench_metrics(run->records, run->duration_s, slo);
  const std::string table = serve::format_bench_metrics(m);
  const json report = report_json(o, base_url, target.model, *rate, vocab, m, *run);
  if (o.json) {
    std::fputs(table.c_str(), stderr);
    std::printf("%s\n", report.dump(2, ' ', false, json::error_handler_t::replace).c_str());
  } else {
    std::fputs(table.c_str(), stdout);
  }
  if (!o.output_file.empty()) {
    std::ofstream f(o.output_file);
    f << report.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
    if (!f) return fail("cannot write " + o.output_file);
  }
  if (m.completed == 0) {
    return fail("no request succeeded" +
                (m.errors.empty() ? std::string()
                                  : " (most common error: " + m.errors.front().first + ")"));
  }
  return 0;
}

}  // namespace

void add_bench_serve_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<BenchServeCliOptions>();
  CLI::App* sub = app.add_subcommand("bench-serve",
                                     "Load-test an OpenAI-compatible server: throughput, TTFT, "
                                     "TPOT, ITL, cache hit rate, goodput");
  sub->footer(
      "Streams synthetic requests at a Poisson rate (--request-rate) and/or under a concurrency "
      "limit\n"
      "(--max-concurrency), like SGLang's bench_serving, and reports throughput, TTFT, TPOT (time "
      "per output\n"
      "token after the first), ITL (gaps between streamed chunks) and end-to-end latency (mean, "
      "median, p99),\n"
      "the prefix cache hit rate (cached_tokens / prompt_tokens from usage) and goodput (req/s "
      "meeting every\n"
      "--slo-*). Datasets:\n"
      "  random                   token-id prompts to /v1/completions\n"
      "  generated-shared-prefix  --gsp-num-groups groups of prompts, each group sharing a random "
      "prefix\n"
      "  multi-turn               --num-prompts chats of --num-turns turns to "
      "/v1/chat/completions, each turn\n"
      "                           carrying the replies received; --random-input-len is then the "
      "words per\n"
      "                           user message and --random-output-len the tokens per reply\n"
      "Requests stream with stream_options.include_usage and ignore_eos. Exit code 1 when the "
      "server cannot\n"
      "be reached, a warmup request fails or no request succeeds.");
  sub->add_option("--host", o->host, "Server host")->capture_default_str();
  sub->add_option("--port", o->port, "Server port")
      ->capture_default_str()
      ->check(CLI::Range(1, 65535));
  sub->add_option("--base-url", o->base_url,
                  "Server URL, e.g. http://host:8000 (overrides --host/--port)");
  sub->add_option("--model", o->model,
                  "Model name sent in requests; default: the first of GET /v1/models");
  sub->add_option("--dataset", o->dataset, "Workload")
      ->capture_default_str()
      ->check(CLI::IsMember({"random", "generated-shared-prefix", "multi-turn"}));
  sub->add_option("--num-prompts", o->num_prompts,
                  "Requests (random) or conversations (multi-turn)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_option("--random-input-len", o->random_input_len,
                  "Prompt tokens (random); words per user turn (multi-turn)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_option("--random-output-len", o->random_output_len,
                  "Output tokens per request (random, multi-turn)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_option("--random-range-ratio", o->random_range_ratio,
                  "Lengths drawn uniformly from [len*(1-ratio), len]; 0 = exactly len")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  sub->add_option("--vocab-lo", o->vocab_lo, "Smallest random token id")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--vocab-hi", o->vocab_hi,
                  "Random token ids stay below this; default: the server's vocab_size, else 256")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--gsp-num-groups", o->gsp_num_groups, "Groups, each with its own shared prefix")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_option("--gsp-prompts-per-group", o->gsp_prompts_per_group, "Prompts per group")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_option("--gsp-system-prompt-len", o->gsp_system_prompt_len,
                  "Tokens of the shared prefix")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--gsp-question-len", o->gsp_question_len,
                  "Tokens after the prefix, different per prompt")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--gsp-output-len", o->gsp_output_len, "Output tokens per request")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_option("--gsp-order", o->gsp_order,
                  "Request order: shuffled, or grouped (group by group)")
      ->capture_default_str()
      ->check(CLI::IsMember({"shuffled", "grouped"}));
  sub->add_option("--num-turns", o->num_turns, "Turns per conversation (multi-turn)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_option("--request-rate", o->request_rate,
                  "Poisson arrival rate in requests (conversations) per second; inf = all at once")
      ->capture_default_str();
  sub->add_option("--max-concurrency", o->max_concurrency, "Most requests in flight; 0 = no limit")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--seed", o->seed, "Seed of the workload and the arrival times")
      ->capture_default_str();
  sub->add_option("--temperature", o->temperature, "Sampling temperature sent")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_flag("--no-ignore-eos", o->no_ignore_eos,
                "Let the server stop at end-of-sequence instead of generating max_tokens");
  sub->add_option("--slo-ttft-ms", o->slo_ttft_ms, "Goodput SLO: time to first token (ms)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--slo-tpot-ms", o->slo_tpot_ms, "Goodput SLO: time per output token (ms)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--slo-e2e-ms", o->slo_e2e_ms, "Goodput SLO: end-to-end latency (ms)")
      ->check(CLI::PositiveNumber);
  sub->add_flag("--flush-cache", o->flush_cache,
                "POST /flush_cache after warmup, before the measured run");
  sub->add_option("--warmup", o->warmup,
                  "Requests sent first and not measured (any failure aborts)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--timeout-s", o->timeout_s,
                  "Connect timeout, and the longest wait for more of a stream")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_option("--output-file", o->output_file,
                  "Write the config and metrics as JSON to this file");
  sub->add_flag("--output-details", o->output_details, "Add every request's timings to the JSON");
  sub->add_flag("--json", o->json, "Print the JSON to stdout (the table then goes to stderr)");
  sub->callback([o, &exit_code] { exit_code = run_bench_serve(*o); });
}

}  // namespace tessera
