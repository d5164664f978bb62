// The OpenAI wire format: request bodies of /v1/completions and /v1/chat/completions checked and
// turned into engine requests, and the engine's events turned into response and stream chunks.
// JSON stays inside openai_protocol.cc (nlohmann_json); this header passes strings.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "llm/tokenizer.h"
#include "serve/chat_template.h"
#include "serve/engine.h"

namespace tessera::serve {

// An error in OpenAI's shape: {"error": {"message", "type", "param", "code"}}.
struct ApiError {
  int status = 400;
  std::string message;
  std::string param;  // the offending field, "" for none
  std::string code;   // e.g. "model_not_found"; "" for null
};
std::string error_body(const ApiError& e);
// OpenAI's error type for a status: invalid_request_error, authentication_error, ...
const char* error_type(int status);

struct ProtocolContext {
  std::string model_id;  // the name the server answers to
  const llm::Tokenizer* tokenizer = nullptr;
  int64_t context_length = 0;
  ChatTemplateStyle chat_style = ChatTemplateStyle::kPlain;
  uint64_t tenant = 0;   // hash of the API key presented (prefix-cache namespace)
};

// A parsed completion or chat request.
struct ApiRequest {
  bool chat = false;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  RequestParams params;
};

// Parses and checks a body. Unknown fields are ignored (clients send many); wrong types, values out
// of range, an unknown model and prompts that do not fit are errors with the field named.
bool parse_api_request(const std::string& body, bool chat, const ProtocolContext& ctx, ApiRequest* out, ApiError* err);

// Builds the answer of a request from its events.
class ResponseWriter {
 public:
  ResponseWriter(const ApiRequest& req, const ProtocolContext& ctx, std::string id, int64_t created);
  // Streaming: the SSE lines ("data: {...}\n\n") for one event; the final event also yields the
  // usage chunk (when asked for) and "data: [DONE]".
  std::string stream_event(const RequestEvent& e);
  // Not streaming: gathers events; body() is the whole response once the final event is in.
  void add(const RequestEvent& e);
  std::string body() const;

 private:
  std::string chunk(const std::string& text, const std::vector<TokenLogprob>& logprobs, const std::string* finish_reason);
  std::string usage_json() const;
  const ApiRequest& req_;
  const ProtocolContext& ctx_;
  std::string id_;
  int64_t created_;
  bool sent_role_ = false;
  std::string text_;
  std::vector<TokenLogprob> logprobs_;
  std::string finish_reason_;
  int64_t prompt_tokens_ = 0, cached_tokens_ = 0, completion_tokens_ = 0;
  int64_t text_offset_ = 0;
};

// /tokenize and /detokenize bodies to answers; false with err on bad input.
bool tokenize_body(const std::string& body, const ProtocolContext& ctx, std::string* answer, ApiError* err);
bool detokenize_body(const std::string& body, const ProtocolContext& ctx, std::string* answer, ApiError* err);
// GET /v1/models.
std::string models_body(const ProtocolContext& ctx, int64_t created);

}  // namespace tessera::serve
