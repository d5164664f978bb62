// `tessera serve [MODEL]`: the OpenAI-compatible server (continuous batching, paged KV cache,
// radix prefix cache). With no model, a small built-in random-weight model.
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <pthread.h>
#include <thread>

#include "llm/gguf.h"
#include "llm/gguf_model.h"
#include "llm/hf_model.h"
#include "llm/language_model.h"
#include "serve/builtin_model.h"
#include "serve/http_server.h"
#include "tools/cli.h"

namespace tessera {
namespace {

struct ServeCliOptions {
  std::string model;  // "" = built-in
  std::string backend = "native";
  std::string kv_cache_size = "16384";
  std::string chat_template;  // "" = from the model
  int threads = 2;
  int64_t context = 0;
  int64_t block_size = 16;
  bool no_prefix_cache = false;
  serve::ServerOptions server;
  serve::EngineOptions engine;
};

// "N" tokens, or a size in bytes with a unit: "512MiB", "2GiB", "512M", "2G".
Result<int64_t> kv_cache_tokens(const std::string& text, const llm::ModelConfig& c, int64_t block_size) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (...) {
    used = 0;
  }
  std::string unit = text.substr(used);
  if (used == 0 || v <= 0) return invalid_argument("--kv-cache-size: '" + text + "' is not a positive size (e.g. 16384, 512MiB, 2GiB)");
  if (unit.empty()) return static_cast<int64_t>(v);
  double scale = 0;
  if (unit == "K" || unit == "KiB") scale = 1024.0;
  if (unit == "M" || unit == "MiB") scale = 1024.0 * 1024;
  if (unit == "G" || unit == "GiB") scale = 1024.0 * 1024 * 1024;
  if (scale == 0) return invalid_argument("--kv-cache-size: unknown unit '" + unit + "' (tokens, or K/M/G[iB] bytes)");
  const int64_t per_token = llm::KvCache::bytes_per_block(c, block_size) / block_size;
  return std::max<int64_t>(block_size, static_cast<int64_t>(v * scale) / per_token);
}

// The chat template text a model carries: GGUF tokenizer.chat_template, or a Hugging Face
// folder's tokenizer_config.json "chat_template"; "" when none.
std::string model_chat_template(const std::string& path) {
  if (path.empty()) return "";
  if (llm::is_hf_model_path(path)) {
    std::ifstream in(std::filesystem::path(path) / "tokenizer_config.json");
    if (!in) return "";
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    return !j.is_discarded() && j.contains("chat_template") && j["chat_template"].is_string() ? j["chat_template"].get<std::string>() : "";
  }
  auto f = llm::GgufFile::open(path);
  return f.ok() ? (*f)->get_string_or("tokenizer.chat_template", "") : "";
}

Result<std::unique_ptr<llm::LanguageModel>> load_model(const ServeCliOptions& o) {
  llm::ModelOptions mopts;
  mopts.threads = o.threads;
  mopts.backend = o.backend;
  mopts.context_length = o.context;
  mopts.kv_block_size = o.block_size;
  // The cache size needs the config: read it first (cheap for GGUF: metadata only).
  llm::ModelConfig config = serve::builtin_model_config();
  if (!o.model.empty() && !llm::is_hf_model_path(o.model)) {
    TESSERA_ASSIGN_OR_RETURN(auto file, llm::GgufFile::open(o.model));
    TESSERA_ASSIGN_OR_RETURN(config, llm::config_from_gguf(*file));
  }
  TESSERA_ASSIGN_OR_RETURN(mopts.kv_cache_tokens, kv_cache_tokens(o.kv_cache_size, config, o.block_size));
  if (o.model.empty()) return serve::load_builtin_model(mopts);
  if (llm::is_hf_model_path(o.model)) return llm::load_hf_model(o.model, mopts);
  return llm::LanguageModel::load_gguf(o.model, mopts);
}

int run_serve(ServeCliOptions& o) {
  // SIGINT / SIGTERM are taken by one thread that stops the server (blocked everywhere else).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a vanished client is a failed write, not a dead server

  std::fprintf(stderr, "tessera serve: loading %s\n", o.model.empty() ? "the built-in model (random weights)" : o.model.c_str());
  auto loaded = load_model(o);
  if (!loaded.ok()) {
    std::fprintf(stderr, "error: %s\n", loaded.status().to_string().c_str());
    return 1;
  }
  llm::LanguageModel& model = **loaded;
  if (!model.tokenizer()) {
    std::fprintf(stderr, "error: %s has no tokenizer (GGUF tokenizer.ggml.* metadata, or tokenizer.json in a model folder)\n",
                 o.model.c_str());
    return 1;
  }
  if (o.chat_template.empty()) {
    o.server.chat_style = serve::detect_chat_template(model_chat_template(o.model), model.tokenizer()->vocab().tokens);
  } else {
    auto style = serve::parse_chat_template_style(o.chat_template);
    if (!style.ok()) {
      std::fprintf(stderr, "error: --chat-template: %s\n", style.status().message().c_str());
      return 1;
    }
    o.server.chat_style = *style;
  }
  if (o.server.model_id.empty()) {
    o.server.model_id = o.model.empty() ? "tessera-builtin" : std::filesystem::path(o.model).filename().string();
  }
  serve::ServeMetrics metrics(o.server.model_id);
  o.engine.prefix_cache = !o.no_prefix_cache;
  o.engine.on_finish = [&metrics](const serve::RequestRecord& r) {
    metrics.record_finished(r);
    if (r.queue_seconds >= 0) metrics.record_prefix_lookup(r.prompt_tokens, r.cached_tokens);
  };
  {
    serve::Engine engine(model, o.engine);
    serve::HttpServer server(engine, metrics, o.server);
    Status bound = server.bind();
    if (!bound.ok()) {
      std::fprintf(stderr, "error: %s\n", bound.message().c_str());
      return 1;
    }
    const llm::KvCache& kv = model.cache();
    const double kv_mib = static_cast<double>(llm::KvCache::bytes_per_block(model.config(), kv.block_size()) * kv.blocks()) / (1 << 20);
    std::fprintf(stderr,
                 "tessera serve: model '%s' (%lld layers, context %lld), %d threads, KV cache %lld tokens (%.0f MiB), "
                 "prefix cache %s, chat template %s\n",
                 o.server.model_id.c_str(), static_cast<long long>(model.config().layers),
                 static_cast<long long>(model.context_length()), model.threads(),
                 static_cast<long long>(kv.blocks() * kv.block_size()), kv_mib, o.no_prefix_cache ? "off" : "on",
                 serve::chat_template_style_name(o.server.chat_style));
    std::fprintf(stderr, "tessera serve: listening on http://%s:%d/v1 (Ctrl-C stops)\n", o.server.host.c_str(), server.port());
    std::thread waiter([&] {
      int sig = 0;
      sigwait(&signals, &sig);
      std::fprintf(stderr, "tessera serve: stopping\n");
      server.stop();
    });
    server.serve();
    // serve() also returns when stop() came from elsewhere: wake the waiter with a signal.
    pthread_kill(waiter.native_handle(), SIGTERM);
    waiter.join();
  }
  return 0;
}

}  // namespace

void add_serve_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<ServeCliOptions>();
  CLI::App* sub = app.add_subcommand(
      "serve",
      "Serve a language model over an OpenAI-compatible HTTP API (/v1/completions, /v1/chat/completions, /v1/models, "
      "/tokenize, /detokenize, /metrics, /health, /flush_cache). Without MODEL: a small built-in random-weight model");
  sub->add_option("model", o->model, "GGUF file or Hugging Face model folder; none = the built-in model");
  sub->add_option("--host", o->server.host, "Address to listen on")->capture_default_str();
  sub->add_option("--port", o->server.port, "Port (0 = any free one)")->capture_default_str()->check(CLI::Range(0, 65535));
  sub->add_option("--model-name", o->server.model_id, "Name clients use in 'model' (default: the file name)");
  sub->add_option("--api-key", o->server.api_keys, "Require 'Authorization: Bearer KEY' (repeat for several keys)");
  sub->add_option("--threads,-t", o->threads, "Threads for the forward pass")->capture_default_str()->check(CLI::Range(1, 256));
  sub->add_option("--backend", o->backend, "Where the graph runs: native or ref")->capture_default_str();
  sub->add_option("--ctx-size,-c", o->context, "Longest sequence; 0 = the model's context length")->capture_default_str()->check(CLI::NonNegativeNumber);
  sub->add_option("--kv-cache-size", o->kv_cache_size, "KV cache for all requests together: tokens, or bytes as 512MiB / 2GiB")->capture_default_str();
  sub->add_option("--block-size", o->block_size, "Tokens per KV block (and prefix-cache granularity)")->capture_default_str()->check(CLI::Range(1, 1024));
  sub->add_option("--max-batch-tokens", o->engine.max_batch_tokens, "Tokens per forward step (decode + prefill chunks)")->capture_default_str()->check(CLI::PositiveNumber);
  sub->add_option("--chunk-size", o->engine.chunk_size, "Longest prefill chunk of one request per step")->capture_default_str()->check(CLI::PositiveNumber);
  sub->add_option("--max-running", o->engine.max_running, "Requests batched at once")->capture_default_str()->check(CLI::PositiveNumber);
  sub->add_option("--max-queue", o->engine.max_waiting, "Waiting requests; more get HTTP 429")->capture_default_str()->check(CLI::NonNegativeNumber);
  sub->add_flag("--no-prefix-cache", o->no_prefix_cache, "Do not reuse the KV cache of shared prompt prefixes");
  sub->add_option("--chat-template", o->chat_template, "chatml, llama2, llama3, zephyr or plain (default: from the model's metadata)");
  sub->add_option("--max-body", o->server.max_body_bytes, "Largest request body in bytes (413 beyond)")->capture_default_str();
  sub->callback([o, &exit_code] { exit_code = run_serve(*o); });
}

}  // namespace tessera
