// The HTTP front of `tessera serve` (cpp-httplib): OpenAI-compatible routes over an Engine, SSE
// streaming, Prometheus metrics, tokenizer routes, API keys. Each request is handled on one of
// httplib's threads, which submits it to the engine and relays its events; a client that goes
// away (a failed write, or a closed socket noticed while waiting) has its request cancelled.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "serve/chat_template.h"
#include "serve/engine.h"
#include "serve/metrics.h"

namespace httplib {
class Server;
}

namespace tessera::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                      // 0: any free port (see HttpServer::port())
  std::string model_id;                 // the name clients use; "" = the model's
  std::vector<std::string> api_keys;    // empty: no authentication
  ChatTemplateStyle chat_style = ChatTemplateStyle::kPlain;
  size_t max_body_bytes = 4 << 20;      // larger bodies get 413
  int http_threads = 0;                 // 0: enough for every running and waiting request
  int timeout_seconds = 30;             // reading a request / writing a response chunk
};

class HttpServer {
 public:
  HttpServer(Engine& engine, ServeMetrics& metrics, ServerOptions opts);
  ~HttpServer();
  // Binds the address; false with a message when it cannot.
  Status bind();
  int port() const { return port_; }
  // Serves until stop() (from another thread or a signal handler's thread).
  void serve();
  void stop();

 private:
  void add_routes();
  bool authorized(const std::string& header, uint64_t* tenant) const;
  void refresh_gauges();

  Engine& engine_;
  ServeMetrics& metrics_;
  ServerOptions opts_;
  std::unique_ptr<httplib::Server> http_;
  int port_ = 0;
  int listen_socket_ = -1;  // the bound socket (to widen its accept queue)
  std::atomic<uint64_t> next_id_{0};
  int64_t started_ = 0;
  int64_t preemptions_seen_ = 0;
};

}  // namespace tessera::serve
