// The client behind `tessera bench-serve`: a load generator for an OpenAI-compatible server, in the
// manner of SGLang's bench_serving and vLLM's benchmark_serving.
//
// Three phases, each usable on its own (the tests drive them separately):
//   1. a workload: seeded synthetic requests (random token ids, groups sharing a prefix, or
//      multi-turn chats of random words);
//   2. a run: the requests are sent, streamed (SSE) and timed, at Poisson arrival times and/or
//      under a concurrency limit; every request leaves one BenchRequestRecord;
//   3. metrics: throughput, TTFT / TPOT / ITL / end-to-end latency distributions, prefix-cache hit
//      rate and goodput under SLOs, computed from the records alone.
//
// Errors: a bad option or URL is a Status; a request that fails (connection refused, HTTP 4xx/5xx,
// an error event in the stream) is not: it is a record with success == false and the reason.
// Thread safety: every function here may be called from any thread; run_bench itself starts one
// thread per in-flight request and joins them all before it returns.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/status.h"

namespace tessera::serve {

// ---- workloads ---------------------------------------------------------------------------------

// One turn of a multi-turn chat: the new user message and the tokens asked for in reply.
struct BenchChatTurn {
  std::string user_message;
  int64_t output_len = 0;
};

// One unit of work. A completion job is one /v1/completions request with a token-id prompt; a
// chat job (turns non-empty) is a conversation whose turns go to /v1/chat/completions one after
// another, each carrying the replies actually received.
struct BenchJob {
  std::vector<int32_t> prompt_ids;  // completion job: the prompt
  int64_t output_len = 0;           // completion job: max_tokens
  int64_t group = -1;  // generated-shared-prefix: the group whose prefix it starts with
  std::vector<BenchChatTurn> turns;  // chat job: the conversation

  bool is_chat() const { return !turns.empty(); }
  int64_t num_requests() const { return is_chat() ? static_cast<int64_t>(turns.size()) : 1; }
};

struct BenchWorkload {
  std::string dataset;  // "random", "generated-shared-prefix" or "multi-turn"
  std::vector<BenchJob> jobs;

  int64_t num_requests() const;
};

// Token ids are drawn uniformly from [lo, hi).
struct TokenIdRange {
  int64_t lo = 0;
  int64_t hi = 256;
};

// Lengths are drawn uniformly from [len * (1 - range_ratio), len] (SGLang's --random-range-ratio):
// 0 gives exactly len, 1 anything from 1 to len. Never below 1.
struct RandomDatasetOptions {
  int64_t num_prompts = 1000;
  int64_t input_len = 1024;
  int64_t output_len = 128;
  double range_ratio = 0.0;
  TokenIdRange vocab;
  uint64_t seed = 1;
};
Result<BenchWorkload> make_random_workload(const RandomDatasetOptions& o);

// num_groups × prompts_per_group prompts; group g's prompts all start with the same random
// system_prompt_len tokens (different for every group), followed by a random question of
// question_len tokens of their own.
struct SharedPrefixDatasetOptions {
  int64_t num_groups = 64;
  int64_t prompts_per_group = 16;
  int64_t system_prompt_len = 2048;
  int64_t question_len = 128;
  int64_t output_len = 256;
  bool shuffle = true;  // false: all of group 0, then group 1, ...
  TokenIdRange vocab;
  uint64_t seed = 1;
};
Result<BenchWorkload> make_shared_prefix_workload(const SharedPrefixDatasetOptions& o);

// num_conversations × num_turns; each user message is words_per_turn random English words and each
// reply asks for output_len tokens, both drawn with range_ratio as in the random dataset.
struct MultiTurnDatasetOptions {
  int64_t num_conversations = 100;
  int64_t num_turns = 4;
  int64_t words_per_turn = 64;
  int64_t output_len = 128;
  double range_ratio = 0.0;
  uint64_t seed = 1;
};
Result<BenchWorkload> make_multi_turn_workload(const MultiTurnDatasetOptions& o);

// Arrival times in seconds from the start for n jobs: the first at 0, then exponential gaps of mean
// 1/rate (a Poisson process); rate = infinity (or <= 0) puts them all at 0.
std::vector<double> poisson_arrival_times(size_t n, double rate, uint64_t seed);

// ---- the run -----------------------------------------------------------------------------------

// Where to send: "http://host:port" with an optional path prefix ("http://h:8000/api").
struct BenchTarget {
  std::string base_url = "http://127.0.0.1:8080";
  std::string model;
  double timeout_s = 600;  // connect timeout, and the longest wait for the next bytes of a stream
};

struct BenchRunOptions {
  double request_rate = std::numeric_limits<double>::infinity();  // jobs per second
  int64_t max_concurrency = 0;  // most requests in flight; 0 = no limit
  double temperature = 0.0;
  bool ignore_eos = true;
  uint64_t seed = 1;  // of the arrival process
  // Called after every finished request (from the request's thread, one call at a time).
  std::function<void(int64_t done, int64_t total, int64_t failed)> on_progress;
};

// What one request did. Times are seconds since the run started.
struct BenchRequestRecord {
  int64_t job = 0;   // index into BenchWorkload::jobs
  int64_t turn = 0;  // chat jobs: the turn; completion jobs: 0
  bool success = false;
  int http_status = 0;  // 0 when no response arrived
  std::string error;    // why it failed
  double send_time = 0;
  double end_time = 0;
  std::vector<double> chunk_times;  // arrival of each chunk with non-empty text
  int64_t prompt_tokens = 0;        // from usage; for completion jobs the prompt length when absent
  int64_t completion_tokens = 0;    // from usage; the number of text chunks when absent
  int64_t cached_tokens = 0;        // usage.prompt_tokens_details.cached_tokens
  bool usage_reported = false;
  std::string text;  // the generated text (chat replies feed the next turn)

  double ttft() const { return chunk_times.empty() ? e2e() : chunk_times.front() - send_time; }
  double e2e() const { return end_time - send_time; }
  // Time per output token after the first; 0 with fewer than two tokens.
  double tpot() const;
};

struct BenchRunResult {
  std::vector<BenchRequestRecord> records;  // one per request of the workload, in workload order
  double duration_s = 0;                    // from the first send to the last completion
};

// Sends the whole workload and waits for every answer. Fails only on a malformed target.
Result<BenchRunResult> run_bench(const BenchTarget& target, const BenchWorkload& workload,
                                 const BenchRunOptions& options);

// Splits a text/event-stream body, fed in pieces as they arrive, into events: each complete event's
// data (its `data:` lines joined by '\n') goes to on_data. Comments and other fields are skipped.
class SseEventParser {
 public:
  void feed(std::string_view bytes, const std::function<void(std::string_view data)>& on_data);

 private:
  std::string line_;  // the unfinished line
  std::string data_;  // the data of the unfinished event
  bool has_data_ = false;
};

// ---- talking to the server outside the run ------------------------------------------------------

struct ServerModelInfo {
  std::string id;
  int64_t vocab_size = 0;     // 0 when the server does not say
  int64_t max_model_len = 0;  // 0 when the server does not say
};
// GET /v1/models: the first model. The error names the URL when the server cannot be reached.
Result<ServerModelInfo> query_first_model(const std::string& base_url, double timeout_s);
// POST /flush_cache.
Status flush_server_cache(const std::string& base_url, double timeout_s);

// ---- metrics -----------------------------------------------------------------------------------

// The p-th percentile (0..100) of sorted values, by linear interpolation between closest ranks
// (numpy's default). 0 for an empty vector.
double sorted_percentile(const std::vector<double>& sorted, double p);

// A latency distribution in milliseconds.
struct LatencySummary {
  int64_t count = 0;
  double mean_ms = 0, median_ms = 0, p90_ms = 0, p99_ms = 0, std_ms = 0, max_ms = 0;
};
// From samples in seconds; the standard deviation is the population one.
LatencySummary summarize_latencies(std::vector<double> seconds);

// Requests count towards goodput when they succeeded and met every SLO that is set.
struct BenchSlo {
  std::optional<double> ttft_ms, tpot_ms, e2e_ms;
  bool any() const { return ttft_ms || tpot_ms || e2e_ms; }
};

struct BenchMetrics {
  int64_t completed = 0, failed = 0;
  double duration_s = 0;
  int64_t input_tokens = 0, output_tokens = 0, cached_tokens = 0;
  double request_throughput = 0;       // completed requests / s
  double input_token_throughput = 0;   // prompt tokens of completed requests / s
  double output_token_throughput = 0;  // completion tokens / s
  double total_token_throughput = 0;
  double mean_concurrency = 0;  // sum of end-to-end latencies / duration
  double cache_hit_rate = 0;    // cached_tokens / input_tokens
  LatencySummary ttft, tpot, itl, e2e;
  std::optional<double> goodput;  // requests / s that met every SLO; set when an SLO is
  int64_t good_requests = 0;
  // Distinct error messages of the failed requests with how often each occurred, most common first.
  std::vector<std::pair<std::string, int64_t>> errors;
};

BenchMetrics compute_bench_metrics(const std::vector<BenchRequestRecord>& records,
                                   double duration_s, const BenchSlo& slo);

// A short human-readable table of the metrics.
std::string format_bench_metrics(const BenchMetrics& m);

}  // namespace tessera::serve
