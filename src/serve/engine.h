// The serving engine: one thread owns the model, its KV cache and the prefix cache, and runs
// continuous batching (vLLM, SGLang): every step mixes one decode token of each running request
// with chunks of prompts being prefilled, up to a token budget. HTTP threads submit requests and
// read their tokens from a per-request channel.
//
// Scheduling: running requests first (decode, then the rest of their prefill); then waiting
// requests are admitted, longest cached prefix first (SGLang's LPM), except that requests waiting
// longer than `starvation_seconds` go first in arrival order, and LPM gives way to FCFS when the
// queue is long. A waiting request that shares more of its prompt with a request still being
// prefilled than with the cache waits for that prefill (it will then hit the cache). When the KV
// blocks run out, unlocked cache entries are evicted, then the newest running request is
// preempted: its blocks are freed and it is recomputed later (its sampled tokens are kept).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "llm/language_model.h"
#include "llm/sampler.h"
#include "serve/metrics.h"
#include "serve/prefix_cache.h"

namespace tessera::serve {

struct RequestParams {
  std::vector<int32_t> prompt;
  llm::SamplingParams sampling;
  int64_t max_tokens = 16;
  std::vector<std::string> stop;  // stop strings: the text ends before the first one found
  bool ignore_eos = false;        // generate max_tokens even past end-of-generation tokens
  int top_logprobs = -1;          // -1: no logprobs; n >= 0: each token's, and the n most likely
  uint64_t cache_namespace = 0;   // prefix-cache tenant (hash of cache_salt and API key)
};

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // the most likely tokens and their logprobs
};

// Timings and counts of a finished request (for metrics): metrics.h's FinishedRequest.
using RequestRecord = FinishedRequest;

// What a request's reader gets: text as it is produced, then one final event.
struct RequestEvent {
  std::string text;                    // new text (stop strings and what follows them removed)
  std::vector<TokenLogprob> logprobs;  // top_logprobs >= 0: one per token in token_ids
  std::vector<int32_t> token_ids;      // the tokens sampled since the previous event
  bool finished = false;
  std::string finish_reason;           // when finished: "stop", "length", "abort" or "error"
  std::string error;                   // finish_reason "error": why
  int64_t prompt_tokens = 0, cached_tokens = 0, completion_tokens = 0;  // when finished
};

// Between the engine thread (push) and the request's HTTP thread (next, cancel).
class RequestChannel {
 public:
  // The next event, waiting up to `timeout`; nullopt on timeout.
  std::optional<RequestEvent> next(std::chrono::milliseconds timeout);
  // The reader is gone: the engine drops the request and frees its blocks at its next iteration.
  void cancel();
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

 private:
  friend class Engine;
  void push(RequestEvent e);
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<RequestEvent> events_;
  std::atomic<bool> cancelled_{false};
  std::function<void()> wake_engine_;
};

struct EngineOptions {
  int64_t max_batch_tokens = 512;  // tokens per forward step, decode and prefill together
  int64_t chunk_size = 256;        // the longest prefill chunk of one request in a step
  int64_t max_running = 32;        // requests in the batch at once
  int64_t max_waiting = 256;       // queued requests; more are refused (HTTP 429)
  bool prefix_cache = true;
  double starvation_seconds = 10;  // a request waiting this long is admitted first
  int64_t lpm_queue_limit = 128;   // longer queues are ordered FCFS (LPM costs O(queue))
  // Checks after every step that each KV block is owned by exactly one of the free list, the
  // prefix cache and a running request (tests); a violation is kept in Stats::invariant_error.
  bool check_invariants = false;
  // Called on the engine thread when a request finishes, however it finishes.
  std::function<void(const RequestRecord&)> on_finish;
};

enum class Rejection { kNone, kInvalid, kQueueFull, kShuttingDown };

struct Submission {
  std::shared_ptr<RequestChannel> channel;  // null when rejected
  Rejection rejection = Rejection::kNone;
  std::string error;
};

class Engine {
 public:
  // The model must outlive the engine and must not be used by anyone else meanwhile. Channels
  // must not be cancelled after the engine is gone (stop the HTTP server first).
  Engine(llm::LanguageModel& model, EngineOptions opts);
  ~Engine();  // finishes every request ("abort") and stops the thread
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Validates and queues a request (thread-safe).
  Submission submit(RequestParams params);
  // Empties the prefix cache of everything not in use; returns the blocks freed (thread-safe,
  // waits for the engine thread).
  int64_t flush_prefix_cache();

  struct Stats {
    int64_t running = 0, waiting = 0;
    int64_t kv_blocks_total = 0, kv_blocks_in_use = 0, prefix_cached_blocks = 0;
    int64_t steps = 0, preemptions = 0;
    std::string invariant_error;  // check_invariants: the first violation seen
  };
  Stats stats() const;
  const llm::LanguageModel& model() const { return model_; }
  const EngineOptions& options() const { return opts_; }

 private:
  struct Request;
  struct BatchItem;
  void loop();
  void drop_cancelled();
  bool build_batch(std::vector<BatchItem>& batch);
  // Requests in running_ whose state is still kRunning (not finished or preempted this step).
  int64_t running_count() const;
  bool reserve_blocks(Request& r, int64_t length, bool may_preempt);
  void admit(Request& r);
  void release_blocks(Request& r);
  void preempt(Request& r);
  void run_step(std::vector<BatchItem>& batch);
  void append_token(Request& r, int32_t token, const float* logits);
  void cache_full_blocks(Request& r);
  void finish(Request& r, const std::string& reason, const std::string& error = "");
  void publish_stats();
  std::string check_block_ownership();

  llm::LanguageModel& model_;
  EngineOptions opts_;
  std::unique_ptr<PrefixCache> cache_;

  mutable std::mutex mu_;  // guards inbox_, the flush counters, stats_, stopping_, next_id_
  std::condition_variable wake_;
  std::deque<std::unique_ptr<Request>> inbox_;
  bool stopping_ = false;
  int64_t flush_requested_ = 0, flush_done_ = 0, flushed_blocks_ = 0;
  std::condition_variable flush_cv_;
  Stats stats_;

  // Engine-thread state.
  std::deque<std::unique_ptr<Request>> waiting_;
  std::vector<std::unique_ptr<Request>> running_;
  uint64_t next_id_ = 0;
  int64_t steps_ = 0, preemptions_ = 0;
  bool worked_since_trim_ = false;  // steps ran since the last release_free_memory
  std::string invariant_error_;
  std::thread thread_;
};

}  // namespace tessera::serve
