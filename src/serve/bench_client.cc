#include "serve/bench_client.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <system_error>
#include <thread>

namespace tessera::serve {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

// ---- workload helpers ----

// [len * (1 - ratio), len], at least 1.
std::uniform_int_distribution<int64_t> length_distribution(int64_t len, double ratio) {
  const int64_t lo = std::max<int64_t>(
      1, static_cast<int64_t>(std::floor(static_cast<double>(len) * (1.0 - ratio))));
  return std::uniform_int_distribution<int64_t>(lo, std::max(lo, len));
}

std::vector<int32_t> random_token_ids(std::mt19937_64& rng, int64_t n, const TokenIdRange& vocab) {
  std::uniform_int_distribution<int64_t> id(vocab.lo, vocab.hi - 1);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& t : ids) t = static_cast<int32_t>(id(rng));
  return ids;
}

Status check_vocab(const TokenIdRange& v) {
  if (v.lo < 0 || v.hi <= v.lo || v.hi > std::numeric_limits<int32_t>::max()) {
    return invalid_argument("token id range [" + std::to_string(v.lo) + ", " +
                            std::to_string(v.hi) + ") is empty or out of range");
  }
  return Status::ok_status();
}

Status check_positive(int64_t v, const char* what) {
  if (v < 1)
    return invalid_argument(std::string(what) + " must be at least 1, not " + std::to_string(v));
  return Status::ok_status();
}

Status check_ratio(double r) {
  if (!(r >= 0.0 && r <= 1.0))
    return invalid_argument("range ratio must be in [0, 1], not " + std::to_string(r));
  return Status::ok_status();
}

// Plain words so that chat prompts tokenize like ordinary text under any tokenizer.
constexpr const char* kWords[] = {
    "time",   "person",   "year",   "way",     "day",     "thing",   "man",    "world",   "life",
    "hand",   "part",     "child",  "eye",     "woman",   "place",   "work",   "week",    "case",
    "point",  "number",   "group",  "problem", "fact",    "house",   "water",  "river",   "stone",
    "light",  "music",    "garden", "city",    "road",    "table",   "window", "paper",   "story",
    "answer", "question", "reason", "idea",    "good",    "new",     "first",  "last",    "long",
    "great",  "little",   "old",    "right",   "big",     "high",    "small",  "large",   "early",
    "young",  "clear",    "quiet",  "bright",  "simple",  "strange", "make",   "know",    "take",
    "see",    "come",     "think",  "look",    "want",    "give",    "use",    "find",    "tell",
    "ask",    "seem",     "feel",   "try",     "leave",   "call",    "write",  "explain", "and",
    "the",    "of",       "to",     "in",      "with",    "about",   "under",  "after",   "before",
    "why",    "how",      "what",   "please",  "briefly", "again",   "always", "never",   "often",
    "today",
};

std::string random_words(std::mt19937_64& rng, int64_t n) {
  std::uniform_int_distribution<size_t> pick(0, std::size(kWords) - 1);
  std::string s;
  for (int64_t i = 0; i < n; ++i) {
    if (i) s += ' ';
    s += kWords[pick(rng)];
  }
  return s;
}

// ---- URLs ----

struct ParsedUrl {
  std::string scheme_host_port;  // what httplib::Client takes
  std::string prefix;            // path prefix without a trailing '/', may be empty
};

Result<ParsedUrl> parse_base_url(const std::string& url) {
  std::string rest = url;
  std::string scheme = "http";
  if (const size_t p = rest.find("://"); p != std::string::npos) {
    scheme = rest.substr(0, p);
    rest = rest.substr(p + 3);
  }
  if (scheme != "http" && scheme != "https") {
    return invalid_argument("base URL '" + url + "': only http:// and https:// are supported");
  }
  const size_t slash = rest.find('/');
  std::string host_port = rest.substr(0, slash);
  std::string prefix = slash == std::string::npos ? "" : rest.substr(slash);
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  const size_t colon = host_port.rfind(':');
  const std::string host = colon == std::string::npos ? host_port : host_port.substr(0, colon);
  if (host.empty()) return invalid_argument("base URL '" + url + "' has no host");
  if (colon != std::string::npos) {
    const std::string port = host_port.substr(colon + 1);
    if (port.empty() || port.size() > 5 ||
        !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return invalid_argument("base URL '" + url + "' has a bad port '" + port + "'");
    }
  }
  return ParsedUrl{scheme + "://" + host_port, prefix};
}

std::unique_ptr<httplib::Client> make_client(const ParsedUrl& url, double timeout_s) {
  auto cli = std::make_unique<httplib::Client>(url.scheme_host_port);
  const auto t = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::duration<double>(timeout_s));
  cli->set_connection_timeout(t);
  cli->set_read_timeout(t);
  cli->set_write_timeout(t);
  // No Accept-Encoding: a compressed event stream would arrive in bursts, not token by token.
  cli->set_decompress(false);
  return cli;
}

// "message" of an OpenAI error body {"error": {"message": ...}}, else the body itself, shortened.
std::string error_message_of(const std::string& body) {
  const json j = json::parse(body, nullptr, false);
  if (j.is_object()) {
    const auto e = j.find("error");
    if (e != j.end() && e->is_object()) {
      const auto m = e->find("message");
      if (m != e->end() && m->is_string()) return m->get<std::string>();
    }
    if (e != j.end() && e->is_string()) return e->get<std::string>();
  }
  std::string s = body.substr(0, 200);
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

int64_t int_field(const json& obj, const char* key) {
  const auto it = obj.find(key);
  return it != obj.end() && it->is_number() ? it->get<int64_t>() : 0;
}

// ---- one streamed request ----

// Folds the events of one stream into its record.
struct StreamState {
  bool chat = false;
  bool done = false;         // saw data: [DONE]
  bool finish_seen = false;  // saw a finish_reason
  std::string stream_error;  // an error event or an unreadable event

  void on_event(std::string_view data, double now, BenchRequestRecord& rec) {
    if (data == "[DONE]") {
      done = true;
      return;
    }
    const json j = json::parse(data, nullptr, false);
    if (!j.is_object()) {
      if (stream_error.empty())
        stream_error = "unreadable stream event: " + std::string(data.substr(0, 200));
      return;
    }
    if (const auto e = j.find("error"); e != j.end() && !e->is_null()) {
      if (stream_error.empty()) stream_error = error_message_of(j.dump());
      return;
    }
    if (const auto ch = j.find("choices"); ch != j.end() && ch->is_array() && !ch->empty()) {
      const json& c = ch->front();
      const json* text = nullptr;
      if (chat) {
        const auto d = c.find("delta");
        if (d != c.end() && d->is_object()) {
          const auto t = d->find("content");
          if (t != d->end()) text = &*t;
        }
      } else if (const auto t = c.find("text"); t != c.end()) {
        text = &*t;
      }
      // Only chunks that carry text count as tokens arriving (as in SGLang): a role-only first
      // chat delta is not the first token.
      if (text && text->is_string() && !text->get_ref<const std::string&>().empty()) {
        rec.chunk_times.push_back(now);
        rec.text += text->get_ref<const std::string&>();
      }
      if (const auto f = c.find("finish_reason"); f != c.end() && !f->is_null()) finish_seen = true;
    }
    if (const auto u = j.find("usage"); u != j.end() && u->is_object()) {
      rec.usage_reported = true;
      rec.prompt_tokens = int_field(*u, "prompt_tokens");
      rec.completion_tokens = int_field(*u, "completion_tokens");
      const auto d = u->find("prompt_tokens_details");
      rec.cached_tokens = d != u->end() && d->is_object() ? int_field(*d, "cached_tokens") : 0;
    }
  }
};

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Sends one streaming POST and fills rec (everything but job and turn).
void send_streaming_request(const ParsedUrl& url, const std::string& base_url, double timeout_s,
                            const std::string& path, const std::string& body, bool chat,
                            Clock::time_point t0, BenchRequestRecord& rec) {
  auto cli = make_client(url, timeout_s);
  httplib::Request req;
  req.method = "POST";
  req.path = url.prefix + path;
  req.set_header("Content-Type", "application/json");
  req.set_header("Accept", "text/event-stream");
  req.body = body;

  int status = 0;
  std::string error_body;
  SseEventParser sse;
  StreamState state;
  state.chat = chat;
  req.response_handler = [&](const httplib::Response& r) {
    status = r.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (status != 200) {
      if (error_body.size() < 65536) error_body.append(data, n);
      return true;
    }
    const double now = seconds_since(t0);
    sse.feed(std::string_view(data, n),
             [&](std::string_view event) { state.on_event(event, now, rec); });
    return true;
  };

  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  rec.send_time = seconds_since(t0);
  const bool sent = cli->send(req, res, err);
  rec.end_time = seconds_since(t0);
  rec.http_status = status;

  if (status == 0) {
    rec.error = "no response from " + base_url + path + " (" + httplib::to_string(err) + ")";
  } else if (status != 200) {
    rec.error = "HTTP " + std::to_string(status) + ": " + error_message_of(error_body);
  } else if (!sent) {
    rec.error = "stream broken after " + std::to_string(rec.chunk_times.size()) + " chunks (" +
                httplib::to_string(err) + ")";
  } else if (!state.stream_error.empty()) {
    rec.error = state.stream_error;
  } else if (!state.done && !state.finish_seen) {
    rec.error = "stream ended without a finish_reason or [DONE]";
  } else {
    rec.success = true;
    // Servers without include_usage: count text chunks as tokens (one token per chunk is what
    // OpenAI-style streaming sends).
    if (!rec.usage_reported) rec.completion_tokens = static_cast<int64_t>(rec.chunk_times.size());
  }
}

// Hands out up to n slots in arrival order, so that a request that has waited longest goes first
// (what an asyncio.Semaphore gives SGLang's client). n <= 0: no limit.
class FifoSlots {
 public:
  explicit FifoSlots(int64_t n) : unlimited_(n <= 0), free_(n) {}

  void acquire() {
    if (unlimited_) return;
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t ticket = next_ticket_++;
    cv_.wait(lock, [&] { return ticket == serving_ && free_ > 0; });
    --free_;
    ++serving_;
    cv_.notify_all();  // the next ticket may also find a free slot
  }

  void release() {
    if (unlimited_) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++free_;
    }
    cv_.notify_all();
  }

 private:
  const bool unlimited_;
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t free_;
  uint64_t next_ticket_ = 0;
  uint64_t serving_ = 0;
};

json sampling_body(const BenchTarget& target, const BenchRunOptions& o, int64_t max_tokens) {
  json body;
  body["model"] = target.model;
  body["max_tokens"] = max_tokens;
  body["temperature"] = o.temperature;
  body["ignore_eos"] = o.ignore_eos;
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  return body;
}

}  // namespace

// ---- workloads ----

int64_t BenchWorkload::num_requests() const {
  int64_t n = 0;
  for (const auto& j : jobs) n += j.num_requests();
  return n;
}

Result<BenchWorkload> make_random_workload(const RandomDatasetOptions& o) {
  TESSERA_RETURN_IF_ERROR(check_positive(o.num_prompts, "number of prompts"));
  TESSERA_RETURN_IF_ERROR(check_positive(o.input_len, "input length"));
  TESSERA_RETURN_IF_ERROR(check_positive(o.output_len, "output length"));
  TESSERA_RETURN_IF_ERROR(check_ratio(o.range_ratio));
  TESSERA_RETURN_IF_ERROR(check_vocab(o.vocab));
  std::mt19937_64 rng(o.seed);
  auto in_len = length_distribution(o.input_len, o.range_ratio);
  auto out_len = length_distribution(o.output_len, o.range_ratio);
  BenchWorkload w;
  w.dataset = "random";
  w.jobs.resize(static_cast<size_t>(o.num_prompts));
  for (auto& job : w.jobs) {
    const int64_t n = in_len(rng);
    job.output_len = out_len(rng);
    job.prompt_ids = random_token_ids(rng, n, o.vocab);
  }
  return w;
}

Result<BenchWorkload> make_shared_prefix_workload(const SharedPrefixDatasetOptions& o) {
  TESSERA_RETURN_IF_ERROR(check_positive(o.num_groups, "number of groups"));
  TESSERA_RETURN_IF_ERROR(check_positive(o.prompts_per_group, "prompts per group"));
  TESSERA_RETURN_IF_ERROR(check_positive(o.output_len, "output length"));
  TESSERA_RETURN_IF_ERROR(check_vocab(o.vocab));
  if (o.system_prompt_len < 0 || o.question_len < 0 || o.system_prompt_len + o.question_len < 1) {
    return invalid_argument(
        "shared prefix and question lengths must be >= 0 with a sum of at least 1");
  }
  std::mt19937_64 rng(o.seed);
  BenchWorkload w;
  w.dataset = "generated-shared-prefix";
  for (int64_t g = 0; g < o.num_groups; ++g) {
    const std::vector<int32_t> prefix = random_token_ids(rng, o.system_prompt_len, o.vocab);
    for (int64_t p = 0; p < o.prompts_per_group; ++p) {
      BenchJob job;
      job.group = g;
      job.output_len = o.output_len;
      job.prompt_ids = prefix;
      const std::vector<int32_t> question = random_token_ids(rng, o.question_len, o.vocab);
      job.prompt_ids.insert(job.prompt_ids.end(), question.begin(), question.end());
      w.jobs.push_back(std::move(job));
    }
  }
  if (o.shuffle) std::shuffle(w.jobs.begin(), w.jobs.end(), rng);
  return w;
}

Result<BenchWorkload> make_multi_turn_workload(const MultiTurnDatasetOptions& o) {
  TESSERA_RETURN_IF_ERROR(check_positive(o.num_conversations, "number of conversations"));
  TESSERA_RETURN_IF_ERROR(check_positive(o.num_turns, "number of turns"));
  TESSERA_RETURN_IF_ERROR(check_positive(o.words_per_turn, "words per turn"));
  TESSERA_RETURN_IF_ERROR(check_positive(o.output_len, "output length"));
  TESSERA_RETURN_IF_ERROR(check_ratio(o.range_ratio));
  std::mt19937_64 rng(o.seed);
  auto words = length_distribution(o.words_per_turn, o.range_ratio);
  auto out_len = length_distribution(o.output_len, o.range_ratio);
  BenchWorkload w;
  w.dataset = "multi-turn";
  w.jobs.resize(static_cast<size_t>(o.num_conversations));
  for (auto& job : w.jobs) {
    job.turns.resize(static_cast<size_t>(o.num_turns));
    for (auto& turn : job.turns) {
      turn.user_message = random_words(rng, words(rng));
      turn.output_len = out_len(rng);
    }
  }
  return w;
}

std::vector<double> poisson_arrival_times(size_t n, double rate, uint64_t seed) {
  std::vector<double> t(n, 0.0);
  if (!(rate > 0) || std::isinf(rate)) return t;
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(rate);
  for (size_t i = 1; i < n; ++i) t[i] = t[i - 1] + gap(rng);
  return t;
}

// ---- SSE ----

void SseEventParser::feed(std::string_view bytes,
                          const std::function<void(std::string_view)>& on_data) {
  for (const char c : bytes) {
    if (c != '\n') {
      line_ += c;
      continue;
    }
    if (!line_.empty() && line_.back() == '\r') line_.pop_back();
    if (line_.empty()) {  // a blank line ends the event
      if (has_data_) on_data(data_);
      data_.clear();
      has_data_ = false;
    } else if (line_.rfind("data:", 0) == 0) {
      std::string_view value = std::string_view(line_).substr(5);
      if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
      if (has_data_) data_ += '\n';
      data_.append(value);
      has_data_ = true;
    }  // comments (":...") and other fields (event:, id:, retry:) carry nothing we measure
    line_.clear();
  }
}

// ---- the run ----

double BenchRequestRecord::tpot() const {
  if (completion_tokens < 2) return 0.0;
  return (e2e() - ttft()) / static_cast<double>(completion_tokens - 1);
}

Result<BenchRunResult> run_bench(const BenchTarget& target, const BenchWorkload& workload,
                                 const BenchRunOptions& options) {
  TESSERA_ASSIGN_OR_RETURN(const ParsedUrl url, parse_base_url(target.base_url));
  if (!(target.timeout_s > 0)) return invalid_argument("timeout must be positive");

  // Records in workload order: job i's requests start at first_record[i].
  std::vector<size_t> first_record(workload.jobs.size());
  size_t total = 0;
  for (size_t i = 0; i < workload.jobs.size(); ++i) {
    first_record[i] = total;
    total += static_cast<size_t>(workload.jobs[i].num_requests());
  }
  BenchRunResult result;
  result.records.resize(total);

  std::mutex progress_mu;
  int64_t done = 0, failed = 0;
  auto finished = [&](const BenchRequestRecord& rec) {
    std::lock_guard<std::mutex> lock(progress_mu);
    ++done;
    if (!rec.success) ++failed;
    if (options.on_progress) options.on_progress(done, static_cast<int64_t>(total), failed);
  };

  FifoSlots slots(options.max_concurrency);
  const Clock::time_point t0 = Clock::now();

  // Runs job i; the caller has already acquired the slot of its first request.
  auto run_job = [&](size_t i) {
    const BenchJob& job = workload.jobs[i];
    BenchRequestRecord* recs = &result.records[first_record[i]];
    if (!job.is_chat()) {
      recs[0].job = static_cast<int64_t>(i);
      recs[0].prompt_tokens = static_cast<int64_t>(job.prompt_ids.size());
      json body = sampling_body(target, options, job.output_len);
      body["prompt"] = job.prompt_ids;
      send_streaming_request(url, target.base_url, target.timeout_s, "/v1/completions", body.dump(),
                             false, t0, recs[0]);
      slots.release();
      finished(recs[0]);
      return;
    }
    json messages = json::array();
    for (size_t t = 0; t < job.turns.size(); ++t) {
      BenchRequestRecord& rec = recs[t];
      rec.job = static_cast<int64_t>(i);
      rec.turn = static_cast<int64_t>(t);
      if (t > 0 && !recs[t - 1].success) {
        // Without the reply there is no next turn to send; it still counts, as a failure.
        rec.send_time = rec.end_time = seconds_since(t0);
        rec.error = "not sent: an earlier turn of the conversation failed";
        finished(rec);
        continue;
      }
      if (t > 0) slots.acquire();
      messages.push_back(json{{"role", "user"}, {"content", job.turns[t].user_message}});
      json body = sampling_body(target, options, job.turns[t].output_len);
      body["messages"] = messages;
      send_streaming_request(url, target.base_url, target.timeout_s, "/v1/chat/completions",
                             body.dump(), true, t0, rec);
      slots.release();
      if (rec.success) messages.push_back(json{{"role", "assistant"}, {"content", rec.text}});
      finished(rec);
    }
  };

  // The dispatcher waits for each job's arrival time and a free slot, then gives the job a thread:
  // threads never outnumber the requests that may be in flight, and a full server delays sends
  // exactly as a FIFO semaphore would.
  struct Worker {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::list<Worker> workers;
  const std::vector<double> arrivals =
      poisson_arrival_times(workload.jobs.size(), options.request_rate, options.seed);
  for (size_t i = 0; i < workload.jobs.size(); ++i) {
    std::this_thread::sleep_until(t0 + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(arrivals[i])));
    slots.acquire();
    // Join finished threads now rather than at the end, so a long run does not keep thousands.
    for (auto it = workers.begin(); it != workers.end();) {
      if (it->done->load()) {
        it->thread.join();
        it = workers.erase(it);
      } else {
        ++it;
      }
    }
    auto flag = std::make_shared<std::atomic<bool>>(false);
    try {
      workers.push_back(Worker{std::thread([&run_job, i, flag] {
                                 run_job(i);
                                 flag->store(true);
                               }),
                               flag});
    } catch (const std::system_error&) {
      run_job(i);  // out of threads: this job runs here, the run slows down but stays correct
    }
  }
  for (auto& w : workers) w.thread.join();

  double last = 0;
  for (const auto& r : result.records) last = std::max(last, r.end_time);
  result.duration_s = last;
  return result;
}

// ---- talking to the server outside the run ----

Result<ServerModelInfo> query_first_model(const std::string& base_url, double timeout_s) {
  TESSERA_ASSIGN_OR_RETURN(const ParsedUrl url, parse_base_url(base_url));
  auto cli = make_client(url, timeout_s);
  const std::string where = base_url + "/v1/models";
  auto res = cli->Get(url.prefix + "/v1/models");
  if (!res)
    return io_error("cannot reach the server at " + base_url + " (" +
                    httplib::to_string(res.error()) + ")");
  if (res->status != 200) {
    return not_found("GET " + where + " answered HTTP " + std::to_string(res->status) + ": " +
                     error_message_of(res->body));
  }
  const json j = json::parse(res->body, nullptr, false);
  const json* first = nullptr;
  if (j.is_object()) {
    const auto d = j.find("data");
    if (d != j.end() && d->is_array() && !d->empty() && d->front().is_object()) first = &d->front();
  }
  if (!first || !first->contains("id") || !(*first)["id"].is_string()) {
    return not_found("GET " + where + " lists no model: give --model");
  }
  ServerModelInfo info;
  info.id = (*first)["id"].get<std::string>();
  info.vocab_size = int_field(*first, "vocab_size");
  info.max_model_len = int_field(*first, "max_model_len");
  return info;
}

Status flush_server_cache(const std::string& base_url, double timeout_s) {
  TESSERA_ASSIGN_OR_RETURN(const ParsedUrl url, parse_base_url(base_url));
  auto cli = make_client(url, timeout_s);
  auto res = cli->Post(url.prefix + "/flush_cache");
  if (!res)
    return io_error("cannot reach the server at " + base_url + " (" +
                    httplib::to_string(res.error()) + ")");
  if (res->status != 200) {
    return io_error("POST " + base_url + "/flush_cache answered HTTP " +
                    std::to_string(res->status) + ": " + error_message_of(res->body));
  }
  return Status::ok_status();
}

// ---- metrics ----

double sorted_percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0.0;
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - static_cast<double>(lo));
}

LatencySummary summarize_latencies(std::vector<double> seconds) {
  LatencySummary s;
  s.count = static_cast<int64_t>(seconds.size());
  if (seconds.empty()) return s;
  std::sort(seconds.begin(), seconds.end());
  double sum = 0;
  for (const double v : seconds) sum += v;
  const double mean = sum / static_cast<double>(seconds.size());
  double sq = 0;
  for (const double v : seconds) sq += (v - mean) * (v - mean);
  s.mean_ms = 1e3 * mean;
  s.median_ms = 1e3 * sorted_percentile(seconds, 50);
  s.p90_ms = 1e3 * sorted_percentile(seconds, 90);
  s.p99_ms = 1e3 * sorted_percentile(seconds, 99);
  s.std_ms = 1e3 * std::sqrt(sq / static_cast<double>(seconds.size()));
  s.max_ms = 1e3 * seconds.back();
  return s;
}

BenchMetrics compute_bench_metrics(const std::vector<BenchRequestRecord>& records,
                                   double duration_s, const BenchSlo& slo) {
  BenchMetrics m;
  m.duration_s = duration_s;
  std::vector<double> ttft, tpot, itl, e2e;
  std::map<std::string, int64_t> errors;
  double e2e_sum = 0;
  for (const auto& r : records) {
    if (!r.success) {
      ++m.failed;
      ++errors[r.error];
      continue;
    }
    ++m.completed;
    m.input_tokens += r.prompt_tokens;
    m.output_tokens += r.completion_tokens;
    m.cached_tokens += r.cached_tokens;
    ttft.push_back(r.ttft());
    e2e.push_back(r.e2e());
    e2e_sum += r.e2e();
    // TPOT is undefined for a single output token (SGLang leaves such requests out too).
    if (r.completion_tokens > 1) tpot.push_back(r.tpot());
    for (size_t k = 1; k < r.chunk_times.size(); ++k)
      itl.push_back(r.chunk_times[k] - r.chunk_times[k - 1]);
    const bool good = (!slo.ttft_ms || 1e3 * r.ttft() <= *slo.ttft_ms) &&
                      (!slo.tpot_ms || 1e3 * r.tpot() <= *slo.tpot_ms) &&
                      (!slo.e2e_ms || 1e3 * r.e2e() <= *slo.e2e_ms);
    if (good) ++m.good_requests;
  }
  const double inv = duration_s > 0 ? 1.0 / duration_s : 0.0;
  m.request_throughput = static_cast<double>(m.completed) * inv;
  m.input_token_throughput = static_cast<double>(m.input_tokens) * inv;
  m.output_token_throughput = static_cast<double>(m.output_tokens) * inv;
  m.total_token_throughput = static_cast<double>(m.input_tokens + m.output_tokens) * inv;
  m.mean_concurrency = e2e_sum * inv;
  m.cache_hit_rate = m.input_tokens > 0 ? static_cast<double>(m.cached_tokens) /
                                              static_cast<double>(m.input_tokens)
                                        : 0.0;
  if (slo.any()) {
    m.goodput = static_cast<double>(m.good_requests) * inv;
  } else {
    m.good_requests = 0;
  }
  m.ttft = summarize_latencies(std::move(ttft));
  m.tpot = summarize_latencies(std::move(tpot));
  m.itl = summarize_latencies(std::move(itl));
  m.e2e = summarize_latencies(std::move(e2e));
  m.errors.assign(errors.begin(), errors.end());
  std::stable_sort(m.errors.begin(), m.errors.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return m;
}

std::string format_bench_metrics(const BenchMetrics& m) {
  std::string out;
  char line[160];
  auto row = [&](const char* name, double v, int decimals) {
    std::snprintf(line, sizeof line, "%-40s %12.*f\n", name, decimals, v);
    out += line;
  };
  auto header = [&](const char* title) {
    std::snprintf(line, sizeof line, "%s\n", title);
    out += line;
  };
  auto latency = [&](const char* title, const char* name, const LatencySummary& s) {
    std::snprintf(line, sizeof line, "%-53s\n", title);
    out += line;
    std::string n = name;
    row(("Mean " + n + " (ms):").c_str(), s.mean_ms, 2);
    row(("Median " + n + " (ms):").c_str(), s.median_ms, 2);
    row(("P99 " + n + " (ms):").c_str(), s.p99_ms, 2);
  };
  header("================= Serving Benchmark Result ==================");
  row("Successful requests:", static_cast<double>(m.completed), 0);
  row("Failed requests:", static_cast<double>(m.failed), 0);
  row("Benchmark duration (s):", m.duration_s, 2);
  row("Total input tokens:", static_cast<double>(m.input_tokens), 0);
  row("Total generated tokens:", static_cast<double>(m.output_tokens), 0);
  row("Request throughput (req/s):", m.request_throughput, 2);
  if (m.goodput) row("Request goodput (req/s):", *m.goodput, 2);
  row("Input token throughput (tok/s):", m.input_token_throughput, 2);
  row("Output token throughput (tok/s):", m.output_token_throughput, 2);
  row("Total token throughput (tok/s):", m.total_token_throughput, 2);
  row("Mean concurrency:", m.mean_concurrency, 2);
  row("Prefix cache hit rate (%):", 100.0 * m.cache_hit_rate, 2);
  latency("--------------- Time to First Token -----------------------", "TTFT", m.ttft);
  latency("--------------- Time per Output Token (excl. 1st token) ---", "TPOT", m.tpot);
  latency("--------------- Inter-token Latency -----------------------", "ITL", m.itl);
  latency("--------------- End-to-end Latency ------------------------", "E2E", m.e2e);
  header("=============================================================");
  for (const auto& [msg, n] : m.errors) {
    std::snprintf(line, sizeof line, "%6lld failed: ", static_cast<long long>(n));
    out += line;
    out += msg.substr(0, 300);
    out += '\n';
  }
  return out;
}

}  // namespace tessera::serve
