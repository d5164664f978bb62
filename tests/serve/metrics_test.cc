#include "serve/metrics.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

namespace tessera::serve {
namespace {

// One sample line of the exposition format, parsed.
struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;  // values unescaped
  std::string value;                          // as written
};

// Parses Prometheus text (format 0.0.4) strictly: every line is "# HELP name text",
// "# TYPE name type" or `name{label="value",...} value`; each family's HELP and TYPE come once,
// before its samples; a sample belongs to the family of the latest TYPE (histograms: name_bucket,
// name_sum, name_count). Failures are reported through gtest.
std::vector<Sample> parse_exposition(const std::string& text) {
  static const std::regex kComment(R"(# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*))");
  static const std::regex kSample(
      R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\[\\"n])*")(,[a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\[\\"n])*")*\})? ([-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?|[-+]Inf|NaN))");
  static const std::regex kLabel(R"(([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)\")");
  std::vector<Sample> samples;
  std::set<std::string> helped, typed;
  std::string family, type;
  EXPECT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n') << "the last line ends with a newline";
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    std::smatch m;
    if (std::regex_match(line, m, kComment)) {
      const std::string name = m[2];
      if (m[1] == "HELP") {
        EXPECT_TRUE(helped.insert(name).second) << "second HELP for " << name;
      } else {
        EXPECT_TRUE(helped.count(name)) << "TYPE before HELP for " << name;
        EXPECT_TRUE(typed.insert(name).second) << "second TYPE for " << name;
        type = m[3];
        EXPECT_TRUE(type == "counter" || type == "gauge" || type == "histogram") << line;
        family = name;
      }
      continue;
    }
    if (!std::regex_match(line, m, kSample)) {
      ADD_FAILURE() << "line " << n << " is not valid: '" << line << "'";
      continue;
    }
    Sample s;
    s.name = m[1];
    s.value = m[7];
    const std::string labels = m[2];
    for (auto it = std::sregex_iterator(labels.begin(), labels.end(), kLabel);
         it != std::sregex_iterator(); ++it) {
      std::string v, raw = (*it)[2];
      for (size_t i = 0; i < raw.size(); ++i) {
        if (raw[i] == '\\' && i + 1 < raw.size()) {
          ++i;
          v += raw[i] == 'n' ? '\n' : raw[i];
        } else {
          v += raw[i];
        }
      }
      EXPECT_TRUE(s.labels.emplace((*it)[1], v).second) << "label repeated: " << line;
    }
    const bool ok = s.name == family || (type == "histogram" && (s.name == family + "_bucket" ||
                                                                 s.name == family + "_sum" ||
                                                                 s.name == family + "_count"));
    EXPECT_TRUE(ok) << "sample " << s.name << " outside its family " << family;
    EXPECT_EQ(type == "histogram" && s.name == family + "_bucket", s.labels.count("le") == 1)
        << line;
    samples.push_back(std::move(s));
  }
  return samples;
}

// The value of the one sample with this name and these labels (as a subset), or "" if none.
std::string value_of(const std::vector<Sample>& samples, const std::string& name,
                     const std::map<std::string, std::string>& labels = {}) {
  std::string found;
  int matches = 0;
  for (const Sample& s : samples) {
    if (s.name != name) continue;
    bool all = true;
    for (const auto& [k, v] : labels) {
      auto it = s.labels.find(k);
      all = all && it != s.labels.end() && it->second == v;
    }
    if (all) {
      found = s.value;
      ++matches;
    }
  }
  EXPECT_LE(matches, 1) << name << " matches several samples";
  return found;
}

TEST(PromMetrics, HistogramBucketsAreCumulativeAndLeIsInclusive) {
  Histogram h({0.1, 0.5, 1.0});
  for (double v : {0.05, 0.1, 0.1000001, 0.5, 1.0, 2.0, -3.0}) h.observe(v);
  h.observe(std::nan(""));  // ignored
  const Histogram::Snapshot s = h.snapshot();
  // le=0.1: -3, 0.05, 0.1; le=0.5: + 0.1000001, 0.5; le=1: + 1.0; +Inf: + 2.0.
  EXPECT_EQ(s.cumulative, (std::vector<uint64_t>{3, 5, 6, 7}));
  EXPECT_EQ(s.count, 7u);
  EXPECT_DOUBLE_EQ(s.sum, 0.05 + 0.1 + 0.1000001 + 0.5 + 1.0 + 2.0 - 3.0);
}

TEST(PromMetrics, RendersTheExactText) {
  MetricRegistry r;
  r.counter("demo_requests_total", "Requests.", {{"code", "200"}}).add(3);
  r.counter("demo_requests_total", "ignored: the family has its help", {{"code", "404"}}).add();
  r.gauge("demo_temperature", "Degrees.\nSecond line \\ here.").set(-2.5);
  Histogram& h = r.histogram("demo_latency_seconds", "Latency.", {0.001, 0.25}, {{"m", "x"}});
  h.observe(0.001);
  h.observe(0.2);
  h.observe(3);
  EXPECT_EQ(r.render(),
            "# HELP demo_requests_total Requests.\n"
            "# TYPE demo_requests_total counter\n"
            "demo_requests_total{code=\"200\"} 3\n"
            "demo_requests_total{code=\"404\"} 1\n"
            "# HELP demo_temperature Degrees.\\nSecond line \\\\ here.\n"
            "# TYPE demo_temperature gauge\n"
            "demo_temperature -2.5\n"
            "# HELP demo_latency_seconds Latency.\n"
            "# TYPE demo_latency_seconds histogram\n"
            "demo_latency_seconds_bucket{m=\"x\",le=\"0.001\"} 1\n"
            "demo_latency_seconds_bucket{m=\"x\",le=\"0.25\"} 2\n"
            "demo_latency_seconds_bucket{m=\"x\",le=\"+Inf\"} 3\n"
            "demo_latency_seconds_sum{m=\"x\"} 3.201\n"
            "demo_latency_seconds_count{m=\"x\"} 3\n");
}

TEST(PromMetrics, SameNameAndLabelsIsTheSameSeries) {
  MetricRegistry r;
  Counter& a = r.counter("c_total", "C.", {{"k", "v"}});
  Counter& b = r.counter("c_total", "C.", {{"k", "v"}});
  Counter& other = r.counter("c_total", "C.", {{"k", "w"}});
  EXPECT_EQ(&a, &b);
  EXPECT_NE(&a, &other);
  a.add(2);
  b.add(0.5);
  a.add(-10);  // a counter never goes down
  EXPECT_DOUBLE_EQ(a.value(), 2.5);
  EXPECT_DOUBLE_EQ(other.value(), 0);
}

TEST(PromMetrics, LabelValuesAreEscapedAndParseBack) {
  MetricRegistry r;
  const std::string nasty = "a\"b\\c\nd,e=}f";
  r.counter("esc_total", "Escapes.", {{"v", nasty}, {"w", ""}}).add(1);
  const std::string text = r.render();
  EXPECT_NE(text.find("esc_total{v=\"a\\\"b\\\\c\\nd,e=}f\",w=\"\"} 1\n"), std::string::npos)
      << text;
  const std::vector<Sample> samples = parse_exposition(text);
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0].labels.at("v"), nasty);
  EXPECT_EQ(samples[0].labels.at("w"), "");
}

TEST(PromMetrics, ValuesUseTheShortestExactText) {
  MetricRegistry r;
  Gauge& g = r.gauge("g", "G.");
  auto rendered = [&](double v) {
    g.set(v);
    const std::string text = r.render();
    const std::string line = text.substr(text.rfind("\ng ") + 3);
    return line.substr(0, line.size() - 1);
  };
  EXPECT_EQ(rendered(0), "0");
  EXPECT_EQ(rendered(42), "42");
  EXPECT_EQ(rendered(0.1), "0.1");
  EXPECT_EQ(rendered(1e21), "1e+21");
  EXPECT_EQ(rendered(1.0 / 3), "0.3333333333333333");
  EXPECT_EQ(rendered(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(rendered(std::nan("")), "NaN");
  g.set(5);
  g.add(-7.5);
  EXPECT_DOUBLE_EQ(g.value(), -2.5);
}

TEST(PromMetrics, LatencyBucketsSpan1msTo60s) {
  const std::vector<double>& b = latency_buckets_seconds();
  ASSERT_GE(b.size(), 10u);
  EXPECT_DOUBLE_EQ(b.front(), 0.001);
  EXPECT_DOUBLE_EQ(b.back(), 60.0);
  for (size_t i = 1; i < b.size(); ++i) EXPECT_LT(b[i - 1], b[i]);
}

TEST(ServeMetrics, EveryLineIsValidAndEverySeriesHasTheModelName) {
  ServeMetrics m("tiny \"llama\"");
  m.record_finished({"stop", 12, 5, 0, 0.002, 0.03, 0.4, {0.01, 0.02, 0.1, 0.2}});
  m.record_error_response(400);
  const std::string text = m.render();
  const std::vector<Sample> samples = parse_exposition(text);
  ASSERT_FALSE(samples.empty());
  for (const Sample& s : samples) {
    auto it = s.labels.find("model_name");
    ASSERT_NE(it, s.labels.end()) << s.name;
    EXPECT_EQ(it->second, "tiny \"llama\"");
  }
  for (const char* family : {"time_to_first_token_seconds", "inter_token_latency_seconds",
                             "e2e_request_latency_seconds", "request_queue_time_seconds"}) {
    const std::string name = std::string("tessera:") + family;
    EXPECT_NE(text.find("# TYPE " + name + " histogram\n"), std::string::npos) << name;
    EXPECT_EQ(value_of(samples, name + "_bucket", {{"le", "0.001"}}), "0") << name;
    EXPECT_EQ(value_of(samples, name + "_bucket", {{"le", "60"}}),
              name == "tessera:inter_token_latency_seconds" ? "4" : "1");
  }
  for (const char* family :
       {"num_requests_running", "num_requests_waiting", "kv_cache_blocks_in_use",
        "kv_cache_blocks_total", "kv_cache_usage_perc"}) {
    const std::string name = std::string("tessera:") + family;
    EXPECT_NE(text.find("# TYPE " + name + " gauge\n"), std::string::npos) << name;
    EXPECT_EQ(value_of(samples, name), "0") << name;
  }
  for (const char* family :
       {"prefix_cache_queries_total", "prefix_cache_hits_total", "prompt_tokens_total",
        "generation_tokens_total", "num_preemptions_total", "request_success_total",
        "request_errors_total"}) {
    const std::string name = std::string("tessera:") + family;
    EXPECT_NE(text.find("# TYPE " + name + " counter\n"), std::string::npos) << name;
  }
  // Every finish reason and error status is there before it happens.
  for (const char* reason : {"stop", "length", "abort", "error"}) {
    EXPECT_EQ(value_of(samples, "tessera:request_success_total", {{"finished_reason", reason}}),
              reason == std::string("stop") ? "1" : "0");
  }
  for (const char* status : {"400", "401", "404", "413", "429", "500", "503"}) {
    EXPECT_EQ(value_of(samples, "tessera:request_errors_total", {{"status", status}}),
              status == std::string("400") ? "1" : "0");
  }
}

TEST(ServeMetrics, RecordsRequestsCacheAndQueue) {
  ServeMetrics m("m");
  m.record_finished({"length", 10, 4, 0, 0.5, 0.75, 2.0, {0.05, 0.05, 0.05}});
  m.record_finished({"abort", 7, 0, 0, -1, -1, 0.01, {}});  // never scheduled: no queue time or ttft
  m.record_prefix_lookup(64, 48);
  m.record_prefix_lookup(16, 0);
  m.set_requests(3, 9);
  m.set_kv_cache_blocks(30, 120);
  m.num_preemptions.add();
  m.record_error_response(418);  // not in the contract's list: a new series
  const std::vector<Sample> s = parse_exposition(m.render());
  EXPECT_EQ(value_of(s, "tessera:request_success_total", {{"finished_reason", "length"}}), "1");
  EXPECT_EQ(value_of(s, "tessera:request_success_total", {{"finished_reason", "abort"}}), "1");
  EXPECT_EQ(value_of(s, "tessera:prompt_tokens_total"), "17");
  EXPECT_EQ(value_of(s, "tessera:generation_tokens_total"), "4");
  EXPECT_EQ(value_of(s, "tessera:request_queue_time_seconds_count"), "1");
  EXPECT_EQ(value_of(s, "tessera:request_queue_time_seconds_sum"), "0.5");
  EXPECT_EQ(value_of(s, "tessera:request_queue_time_seconds_bucket", {{"le", "0.5"}}), "1");
  EXPECT_EQ(value_of(s, "tessera:request_queue_time_seconds_bucket", {{"le", "0.3"}}), "0");
  EXPECT_EQ(value_of(s, "tessera:time_to_first_token_seconds_count"), "1");
  EXPECT_EQ(value_of(s, "tessera:e2e_request_latency_seconds_count"), "2");
  EXPECT_EQ(value_of(s, "tessera:e2e_request_latency_seconds_sum"), "2.01");
  EXPECT_EQ(value_of(s, "tessera:inter_token_latency_seconds_bucket", {{"le", "0.05"}}), "3");
  EXPECT_EQ(value_of(s, "tessera:inter_token_latency_seconds_bucket", {{"le", "0.025"}}), "0");
  EXPECT_EQ(value_of(s, "tessera:prefix_cache_queries_total"), "80");
  EXPECT_EQ(value_of(s, "tessera:prefix_cache_hits_total"), "48");
  EXPECT_EQ(value_of(s, "tessera:num_requests_running"), "3");
  EXPECT_EQ(value_of(s, "tessera:num_requests_waiting"), "9");
  EXPECT_EQ(value_of(s, "tessera:kv_cache_blocks_in_use"), "30");
  EXPECT_EQ(value_of(s, "tessera:kv_cache_blocks_total"), "120");
  EXPECT_EQ(value_of(s, "tessera:kv_cache_usage_perc"), "0.25");
  EXPECT_EQ(value_of(s, "tessera:num_preemptions_total"), "1");
  EXPECT_EQ(value_of(s, "tessera:request_errors_total", {{"status", "418"}}), "1");
  m.set_kv_cache_blocks(0, 0);
  EXPECT_DOUBLE_EQ(m.kv_cache_usage_perc.value(), 0);
}

// Several threads observe while another renders: the final counts are exact.
TEST(ServeMetrics, ConcurrentUpdatesGiveExactCounts) {
  ServeMetrics m("m");
  constexpr int kThreads = 8, kPerThread = 5000;
  std::atomic<bool> done{false};
  std::thread scraper([&] {
    while (!done.load()) EXPECT_FALSE(m.render().empty());
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        // Exactly representable values, so the sum is exact in any order.
        m.inter_token_latency.observe(i % 2 == 0 ? 0.0078125 : 0.5);
        m.generation_tokens.add(1);
        m.num_requests_running.add(t % 2 == 0 ? 1 : -1);
        if (i % 100 == 0) m.record_finished({t % 2 == 0 ? "stop" : "length", 1, 1, 0, 0, 0, 0, {}});
        if (i % 1000 == 0) m.record_error_response(429);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  done = true;
  scraper.join();
  const Histogram::Snapshot snap = m.inter_token_latency.snapshot();
  const uint64_t total = uint64_t{kThreads} * kPerThread;
  EXPECT_EQ(snap.count, total);
  EXPECT_DOUBLE_EQ(snap.sum, total / 2 * 0.0078125 + total / 2 * 0.5);
  const std::vector<Sample> s = parse_exposition(m.render());
  EXPECT_EQ(value_of(s, "tessera:inter_token_latency_seconds_bucket", {{"le", "0.01"}}),
            std::to_string(total / 2));
  EXPECT_EQ(value_of(s, "tessera:inter_token_latency_seconds_bucket", {{"le", "+Inf"}}),
            std::to_string(total));
  EXPECT_EQ(value_of(s, "tessera:generation_tokens_total"), std::to_string(total + total / 100));
  EXPECT_EQ(value_of(s, "tessera:num_requests_running"), "0");
  EXPECT_EQ(value_of(s, "tessera:request_success_total", {{"finished_reason", "stop"}}),
            std::to_string(total / 100 / 2));
  EXPECT_EQ(value_of(s, "tessera:request_errors_total", {{"status", "429"}}),
            std::to_string(total / 1000));
}

}  // namespace
}  // namespace tessera::serve
