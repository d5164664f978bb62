#include "serve/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "ir/status.h"

namespace tessera::serve {
namespace {

enum FamilyType { kCounterType, kGaugeType, kHistogramType };

const char* type_name(int type) {
  switch (type) {
    case kCounterType: return "counter";
    case kGaugeType: return "gauge";
    default: return "histogram";
  }
}

bool valid_name(std::string_view s, bool allow_colon) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                    (allow_colon && c == ':') || (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

// Prometheus floats: the shortest text that reads back as the same double; +Inf, -Inf, NaN.
std::string format_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[32];
  const auto res = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, res.ptr);
}

void append_escaped(std::string& out, std::string_view s, bool escape_quote) {
  for (const char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && escape_quote) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
}

// {a="x",b="y"} with an optional extra le label; "" when there are no labels at all.
std::string format_labels(const MetricLabels& labels, const std::string* le = nullptr) {
  if (labels.empty() && le == nullptr) return "";
  std::string out = "{";
  for (const auto& [name, value] : labels) {
    if (out.size() > 1) out += ',';
    out += name;
    out += "=\"";
    append_escaped(out, value, /*escape_quote=*/true);
    out += '"';
  }
  if (le != nullptr) {
    if (out.size() > 1) out += ',';
    out += "le=\"" + *le + "\"";
  }
  out += '}';
  return out;
}

}  // namespace

// --- series ----------------------------------------------------------------------------------

void Counter::add(double v) {
  if (!(v >= 0)) return;  // negative or NaN
  std::lock_guard<std::mutex> lock(mu_);
  value_ += v;
}

double Counter::value() const {
  std::lock_guard<std::mutex> lock(mu_);
  return value_;
}

void Gauge::set(double v) {
  std::lock_guard<std::mutex> lock(mu_);
  value_ = v;
}

void Gauge::add(double v) {
  std::lock_guard<std::mutex> lock(mu_);
  value_ += v;
}

double Gauge::value() const {
  std::lock_guard<std::mutex> lock(mu_);
  return value_;
}

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)), buckets_(upper_bounds_.size() + 1, 0) {
  for (size_t i = 0; i < upper_bounds_.size(); ++i) {
    TESSERA_CHECK(std::isfinite(upper_bounds_[i]), "histogram bounds must be finite");
    TESSERA_CHECK(i == 0 || upper_bounds_[i - 1] < upper_bounds_[i],
                  "histogram bounds must be strictly increasing");
  }
}

void Histogram::observe(double v) {
  if (std::isnan(v)) return;
  // The first bound >= v: le is inclusive.
  const size_t bucket = static_cast<size_t>(
      std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), v) - upper_bounds_.begin());
  std::lock_guard<std::mutex> lock(mu_);
  ++buckets_[bucket];
  sum_ += v;
  ++count_;
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  s.upper_bounds = upper_bounds_;
  std::lock_guard<std::mutex> lock(mu_);
  s.cumulative.resize(buckets_.size());
  uint64_t running = 0;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    running += buckets_[i];
    s.cumulative[i] = running;
  }
  s.sum = sum_;
  s.count = count_;
  return s;
}

// --- registry --------------------------------------------------------------------------------

struct MetricRegistry::Family {
  struct Series {
    MetricLabels labels;
    std::unique_ptr<Counter> counter;
    std::unique_ptr<Gauge> gauge;
    std::unique_ptr<Histogram> histogram;
  };
  std::string name;
  std::string help;
  int type = kCounterType;
  std::vector<Series> series;  // in order of creation

  Series* find(const MetricLabels& labels) {
    for (Series& s : series) {
      if (s.labels == labels) return &s;
    }
    return nullptr;
  }
};

MetricRegistry::MetricRegistry() = default;
MetricRegistry::~MetricRegistry() = default;

MetricRegistry::Family& MetricRegistry::family(std::string_view name, std::string_view help,
                                               int type) {
  for (const auto& f : families_) {
    if (f->name == name) {
      TESSERA_CHECK(f->type == type, "metric registered with two types");
      return *f;
    }
  }
  TESSERA_CHECK(valid_name(name, /*allow_colon=*/true), "invalid metric name");
  auto f = std::make_unique<Family>();
  f->name = std::string(name);
  f->help = std::string(help);
  f->type = type;
  families_.push_back(std::move(f));
  return *families_.back();
}

namespace {
void check_labels(const MetricLabels& labels) {
  for (const auto& [name, value] : labels) {
    TESSERA_CHECK(valid_name(name, /*allow_colon=*/false), "invalid label name");
    TESSERA_CHECK(name != "le", "the label le is reserved for histogram buckets");
  }
}
}  // namespace

Counter& MetricRegistry::counter(std::string_view name, std::string_view help,
                                 const MetricLabels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  Family& f = family(name, help, kCounterType);
  if (Family::Series* s = f.find(labels)) return *s->counter;
  check_labels(labels);
  f.series.push_back({labels, std::make_unique<Counter>(), nullptr, nullptr});
  return *f.series.back().counter;
}

Gauge& MetricRegistry::gauge(std::string_view name, std::string_view help,
                             const MetricLabels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  Family& f = family(name, help, kGaugeType);
  if (Family::Series* s = f.find(labels)) return *s->gauge;
  check_labels(labels);
  f.series.push_back({labels, nullptr, std::make_unique<Gauge>(), nullptr});
  return *f.series.back().gauge;
}

Histogram& MetricRegistry::histogram(std::string_view name, std::string_view help,
                                     const std::vector<double>& upper_bounds,
                                     const MetricLabels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  Family& f = family(name, help, kHistogramType);
  if (Family::Series* s = f.find(labels)) return *s->histogram;
  check_labels(labels);
  f.series.push_back({labels, nullptr, nullptr, std::make_unique<Histogram>(upper_bounds)});
  return *f.series.back().histogram;
}

std::string MetricRegistry::render() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (const auto& f : families_) {
    out += "# HELP " + f->name + " ";
    append_escaped(out, f->help, /*escape_quote=*/false);
    out += "\n# TYPE " + f->name + " " + type_name(f->type) + "\n";
    for (const Family::Series& s : f->series) {
      if (s.counter) {
        out += f->name + format_labels(s.labels) + " " + format_value(s.counter->value()) + "\n";
      } else if (s.gauge) {
        out += f->name + format_labels(s.labels) + " " + format_value(s.gauge->value()) + "\n";
      } else {
        const Histogram::Snapshot snap = s.histogram->snapshot();
        for (size_t i = 0; i < snap.cumulative.size(); ++i) {
          const std::string le =
              i < snap.upper_bounds.size() ? format_value(snap.upper_bounds[i]) : "+Inf";
          out += f->name + "_bucket" + format_labels(s.labels, &le) + " " +
                 std::to_string(snap.cumulative[i]) + "\n";
        }
        const std::string labels = format_labels(s.labels);
        out += f->name + "_sum" + labels + " " + format_value(snap.sum) + "\n";
        out += f->name + "_count" + labels + " " + std::to_string(snap.count) + "\n";
      }
    }
  }
  return out;
}

// --- the serving metrics -----------------------------------------------------------------------

const std::vector<double>& latency_buckets_seconds() {
  static const std::vector<double> kBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075,
                                              0.1,   0.15,   0.2,   0.3,  0.5,   0.75, 1.0,
                                              2.5,   5.0,    7.5,   10.0, 20.0,  30.0, 60.0};
  return kBounds;
}

namespace {
// The HTTP error statuses of the API contract, rendered (as 0) before any happens.
constexpr int kErrorStatuses[] = {400, 401, 404, 413, 429, 500, 503};
constexpr const char* kFinishReasons[] = {"stop", "length", "abort", "error"};
}  // namespace

ServeMetrics::ServeMetrics(std::string model_name)
    : model_name_(std::move(model_name)),
      time_to_first_token(registry_.histogram(
          "tessera:time_to_first_token_seconds",
          "Time from a request's arrival to its first output token, in seconds.",
          latency_buckets_seconds(), {{"model_name", model_name_}})),
      inter_token_latency(
          registry_.histogram("tessera:inter_token_latency_seconds",
                              "Time between consecutive output tokens of a request, in seconds.",
                              latency_buckets_seconds(), {{"model_name", model_name_}})),
      e2e_request_latency(
          registry_.histogram("tessera:e2e_request_latency_seconds",
                              "Time from a request's arrival to its end, in seconds.",
                              latency_buckets_seconds(), {{"model_name", model_name_}})),
      request_queue_time(
          registry_.histogram("tessera:request_queue_time_seconds",
                              "Time a request waited before it was first scheduled, in seconds.",
                              latency_buckets_seconds(), {{"model_name", model_name_}})),
      num_requests_running(registry_.gauge("tessera:num_requests_running",
                                           "Requests being prefilled or decoded.",
                                           {{"model_name", model_name_}})),
      num_requests_waiting(registry_.gauge("tessera:num_requests_waiting",
                                           "Requests waiting to be scheduled.",
                                           {{"model_name", model_name_}})),
      kv_cache_blocks_in_use(registry_.gauge("tessera:kv_cache_blocks_in_use",
                                             "KV cache blocks in use (requests and prefix cache).",
                                             {{"model_name", model_name_}})),
      kv_cache_blocks_total(registry_.gauge("tessera:kv_cache_blocks_total",
                                            "KV cache blocks in all.",
                                            {{"model_name", model_name_}})),
      kv_cache_usage_perc(registry_.gauge("tessera:kv_cache_usage_perc",
                                          "Fraction of the KV cache blocks in use (1 = full).",
                                          {{"model_name", model_name_}})),
      prefix_cache_queries(registry_.counter("tessera:prefix_cache_queries_total",
                                             "Prompt tokens looked up in the prefix cache.",
                                             {{"model_name", model_name_}})),
      prefix_cache_hits(registry_.counter("tessera:prefix_cache_hits_total",
                                          "Prompt tokens found in the prefix cache.",
                                          {{"model_name", model_name_}})),
      prompt_tokens(registry_.counter("tessera:prompt_tokens_total",
                                      "Prompt tokens of finished requests.",
                                      {{"model_name", model_name_}})),
      generation_tokens(registry_.counter("tessera:generation_tokens_total",
                                          "Tokens generated for finished requests.",
                                          {{"model_name", model_name_}})),
      num_preemptions(registry_.counter("tessera:num_preemptions_total",
                                        "Running requests preempted (KV blocks freed, recomputed "
                                        "later) because the KV cache was full.",
                                        {{"model_name", model_name_}})) {
  for (const char* reason : kFinishReasons) success_counter(reason);
  for (const int status : kErrorStatuses) error_counter(status);
}

Counter& ServeMetrics::success_counter(std::string_view finish_reason) {
  return registry_.counter(
      "tessera:request_success_total",
      "Requests finished, by finish reason (stop, length, abort, error).",
      {{"model_name", model_name_}, {"finished_reason", std::string(finish_reason)}});
}

void ServeMetrics::record_finished(const FinishedRequest& r) {
  success_counter(r.finish_reason).add(1);
  prompt_tokens.add(static_cast<double>(r.prompt_tokens));
  generation_tokens.add(static_cast<double>(r.completion_tokens));
  if (r.queue_seconds >= 0) request_queue_time.observe(r.queue_seconds);
  if (r.ttft_seconds >= 0) time_to_first_token.observe(r.ttft_seconds);
  e2e_request_latency.observe(r.e2e_seconds);
  for (const double s : r.inter_token_seconds) inter_token_latency.observe(s);
}

void ServeMetrics::set_requests(int64_t running, int64_t waiting) {
  num_requests_running.set(static_cast<double>(running));
  num_requests_waiting.set(static_cast<double>(waiting));
}

void ServeMetrics::set_kv_cache_blocks(int64_t in_use, int64_t total) {
  kv_cache_blocks_in_use.set(static_cast<double>(in_use));
  kv_cache_blocks_total.set(static_cast<double>(total));
  kv_cache_usage_perc.set(total > 0 ? static_cast<double>(in_use) / static_cast<double>(total) : 0);
}

void ServeMetrics::record_prefix_lookup(int64_t queried, int64_t hit) {
  prefix_cache_queries.add(static_cast<double>(queried));
  prefix_cache_hits.add(static_cast<double>(hit));
}

Counter& ServeMetrics::error_counter(int http_status) {
  return registry_.counter("tessera:request_errors_total",
                           "Requests answered with an HTTP error status, by status.",
                           {{"model_name", model_name_}, {"status", std::to_string(http_status)}});
}

void ServeMetrics::record_error_response(int http_status) { error_counter(http_status).add(1); }

}  // namespace tessera::serve
