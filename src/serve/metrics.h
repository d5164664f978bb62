// Serving metrics in the Prometheus text exposition format (version 0.0.4), what `GET /metrics`
// returns.
//
// MetricRegistry holds metric families (one name, help text and type each) and their series (one
// set of label values each). Counter, Gauge and Histogram are the series. ServeMetrics is the set
// tessera serve exports, named like vLLM's (`vllm:` there, `tessera:` here), every series labelled
// with model_name, so dashboards built for vLLM need only the prefix changed.
//
// Thread safety: everything here may be used from any thread at once (the HTTP threads and the
// engine thread update the same metrics while a scrape renders them). Each series has its own
// mutex; the registry's mutex guards its list of families. References returned by the registry
// stay valid as long as the registry lives.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessera::serve {

// Label name/value pairs, in the order they are rendered.
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

// A value that only goes up (requests, tokens).
class Counter {
 public:
  // Adds v; a negative or NaN v is ignored (a counter never goes down).
  void add(double v = 1);
  double value() const;

 private:
  mutable std::mutex mu_;
  double value_ = 0;
};

// A value that goes up and down (requests running, blocks in use).
class Gauge {
 public:
  void set(double v);
  void add(double v);
  double value() const;

 private:
  mutable std::mutex mu_;
  double value_ = 0;
};

// Observations counted into buckets by upper bound (le: an observation equal to a bound counts in
// that bucket), with their sum and count.
class Histogram {
 public:
  // upper_bounds: finite and strictly increasing (checked); the +Inf bucket is implicit.
  explicit Histogram(std::vector<double> upper_bounds);
  // A NaN observation is ignored.
  void observe(double v);

  struct Snapshot {
    std::vector<double> upper_bounds;
    std::vector<uint64_t> cumulative;  // cumulative[i]: observations <= upper_bounds[i]; one more
                                       // entry at the end for +Inf (== count)
    double sum = 0;
    uint64_t count = 0;
  };
  // A consistent view (buckets, sum and count from the same moment).
  Snapshot snapshot() const;

 private:
  const std::vector<double> upper_bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> buckets_;  // per bucket, not cumulative; the last one is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class MetricRegistry {
 public:
  MetricRegistry();
  ~MetricRegistry();
  MetricRegistry(const MetricRegistry&) = delete;
  MetricRegistry& operator=(const MetricRegistry&) = delete;

  // The series of family `name` with these labels, created (with the family, whose help is then
  // `help`) if new. Names are checked (an internal invariant: they are constants in the code):
  // metric names [a-zA-Z_:][a-zA-Z0-9_:]*, label names [a-zA-Z_][a-zA-Z0-9_]*, a name used with one
  // type only, "le" reserved for histogram buckets. Label values may be any text (escaped).
  Counter& counter(std::string_view name, std::string_view help, const MetricLabels& labels = {});
  Gauge& gauge(std::string_view name, std::string_view help, const MetricLabels& labels = {});
  // A series created earlier keeps its own bounds.
  Histogram& histogram(std::string_view name, std::string_view help,
                       const std::vector<double>& upper_bounds, const MetricLabels& labels = {});

  // Every family in the order of creation: "# HELP", "# TYPE", then one line per series
  // (histograms: _bucket{...,le="..."} cumulative with le="+Inf" last, _sum, _count).
  std::string render() const;

 private:
  struct Family;
  Family& family(std::string_view name, std::string_view help, int type);

  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Family>> families_;
};

// Bucket upper bounds for latencies in seconds, 1 ms to 60 s.
const std::vector<double>& latency_buckets_seconds();

// One finished request, as the engine reports it.
struct FinishedRequest {
  std::string finish_reason;  // "stop", "length", "abort" or "error"
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens found in the prefix cache
  double queue_seconds = -1;  // arrival to first scheduled; < 0: never scheduled (not observed)
  double ttft_seconds = -1;   // arrival to first token; < 0: no token (not observed)
  double e2e_seconds = 0;     // arrival to finish
  std::vector<double> inter_token_seconds;  // between consecutive output tokens
};

// The metrics of `tessera serve`. The members are public for updates this class has no helper for.
class ServeMetrics {
 public:
  explicit ServeMetrics(std::string model_name);

  // The latency histograms, the token counters and request_success_total{finished_reason}.
  void record_finished(const FinishedRequest& r);
  void set_requests(int64_t running, int64_t waiting);
  // Sets kv_cache_blocks_in_use, kv_cache_blocks_total and kv_cache_usage_perc (a fraction in
  // [0, 1], as vLLM's despite the name; 0 when total is 0).
  void set_kv_cache_blocks(int64_t in_use, int64_t total);
  // One prefix-cache lookup: `queried` prompt tokens looked up, `hit` of them found cached.
  void record_prefix_lookup(int64_t queried, int64_t hit);
  // A request answered with an HTTP error status (400, 404, 429, 503, ...): request_errors_total.
  void record_error_response(int http_status);

  std::string render() const { return registry_.render(); }
  const std::string& model_name() const { return model_name_; }

 private:
  const std::string model_name_;
  MetricRegistry registry_;

 public:
  Histogram& time_to_first_token;
  Histogram& inter_token_latency;
  Histogram& e2e_request_latency;
  Histogram& request_queue_time;
  Gauge& num_requests_running;
  Gauge& num_requests_waiting;
  Gauge& kv_cache_blocks_in_use;
  Gauge& kv_cache_blocks_total;
  Gauge& kv_cache_usage_perc;
  Counter& prefix_cache_queries;
  Counter& prefix_cache_hits;
  Counter& prompt_tokens;
  Counter& generation_tokens;
  Counter& num_preemptions;

 private:
  Counter& success_counter(std::string_view finish_reason);
  Counter& error_counter(int http_status);
};

}  // namespace tessera::serve
