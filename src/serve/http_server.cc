#include "serve/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdio>
#include <cstring>

#include "serve/openai_protocol.h"

namespace tessera::serve {

namespace {

using namespace std::chrono_literals;

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(error_body(e), "application/json");
}

uint64_t hash_key(const std::string& key) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : key) h = (h ^ c) * 1099511628211ull;
  return key.empty() ? 0 : h;
}

// Relays one request's events to its client, as SSE or as one JSON body at the end. Shared by
// the content provider and its releaser: whichever runs last drops it.
struct Relay {
  ApiRequest req;
  ProtocolContext ctx;
  std::shared_ptr<RequestChannel> channel;
  std::unique_ptr<ResponseWriter> writer;
  bool finished = false;
};

}  // namespace

HttpServer::HttpServer(Engine& engine, ServeMetrics& metrics, ServerOptions opts)
    : engine_(engine), metrics_(metrics), opts_(std::move(opts)), http_(std::make_unique<httplib::Server>()) {
  if (opts_.model_id.empty()) opts_.model_id = engine_.model().config().name.empty() ? "tessera" : engine_.model().config().name;
  started_ = unix_seconds();
  const EngineOptions& eo = engine_.options();
  const int threads = opts_.http_threads > 0 ? opts_.http_threads
                                             : static_cast<int>(std::min<int64_t>(1024, eo.max_running + eo.max_waiting + 8));
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  http_->set_payload_max_length(opts_.max_body_bytes);
  http_->set_read_timeout(opts_.timeout_seconds, 0);
  http_->set_write_timeout(opts_.timeout_seconds, 0);
  http_->set_keep_alive_timeout(5);
  http_->set_socket_options([this](int s) {
    httplib::default_socket_options(s);
    listen_socket_ = s;  // the last socket configured is the one that binds
  });
  add_routes();
}

HttpServer::~HttpServer() { stop(); }

Status HttpServer::bind() {
  if (opts_.port == 0) {
    port_ = http_->bind_to_any_port(opts_.host);
    if (port_ <= 0) return io_error("cannot listen on " + opts_.host + " (any port)");
  } else {
    if (!http_->bind_to_port(opts_.host, opts_.port)) {
      return io_error("cannot listen on " + opts_.host + ":" + std::to_string(opts_.port) + " (in use, or not an address of this machine)");
    }
    port_ = opts_.port;
  }
  // cpp-httplib listens with a backlog of 5: a burst of new clients (32 connecting at once) would
  // overflow the accept queue and see their connections stall or reset. Listening again on a
  // listening socket only changes its backlog.
  if (listen_socket_ >= 0) ::listen(listen_socket_, SOMAXCONN);
  return Status();
}

void HttpServer::serve() { http_->listen_after_bind(); }

void HttpServer::stop() {
  if (http_) http_->stop();
}

bool HttpServer::authorized(const std::string& header, uint64_t* tenant) const {
  std::string key;
  if (header.rfind("Bearer ", 0) == 0) key = header.substr(7);
  *tenant = hash_key(key);
  if (opts_.api_keys.empty()) return true;
  return std::find(opts_.api_keys.begin(), opts_.api_keys.end(), key) != opts_.api_keys.end();
}

void HttpServer::refresh_gauges() {
  const Engine::Stats st = engine_.stats();
  metrics_.set_requests(st.running, st.waiting);
  metrics_.set_kv_cache_blocks(st.kv_blocks_in_use, st.kv_blocks_total);
  metrics_.num_preemptions.add(static_cast<double>(st.preemptions - preemptions_seen_));
  preemptions_seen_ = st.preemptions;
}

void HttpServer::add_routes() {
  httplib::Server& s = *http_;
  const llm::LanguageModel& model = engine_.model();
  auto context = [this, &model](uint64_t tenant) {
    ProtocolContext ctx;
    ctx.model_id = opts_.model_id;
    ctx.tokenizer = model.tokenizer();
    ctx.context_length = model.context_length();
    ctx.chat_style = opts_.chat_style;
    ctx.tenant = tenant;
    return ctx;
  };
  auto fail = [this](httplib::Response& res, const ApiError& e) {
    metrics_.record_error_response(e.status);
    send_error(res, e);
  };
  // Routes under /v1 (and the tokenizer's) need the API key when one is set.
  auto guarded = [this, fail](auto handler) {
    return [this, fail, handler](const httplib::Request& req, httplib::Response& res) {
      uint64_t tenant = 0;
      if (!authorized(req.get_header_value("Authorization"), &tenant)) {
        res.set_header("WWW-Authenticate", "Bearer");
        return fail(res, ApiError{401, "Incorrect or missing API key: send 'Authorization: Bearer KEY'", "", "invalid_api_key"});
      }
      handler(req, res, tenant);
    };
  };

  auto completion = [this, context, fail](bool chat) {
    return [this, context, fail, chat](const httplib::Request& req, httplib::Response& res, uint64_t tenant) {
      auto relay = std::make_shared<Relay>();
      relay->ctx = context(tenant);
      ApiError err;
      if (!parse_api_request(req.body, chat, relay->ctx, &relay->req, &err)) return fail(res, err);
      Submission sub = engine_.submit(relay->req.params);
      if (!sub.channel) {
        const int status = sub.rejection == Rejection::kQueueFull ? 429 : sub.rejection == Rejection::kShuttingDown ? 503 : 400;
        return fail(res, ApiError{status, sub.error, "", status == 429 ? "rate_limit_exceeded" : ""});
      }
      relay->channel = sub.channel;
      const std::string id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(started_) + "-" + std::to_string(next_id_++);
      relay->writer = std::make_unique<ResponseWriter>(relay->req, relay->ctx, id, unix_seconds());
      const bool stream = relay->req.stream;
      // The provider runs until the request finishes; while no event comes it checks that the
      // client is still there. Returning false drops the connection (and cancels).
      // A closed socket still selects as writable, so while waiting the provider also writes a
      // keep-alive now and then (an SSE comment; whitespace before the JSON body, which JSON
      // allows): a client that went away fails that write and its request is cancelled.
      auto provider = [relay, stream](size_t, httplib::DataSink& sink) {
        auto last_write = std::chrono::steady_clock::now();
        while (!relay->finished) {
          if (std::optional<RequestEvent> e = relay->channel->next(100ms)) {
            relay->finished = e->finished;
            if (stream) {
              const std::string out = relay->writer->stream_event(*e);
              if (!sink.write(out.data(), out.size())) {
                relay->channel->cancel();
                return false;
              }
              last_write = std::chrono::steady_clock::now();
            } else {
              relay->writer->add(*e);
            }
          }
          if (!relay->finished && std::chrono::steady_clock::now() - last_write > 250ms) {
            const char* ping = stream ? ": keep-alive\n\n" : "\n";
            if (!sink.is_writable() || !sink.write(ping, std::strlen(ping))) {
              relay->channel->cancel();
              return false;
            }
            last_write = std::chrono::steady_clock::now();
          }
        }
        if (!stream) {
          const std::string body = relay->writer->body();
          if (!sink.write(body.data(), body.size())) return false;
        }
        sink.done();
        return true;
      };
      // Also runs when the connection fails before the provider finished.
      auto releaser = [relay](bool) {
        if (!relay->finished) relay->channel->cancel();
      };
      res.status = 200;
      if (stream) {
        res.set_header("Cache-Control", "no-cache");
        res.set_chunked_content_provider("text/event-stream", provider, releaser);
      } else {
        res.set_chunked_content_provider("application/json", provider, releaser);
      }
    };
  };
  s.Post("/v1/completions", guarded(completion(false)));
  s.Post("/v1/chat/completions", guarded(completion(true)));

  s.Get("/v1/models", guarded([this, context](const httplib::Request&, httplib::Response& res, uint64_t tenant) {
    res.set_content(models_body(context(tenant), started_), "application/json");
  }));
  s.Post("/tokenize", guarded([context, fail](const httplib::Request& req, httplib::Response& res, uint64_t tenant) {
    std::string answer;
    ApiError err;
    if (!tokenize_body(req.body, context(tenant), &answer, &err)) return fail(res, err);
    res.set_content(answer, "application/json");
  }));
  s.Post("/detokenize", guarded([context, fail](const httplib::Request& req, httplib::Response& res, uint64_t tenant) {
    std::string answer;
    ApiError err;
    if (!detokenize_body(req.body, context(tenant), &answer, &err)) return fail(res, err);
    res.set_content(answer, "application/json");
  }));
  s.Post("/flush_cache", guarded([this](const httplib::Request&, httplib::Response& res, uint64_t) {
    const int64_t freed = engine_.flush_prefix_cache();
    res.set_content("{\"flushed_blocks\":" + std::to_string(freed) + "}", "application/json");
  }));
  s.Get("/health", [](const httplib::Request&, httplib::Response& res) { res.set_content("{\"status\":\"ok\"}", "application/json"); });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    refresh_gauges();
    res.set_content(metrics_.render(), "text/plain; version=0.0.4");
  });

  // Everything else that fails without a body (unknown route 404, body too large 413, a
  // malformed request 400) gets an OpenAI-style error too.
  s.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string message = "error";
    if (res.status == 404) message = "no route " + req.method + " " + req.path;
    if (res.status == 405) message = "method " + req.method + " is not allowed on " + req.path;
    if (res.status == 413) message = "the request body is larger than " + std::to_string(opts_.max_body_bytes) + " bytes";
    if (res.status == 400) message = "malformed HTTP request";
    metrics_.record_error_response(res.status);
    res.set_content(error_body(ApiError{res.status, message, "", ""}), "application/json");
  });
  s.set_exception_handler([this](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    metrics_.record_error_response(500);
    send_error(res, ApiError{500, what, "", ""});
  });
}

}  // namespace tessera::serve
