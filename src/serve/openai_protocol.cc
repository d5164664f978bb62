#include "serve/openai_protocol.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

namespace tessera::serve {

using nlohmann::json;

namespace {

constexpr int kMaxTopLogprobs = 20;
constexpr size_t kMaxStops = 16;

bool fail(ApiError* err, std::string message, std::string param, int status = 400, std::string code = "") {
  *err = ApiError{status, std::move(message), std::move(param), std::move(code)};
  return false;
}

// Field readers: absent or null leaves the value as it is; a wrong type or range is an error.
bool read_number(const json& j, const char* key, double lo, double hi, float* v, ApiError* err) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return true;
  if (!it->is_number()) return fail(err, std::string("'") + key + "' must be a number", key);
  const double x = it->get<double>();
  if (!(x >= lo && x <= hi)) {
    return fail(err, std::string("'") + key + "' must be between " + json(lo).dump() + " and " + json(hi).dump(), key);
  }
  *v = static_cast<float>(x);
  return true;
}

bool read_int(const json& j, const char* key, int64_t lo, int64_t hi, int64_t* v, ApiError* err) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return true;
  if (!it->is_number_integer()) return fail(err, std::string("'") + key + "' must be an integer", key);
  const int64_t x = it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : it->get<int64_t>();
  if (x < lo || x > hi) {
    return fail(err, std::string("'") + key + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi), key);
  }
  *v = x;
  return true;
}

bool read_bool(const json& j, const char* key, bool* v, ApiError* err) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return true;
  if (!it->is_boolean()) return fail(err, std::string("'") + key + "' must be a boolean", key);
  *v = it->get<bool>();
  return true;
}

uint64_t fnv1a(std::string_view s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// A message's content: a string, or an array of {"type": "text", "text": ...} parts.
bool read_content(const json& m, std::string* out, ApiError* err) {
  auto it = m.find("content");
  if (it == m.end() || it->is_null()) return true;
  if (it->is_string()) {
    *out = it->get<std::string>();
    return true;
  }
  if (!it->is_array()) return fail(err, "a message's 'content' must be a string or an array of text parts", "messages");
  for (const json& part : *it) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string()) {
      return fail(err, "only text content parts ({\"type\": \"text\", \"text\": ...}) are supported", "messages");
    }
    *out += part["text"].get<std::string>();
  }
  return true;
}

bool read_prompt(const json& body, bool chat, const ProtocolContext& ctx, std::vector<int32_t>* ids, ApiError* err) {
  const llm::Tokenizer& tok = *ctx.tokenizer;
  if (chat) {
    auto it = body.find("messages");
    if (it == body.end() || !it->is_array() || it->empty()) return fail(err, "'messages' must be a non-empty array", "messages");
    std::vector<ChatMessage> messages;
    for (const json& m : *it) {
      if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
        return fail(err, "each message must be an object with a string 'role'", "messages");
      }
      ChatMessage cm;
      cm.role = m["role"].get<std::string>();
      if (!read_content(m, &cm.content, err)) return false;
      messages.push_back(std::move(cm));
    }
    const auto& vocab = tok.vocab();
    auto text_of = [&](int32_t id) { return id >= 0 && id < tok.vocab_size() ? vocab.tokens[id] : std::string(); };
    const std::string bos = vocab.add_bos || ctx.chat_style != ChatTemplateStyle::kPlain ? text_of(tok.bos_id()) : "";
    auto rendered = render_chat(ctx.chat_style, messages, true, bos, text_of(tok.eos_id()));
    if (!rendered.ok()) return fail(err, rendered.status().message(), "messages");
    *ids = tok.encode(*rendered, false, true);
    return true;
  }
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) return fail(err, "'prompt' is required", "prompt");
  const json* p = &*it;
  if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array())) p = &(*p)[0];  // a batch of one
  if (p->is_string()) {
    *ids = tok.encode(p->get<std::string>(), true, true);
    return true;
  }
  if (p->is_array()) {
    for (const json& t : *p) {
      if (!t.is_number_integer()) {
        return fail(err, "'prompt' must be a string, an array of token ids, or a batch of one of those (batches of several are not supported)",
                    "prompt");
      }
      const int64_t id = t.get<int64_t>();
      if (id < 0 || id >= tok.vocab_size()) {
        return fail(err, "token id " + std::to_string(id) + " in 'prompt' is outside the vocabulary", "prompt");
      }
      ids->push_back(static_cast<int32_t>(id));
    }
    return true;
  }
  return fail(err, "'prompt' must be a string or an array of token ids", "prompt");
}

json logprob_entry_chat(const llm::Tokenizer& tok, int32_t id, float lp) {
  const std::string piece = tok.token_to_piece(id);
  json bytes = json::array();
  for (unsigned char c : piece) bytes.push_back(static_cast<int>(c));
  return json{{"token", piece}, {"logprob", lp}, {"bytes", bytes}};
}

// Text that may hold invalid UTF-8 (a partial character): dumped with replacement characters.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

const char* error_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "invalid_request_error";
    case 429: return "rate_limit_error";
    case 500: return "server_error";
    case 503: return "service_unavailable";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

std::string error_body(const ApiError& e) {
  json err = {{"message", e.message}, {"type", error_type(e.status)}, {"param", nullptr}, {"code", nullptr}};
  if (!e.param.empty()) err["param"] = e.param;
  if (!e.code.empty()) err["code"] = e.code;
  return dump(json{{"error", err}});
}

bool parse_api_request(const std::string& text, bool chat, const ProtocolContext& ctx, ApiRequest* out, ApiError* err) {
  const json body = json::parse(text, nullptr, false);
  if (body.is_discarded()) return fail(err, "the request body is not valid JSON", "");
  if (!body.is_object()) return fail(err, "the request body must be a JSON object", "");
  out->chat = chat;
  if (auto m = body.find("model"); m != body.end() && !m->is_null()) {
    if (!m->is_string()) return fail(err, "'model' must be a string", "model");
    if (m->get<std::string>() != ctx.model_id) {
      return fail(err, "The model '" + m->get<std::string>() + "' does not exist; this server serves '" + ctx.model_id + "'", "model",
                  404, "model_not_found");
    }
  }
  if (!read_bool(body, "stream", &out->stream, err)) return false;
  if (auto so = body.find("stream_options"); so != body.end() && !so->is_null()) {
    if (!so->is_object()) return fail(err, "'stream_options' must be an object", "stream_options");
    if (!read_bool(*so, "include_usage", &out->include_usage, err)) return false;
  }
  int64_t n = 1;
  if (!read_int(body, "n", 1, 1, &n, err)) return false;

  RequestParams& p = out->params;
  if (!read_prompt(body, chat, ctx, &p.prompt, err)) return false;
  if (p.prompt.empty()) return fail(err, "the prompt has no tokens", chat ? "messages" : "prompt");
  const int64_t prompt_len = static_cast<int64_t>(p.prompt.size());
  if (prompt_len >= ctx.context_length) {
    return fail(err, "This model's maximum context length is " + std::to_string(ctx.context_length) + " tokens; the prompt has " +
                         std::to_string(prompt_len),
                chat ? "messages" : "prompt", 400, "context_length_exceeded");
  }
  // OpenAI's defaults (vLLM's too): temperature 1, no top-k / top-p / min-p cut.
  llm::SamplingParams& s = p.sampling;
  s = llm::SamplingParams{};
  s.temperature = 1.0f;
  s.top_k = 0;
  s.top_p = 1.0f;
  s.min_p = 0.0f;
  s.repeat_last_n = static_cast<int>(ctx.context_length);
  int64_t top_k = 0, seed = -1;
  if (!read_number(body, "temperature", 0, 2, &s.temperature, err) || !read_number(body, "top_p", 1e-9, 1, &s.top_p, err) ||
      !read_int(body, "top_k", -1, INT32_MAX, &top_k, err) || !read_number(body, "min_p", 0, 1, &s.min_p, err) ||
      !read_number(body, "presence_penalty", -2, 2, &s.presence_penalty, err) ||
      !read_number(body, "frequency_penalty", -2, 2, &s.frequency_penalty, err) ||
      !read_number(body, "repetition_penalty", 1e-3, 100, &s.repeat_penalty, err) ||
      !read_int(body, "seed", INT64_MIN, INT64_MAX, &seed, err) || !read_bool(body, "ignore_eos", &p.ignore_eos, err)) {
    return false;
  }
  s.top_k = top_k < 0 ? 0 : static_cast<int>(top_k);
  const bool has_seed = body.contains("seed") && !body["seed"].is_null();
  s.seed = has_seed ? static_cast<uint64_t>(seed) : (static_cast<uint64_t>(std::random_device{}()) << 32 | std::random_device{}());

  const int64_t room = ctx.context_length - prompt_len;
  p.max_tokens = chat ? room : 16;
  const char* max_key = chat && body.contains("max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  if (!read_int(body, max_key, INT64_MIN, INT64_MAX, &p.max_tokens, err)) return false;
  if (p.max_tokens < 1) return fail(err, std::string("'") + max_key + "' must be at least 1", max_key);
  if (p.max_tokens > room) {
    return fail(err, "This model's maximum context length is " + std::to_string(ctx.context_length) + " tokens; the prompt has " +
                         std::to_string(prompt_len) + " and '" + max_key + "' asks for " + std::to_string(p.max_tokens) + " more",
                max_key, 400, "context_length_exceeded");
  }

  if (auto st = body.find("stop"); st != body.end() && !st->is_null()) {
    if (st->is_string()) {
      p.stop.push_back(st->get<std::string>());
    } else if (st->is_array() && st->size() <= kMaxStops) {
      for (const json& x : *st) {
        if (!x.is_string()) return fail(err, "'stop' must be a string or an array of strings", "stop");
        p.stop.push_back(x.get<std::string>());
      }
    } else {
      return fail(err, "'stop' must be a string or an array of at most " + std::to_string(kMaxStops) + " strings", "stop");
    }
    std::erase(p.stop, std::string());
  }

  // Logprobs: chat has logprobs (bool) + top_logprobs (int); completions logprobs (int).
  if (chat) {
    bool want = false;
    int64_t top = 0;
    if (!read_bool(body, "logprobs", &want, err) || !read_int(body, "top_logprobs", 0, kMaxTopLogprobs, &top, err)) return false;
    if (body.contains("top_logprobs") && !body["top_logprobs"].is_null() && !want) {
      return fail(err, "'top_logprobs' needs 'logprobs': true", "top_logprobs");
    }
    p.top_logprobs = want ? static_cast<int>(top) : -1;
  } else {
    int64_t lp = -1;
    if (!read_int(body, "logprobs", 0, kMaxTopLogprobs, &lp, err)) return false;
    p.top_logprobs = static_cast<int>(lp);
  }

  uint64_t ns = ctx.tenant;
  if (auto salt = body.find("cache_salt"); salt != body.end() && !salt->is_null()) {
    if (!salt->is_string()) return fail(err, "'cache_salt' must be a string", "cache_salt");
    ns = fnv1a(salt->get<std::string>(), ns ^ 0x9e3779b97f4a7c15ull);
  }
  p.cache_namespace = ns;
  return true;
}

// ---- responses ----

ResponseWriter::ResponseWriter(const ApiRequest& req, const ProtocolContext& ctx, std::string id, int64_t created)
    : req_(req), ctx_(ctx), id_(std::move(id)), created_(created) {}

std::string ResponseWriter::usage_json() const {
  return dump(json{{"prompt_tokens", prompt_tokens_},
                   {"completion_tokens", completion_tokens_},
                   {"total_tokens", prompt_tokens_ + completion_tokens_},
                   {"prompt_tokens_details", {{"cached_tokens", cached_tokens_}}}});
}

namespace {

// Chat: {"content": [{token, logprob, bytes, top_logprobs: [...]}]}. Completions (legacy):
// {tokens, token_logprobs, top_logprobs: [{token: logprob}], text_offset}.
json logprobs_json(bool chat, const llm::Tokenizer& tok, const std::vector<TokenLogprob>& lps, int64_t* text_offset) {
  if (chat) {
    json content = json::array();
    for (const TokenLogprob& lp : lps) {
      json e = logprob_entry_chat(tok, lp.token, lp.logprob);
      json top = json::array();
      for (const auto& [id, v] : lp.top) top.push_back(logprob_entry_chat(tok, id, v));
      e["top_logprobs"] = top;
      content.push_back(e);
    }
    return json{{"content", content}};
  }
  json tokens = json::array(), token_lps = json::array(), tops = json::array(), offsets = json::array();
  for (const TokenLogprob& lp : lps) {
    const std::string piece = tok.token_to_piece(lp.token);
    tokens.push_back(piece);
    token_lps.push_back(lp.logprob);
    json top = json::object();
    for (const auto& [id, v] : lp.top) top[tok.token_to_piece(id)] = v;
    tops.push_back(top);
    offsets.push_back(*text_offset);
    *text_offset += static_cast<int64_t>(piece.size());
  }
  return json{{"tokens", tokens}, {"token_logprobs", token_lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

}  // namespace

std::string ResponseWriter::chunk(const std::string& text, const std::vector<TokenLogprob>& logprobs,
                                  const std::string* finish_reason) {
  json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
  if (finish_reason) choice["finish_reason"] = *finish_reason;
  if (req_.params.top_logprobs >= 0 && !logprobs.empty()) {
    choice["logprobs"] = logprobs_json(req_.chat, *ctx_.tokenizer, logprobs, &text_offset_);
  }
  if (req_.chat) {
    json delta = json::object();
    if (!sent_role_) {
      delta["role"] = "assistant";
      sent_role_ = true;
    }
    if (!text.empty() || !finish_reason) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  json c = {{"id", id_},
            {"object", req_.chat ? "chat.completion.chunk" : "text_completion"},
            {"created", created_},
            {"model", ctx_.model_id},
            {"choices", json::array({choice})}};
  return "data: " + dump(c) + "\n\n";
}

std::string ResponseWriter::stream_event(const RequestEvent& e) {
  std::string out;
  if (!e.finished) return chunk(e.text, e.logprobs, nullptr);
  prompt_tokens_ = e.prompt_tokens;
  cached_tokens_ = e.cached_tokens;
  completion_tokens_ = e.completion_tokens;
  if (e.finish_reason == "error") {
    out += "data: " + error_body(ApiError{500, e.error, "", ""}) + "\n\n";
  } else {
    const std::string reason = e.finish_reason == "length" ? "length" : "stop";
    out += chunk(e.text, e.logprobs, &reason);
  }
  if (req_.include_usage) {
    json c = {{"id", id_},
              {"object", req_.chat ? "chat.completion.chunk" : "text_completion"},
              {"created", created_},
              {"model", ctx_.model_id},
              {"choices", json::array()},
              {"usage", json::parse(usage_json())}};
    out += "data: " + dump(c) + "\n\n";
  }
  out += "data: [DONE]\n\n";
  return out;
}

void ResponseWriter::add(const RequestEvent& e) {
  text_ += e.text;
  logprobs_.insert(logprobs_.end(), e.logprobs.begin(), e.logprobs.end());
  if (e.finished) {
    finish_reason_ = e.finish_reason;
    prompt_tokens_ = e.prompt_tokens;
    cached_tokens_ = e.cached_tokens;
    completion_tokens_ = e.completion_tokens;
  }
}

std::string ResponseWriter::body() const {
  json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish_reason_ == "length" ? "length" : "stop"}};
  if (req_.params.top_logprobs >= 0) {
    int64_t offset = 0;
    choice["logprobs"] = logprobs_json(req_.chat, *ctx_.tokenizer, logprobs_, &offset);
  }
  if (req_.chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text_}};
  } else {
    choice["text"] = text_;
  }
  json r = {{"id", id_},
            {"object", req_.chat ? "chat.completion" : "text_completion"},
            {"created", created_},
            {"model", ctx_.model_id},
            {"choices", json::array({choice})},
            {"usage", json::parse(usage_json())}};
  return dump(r);
}

// ---- tokenize, detokenize, models ----

bool tokenize_body(const std::string& text, const ProtocolContext& ctx, std::string* answer, ApiError* err) {
  const json body = json::parse(text, nullptr, false);
  if (body.is_discarded() || !body.is_object()) return fail(err, "the request body must be a JSON object", "");
  const char* key = body.contains("prompt") ? "prompt" : "text";
  if (!body.contains(key) || !body[key].is_string()) return fail(err, "'prompt' must be a string", "prompt");
  bool add_special = true;
  if (!read_bool(body, "add_special_tokens", &add_special, err)) return false;
  const std::vector<int32_t> ids = ctx.tokenizer->encode(body[key].get<std::string>(), add_special, true);
  *answer = dump(json{{"tokens", ids}, {"count", ids.size()}, {"max_model_len", ctx.context_length}});
  return true;
}

bool detokenize_body(const std::string& text, const ProtocolContext& ctx, std::string* answer, ApiError* err) {
  const json body = json::parse(text, nullptr, false);
  if (body.is_discarded() || !body.is_object()) return fail(err, "the request body must be a JSON object", "");
  auto it = body.find("tokens");
  if (it == body.end() || !it->is_array()) return fail(err, "'tokens' must be an array of token ids", "tokens");
  std::vector<int32_t> ids;
  for (const json& t : *it) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= ctx.tokenizer->vocab_size()) {
      return fail(err, "'tokens' must hold token ids from 0 to " + std::to_string(ctx.tokenizer->vocab_size() - 1), "tokens");
    }
    ids.push_back(t.get<int32_t>());
  }
  *answer = dump(json{{"prompt", ctx.tokenizer->decode(ids, true)}});
  return true;
}

std::string models_body(const ProtocolContext& ctx, int64_t created) {
  json m = {{"id", ctx.model_id},
            {"object", "model"},
            {"created", created},
            {"owned_by", "tessera"},
            {"max_model_len", ctx.context_length},
            {"vocab_size", ctx.tokenizer->vocab_size()}};
  return dump(json{{"object", "list"}, {"data", json::array({m})}});
}

}  // namespace tessera::serve
