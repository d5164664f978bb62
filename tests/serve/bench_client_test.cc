// Tests of the bench-serve client: workload shapes, the statistics on hand-made records, and whole
// runs against a fake OpenAI server in this process that streams a known answer slowly.
#include "serve/bench_client.h"

// As in bench_client.cc: Debian's libcpp-httplib.so is built with these, and they change its
// classes' layout.
#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
#define CPPHTTPLIB_OPENSSL_SUPPORT
#endif
#ifndef CPPHTTPLIB_ZLIB_SUPPORT
#define CPPHTTPLIB_ZLIB_SUPPORT
#endif
#ifndef CPPHTTPLIB_BROTLI_SUPPORT
#define CPPHTTPLIB_BROTLI_SUPPORT
#endif
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "tools/run_tessera.h"

namespace tessera::serve {
namespace {

using nlohmann::json;

// ---- workloads ----

TEST(BenchClientWorkload, RandomLengthsAndIdsStayInRange) {
  RandomDatasetOptions o;
  o.num_prompts = 300;
  o.input_len = 100;
  o.output_len = 40;
  o.range_ratio = 0.5;
  o.vocab = {10, 50};
  auto w = make_random_workload(o);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  ASSERT_EQ(w->jobs.size(), 300u);
  EXPECT_EQ(w->num_requests(), 300);
  size_t shortest = 1000, longest = 0;
  std::set<int32_t> ids;
  for (const auto& j : w->jobs) {
    EXPECT_FALSE(j.is_chat());
    shortest = std::min(shortest, j.prompt_ids.size());
    longest = std::max(longest, j.prompt_ids.size());
    EXPECT_GE(j.output_len, 20);
    EXPECT_LE(j.output_len, 40);
    for (const int32_t t : j.prompt_ids) ids.insert(t);
  }
  EXPECT_GE(shortest, 50u);
  EXPECT_LE(longest, 100u);
  EXPECT_LT(shortest, 60u);  // 300 uniform draws from [50, 100] reach near both ends
  EXPECT_GT(longest, 90u);
  EXPECT_EQ(*ids.begin(), 10);
  EXPECT_EQ(*ids.rbegin(), 49);

  o.range_ratio = 0.0;
  auto fixed = make_random_workload(o);
  ASSERT_TRUE(fixed.ok());
  for (const auto& j : fixed->jobs) {
    EXPECT_EQ(j.prompt_ids.size(), 100u);
    EXPECT_EQ(j.output_len, 40);
  }
}

TEST(BenchClientWorkload, SeedsReproduce) {
  RandomDatasetOptions o;
  o.num_prompts = 20;
  o.input_len = 64;
  o.range_ratio = 0.9;
  auto a = make_random_workload(o), b = make_random_workload(o);
  o.seed = 2;
  auto c = make_random_workload(o);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  for (size_t i = 0; i < a->jobs.size(); ++i) {
    EXPECT_EQ(a->jobs[i].prompt_ids, b->jobs[i].prompt_ids);
    EXPECT_EQ(a->jobs[i].output_len, b->jobs[i].output_len);
  }
  EXPECT_NE(a->jobs[0].prompt_ids, c->jobs[0].prompt_ids);

  MultiTurnDatasetOptions m;
  m.num_conversations = 3;
  auto ma = make_multi_turn_workload(m), mb = make_multi_turn_workload(m);
  ASSERT_TRUE(ma.ok() && mb.ok());
  EXPECT_EQ(ma->jobs[2].turns[3].user_message, mb->jobs[2].turns[3].user_message);
}

TEST(BenchClientWorkload, SharedPrefixEqualWithinGroupDifferentAcross) {
  SharedPrefixDatasetOptions o;
  o.num_groups = 6;
  o.prompts_per_group = 5;
  o.system_prompt_len = 64;
  o.question_len = 16;
  o.output_len = 8;
  o.vocab = {0, 1000};
  o.shuffle = false;
  auto w = make_shared_prefix_workload(o);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  ASSERT_EQ(w->jobs.size(), 30u);
  std::vector<std::vector<int32_t>> prefix(6);
  std::set<std::vector<int32_t>> questions;
  for (size_t i = 0; i < w->jobs.size(); ++i) {
    const BenchJob& j = w->jobs[i];
    EXPECT_EQ(j.group, static_cast<int64_t>(i / 5));  // grouped: group by group
    ASSERT_EQ(j.prompt_ids.size(), 80u);
    EXPECT_EQ(j.output_len, 8);
    const std::vector<int32_t> p(j.prompt_ids.begin(), j.prompt_ids.begin() + 64);
    if (prefix[j.group].empty()) prefix[j.group] = p;
    EXPECT_EQ(p, prefix[j.group]) << "request " << i;
    questions.insert(std::vector<int32_t>(j.prompt_ids.begin() + 64, j.prompt_ids.end()));
  }
  EXPECT_EQ(std::set<std::vector<int32_t>>(prefix.begin(), prefix.end()).size(), 6u);
  EXPECT_EQ(questions.size(), 30u);

  o.shuffle = true;
  auto s = make_shared_prefix_workload(o);
  ASSERT_TRUE(s.ok());
  std::vector<int64_t> groups;
  for (const auto& j : s->jobs) groups.push_back(j.group);
  EXPECT_FALSE(std::is_sorted(groups.begin(), groups.end()));
  std::sort(groups.begin(), groups.end());
  for (size_t i = 0; i < groups.size(); ++i) EXPECT_EQ(groups[i], static_cast<int64_t>(i / 5));
  for (const auto& j : s->jobs) {
    EXPECT_TRUE(std::equal(prefix[j.group].begin(), prefix[j.group].end(), j.prompt_ids.begin()));
  }
}

TEST(BenchClientWorkload, MultiTurnShape) {
  MultiTurnDatasetOptions o;
  o.num_conversations = 4;
  o.num_turns = 3;
  o.words_per_turn = 10;
  o.output_len = 12;
  o.range_ratio = 0.5;
  auto w = make_multi_turn_workload(o);
  ASSERT_TRUE(w.ok());
  ASSERT_EQ(w->jobs.size(), 4u);
  EXPECT_EQ(w->num_requests(), 12);
  for (const auto& j : w->jobs) {
    ASSERT_TRUE(j.is_chat());
    ASSERT_EQ(j.turns.size(), 3u);
    for (const auto& t : j.turns) {
      const auto words = 1 + std::count(t.user_message.begin(), t.user_message.end(), ' ');
      EXPECT_GE(words, 5);
      EXPECT_LE(words, 10);
      EXPECT_GE(t.output_len, 6);
      EXPECT_LE(t.output_len, 12);
    }
  }
}

TEST(BenchClientWorkload, RejectsBadOptions) {
  RandomDatasetOptions r;
  r.vocab = {5, 5};
  EXPECT_FALSE(make_random_workload(r).ok());
  r.vocab = {0, 10};
  r.range_ratio = 1.5;
  EXPECT_FALSE(make_random_workload(r).ok());
  r.range_ratio = 0;
  r.input_len = 0;
  EXPECT_FALSE(make_random_workload(r).ok());
  SharedPrefixDatasetOptions g;
  g.system_prompt_len = 0;
  g.question_len = 0;
  EXPECT_FALSE(make_shared_prefix_workload(g).ok());
}

TEST(BenchClientWorkload, PoissonArrivals) {
  const auto all_at_once = poisson_arrival_times(5, std::numeric_limits<double>::infinity(), 1);
  EXPECT_EQ(all_at_once, std::vector<double>(5, 0.0));
  const auto t = poisson_arrival_times(4000, 100.0, 7);
  EXPECT_EQ(t[0], 0.0);
  EXPECT_TRUE(std::is_sorted(t.begin(), t.end()));
  // 3999 exponential gaps of mean 10 ms: the mean is within 5% with overwhelming probability.
  EXPECT_NEAR(t.back() / 3999.0, 0.01, 0.0005);
  EXPECT_EQ(t, poisson_arrival_times(4000, 100.0, 7));
  EXPECT_NE(t, poisson_arrival_times(4000, 100.0, 8));
}

TEST(BenchClientSse, SplitsEventsFedInArbitraryPieces) {
  const std::string stream =
      ": a comment\r\ndata: {\"a\":1}\r\n\r\nevent: x\ndata: line1\ndata: line2\n\ndata:[DONE]\n\n";
  for (size_t piece = 1; piece <= stream.size(); ++piece) {
    SseEventParser p;
    std::vector<std::string> events;
    for (size_t i = 0; i < stream.size(); i += piece) {
      p.feed(std::string_view(stream).substr(i, piece),
             [&](std::string_view d) { events.emplace_back(d); });
    }
    ASSERT_EQ(events.size(), 3u) << "piece " << piece;
    EXPECT_EQ(events[0], "{\"a\":1}");
    EXPECT_EQ(events[1], "line1\nline2");
    EXPECT_EQ(events[2], "[DONE]");
  }
}

// ---- statistics ----

TEST(BenchClientStats, PercentilesInterpolateLikeNumpy) {
  const std::vector<double> v = {1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(sorted_percentile(v, 50), 2.5);
  EXPECT_DOUBLE_EQ(sorted_percentile(v, 99), 3.97);
  EXPECT_DOUBLE_EQ(sorted_percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(sorted_percentile(v, 100), 4);
  EXPECT_DOUBLE_EQ(sorted_percentile({7}, 99), 7);
  EXPECT_DOUBLE_EQ(sorted_percentile({}, 50), 0);
  const LatencySummary s =
      summarize_latencies({0.004, 0.001, 0.003, 0.002});  // unsorted on purpose
  EXPECT_EQ(s.count, 4);
  EXPECT_NEAR(s.mean_ms, 2.5, 1e-9);
  EXPECT_NEAR(s.median_ms, 2.5, 1e-9);
  EXPECT_NEAR(s.p99_ms, 3.97, 1e-9);
  EXPECT_NEAR(s.std_ms, std::sqrt(1.25), 1e-9);
  EXPECT_NEAR(s.max_ms, 4, 1e-9);
}

BenchRequestRecord record(double send, std::vector<double> chunks, double end, int64_t prompt,
                          int64_t out, int64_t cached) {
  BenchRequestRecord r;
  r.success = true;
  r.http_status = 200;
  r.send_time = send;
  r.chunk_times = std::move(chunks);
  r.end_time = end;
  r.prompt_tokens = prompt;
  r.completion_tokens = out;
  r.cached_tokens = cached;
  return r;
}

TEST(BenchClientStats, TtftTpotAndItlFromRecords) {
  const BenchRequestRecord r = record(1.0, {1.1, 1.2, 1.3, 1.4}, 1.4, 10, 4, 0);
  EXPECT_NEAR(r.ttft(), 0.1, 1e-12);
  EXPECT_NEAR(r.e2e(), 0.4, 1e-12);
  EXPECT_NEAR(r.tpot(), 0.1, 1e-12);  // (0.4 - 0.1) / (4 - 1)
  EXPECT_EQ(record(0, {0.5}, 0.5, 1, 1, 0).tpot(), 0.0);
}

TEST(BenchClientStats, MetricsOnHandMadeRecords) {
  std::vector<BenchRequestRecord> recs;
  // ttft 100 ms, tpot 100 ms, e2e 400 ms
  recs.push_back(record(0.0, {0.1, 0.2, 0.3, 0.4}, 0.4, 100, 4, 50));
  // ttft 300 ms, tpot 50 ms, e2e 400 ms
  recs.push_back(record(0.0, {0.3, 0.35, 0.4}, 0.4, 200, 3, 150));
  // ttft 200 ms, one token: no TPOT, e2e 200 ms
  recs.push_back(record(1.0, {1.2}, 1.2, 100, 1, 0));
  BenchRequestRecord bad;
  bad.http_status = 503;
  bad.error = "HTTP 503: overloaded";
  recs.push_back(bad);
  recs.push_back(bad);

  BenchSlo slo;
  slo.ttft_ms = 250;  // the second request misses it
  const BenchMetrics m = compute_bench_metrics(recs, 2.0, slo);
  EXPECT_EQ(m.completed, 3);
  EXPECT_EQ(m.failed, 2);
  EXPECT_EQ(m.input_tokens, 400);
  EXPECT_EQ(m.output_tokens, 8);
  EXPECT_EQ(m.cached_tokens, 200);
  EXPECT_DOUBLE_EQ(m.cache_hit_rate, 0.5);
  EXPECT_DOUBLE_EQ(m.request_throughput, 1.5);
  EXPECT_DOUBLE_EQ(m.input_token_throughput, 200);
  EXPECT_DOUBLE_EQ(m.output_token_throughput, 4);
  EXPECT_DOUBLE_EQ(m.total_token_throughput, 204);
  EXPECT_NEAR(m.mean_concurrency, 0.5, 1e-12);  // (0.4 + 0.4 + 0.2) / 2
  EXPECT_NEAR(m.ttft.mean_ms, 200, 1e-9);
  EXPECT_NEAR(m.ttft.median_ms, 200, 1e-9);
  EXPECT_EQ(m.tpot.count, 2);
  EXPECT_NEAR(m.tpot.mean_ms, 75, 1e-9);
  EXPECT_EQ(m.itl.count, 5);  // 3 gaps + 2 gaps
  EXPECT_NEAR(m.itl.mean_ms, (100 + 100 + 100 + 50 + 50) / 5.0, 1e-9);
  EXPECT_NEAR(m.e2e.median_ms, 400, 1e-9);
  ASSERT_TRUE(m.goodput.has_value());
  EXPECT_EQ(m.good_requests, 2);
  EXPECT_DOUBLE_EQ(*m.goodput, 1.0);
  ASSERT_EQ(m.errors.size(), 1u);
  EXPECT_EQ(m.errors[0].first, "HTTP 503: overloaded");
  EXPECT_EQ(m.errors[0].second, 2);

  slo.tpot_ms =
      60;  // now only the second (tpot 50) and third (no tpot) meet TPOT; the second misses TTFT
  EXPECT_EQ(compute_bench_metrics(recs, 2.0, slo).good_requests, 1);
  slo = BenchSlo{};
  slo.e2e_ms = 300;
  EXPECT_EQ(compute_bench_metrics(recs, 2.0, slo).good_requests, 1);
  EXPECT_FALSE(compute_bench_metrics(recs, 2.0, BenchSlo{}).goodput.has_value());
  EXPECT_NE(format_bench_metrics(m).find("Successful requests:"), std::string::npos);
}

// ---- against a fake server ----

// Streams max_tokens chunks of "tok " after first_delay, gap apart, then usage (prompt tokens =
// the prompt's length or the messages' count, cached_tokens = kCached) and [DONE]. Model "reject"
// gets HTTP 400; max_tokens 99 gets an error event mid-stream.
class FakeOpenAiServer {
 public:
  static constexpr int64_t kCached = 7;
  std::chrono::milliseconds first_delay{60};
  std::chrono::milliseconds gap{5};

  FakeOpenAiServer() {
    server_.Get("/v1/models", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(
          R"({"object":"list","data":[{"id":"fake-model","vocab_size":300,"max_model_len":4096}]})",
          "application/json");
    });
    server_.Post("/flush_cache", [this](const httplib::Request&, httplib::Response& res) {
      ++flushes;
      res.set_content("{}", "application/json");
    });
    auto stream = [this](bool chat) {
      return [this, chat](const httplib::Request& req, httplib::Response& res) {
        handle(req, res, chat);
      };
    };
    server_.Post("/v1/completions", stream(false));
    server_.Post("/v1/chat/completions", stream(true));
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // stop() before the accept loop runs would be lost, and the destructor would wait forever.
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FakeOpenAiServer() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }
  std::vector<json> bodies() {
    std::lock_guard<std::mutex> lock(mu_);
    return bodies_;
  }

  std::atomic<int> in_flight{0}, peak{0}, flushes{0};

 private:
  void handle(const httplib::Request& req, httplib::Response& res, bool chat) {
    const json body = json::parse(req.body, nullptr, false);
    {
      std::lock_guard<std::mutex> lock(mu_);
      bodies_.push_back(body);
    }
    if (!body.is_object() || body.value("model", "") == "reject") {
      res.status = 400;
      res.set_content(R"({"error":{"message":"no such model","type":"invalid_request_error"}})",
                      "application/json");
      return;
    }
    const int now = ++in_flight;
    for (int p = peak.load(); now > p && !peak.compare_exchange_weak(p, now);) {
    }
    const int64_t n = body.value("max_tokens", 16);
    const int64_t prompt = chat ? static_cast<int64_t>(body["messages"].size())
                                : static_cast<int64_t>(body["prompt"].size());
    res.set_chunked_content_provider(
        "text/event-stream", [this, n, prompt, chat](size_t, httplib::DataSink& sink) {
          std::this_thread::sleep_for(first_delay);
          auto send = [&](const json& j) {
            const std::string s = "data: " + j.dump() + "\n\n";
            sink.write(s.data(), s.size());
          };
          for (int64_t i = 0; i < n; ++i) {
            if (i) std::this_thread::sleep_for(gap);
            if (n == 99 && i == 2) {
              send({{"error", {{"message", "boom"}}}});
              --in_flight;
              sink.done();
              return true;
            }
            json choice = {{"index", 0},
                           {"finish_reason", i + 1 == n ? json("length") : json(nullptr)}};
            if (chat) {
              choice["delta"] = {{"content", "tok "}};
            } else {
              choice["text"] = "tok ";
            }
            send({{"choices", json::array({choice})}});
          }
          send({{"choices", json::array()},
                {"usage",
                 {{"prompt_tokens", prompt},
                  {"completion_tokens", n},
                  {"prompt_tokens_details", {{"cached_tokens", kCached}}}}}});
          const std::string done = "data: [DONE]\n\n";
          sink.write(done.data(), done.size());
          // Before the last bytes go out, so that a client that has seen the end never finds this
          // request still counted (the peak may read low, never high).
          --in_flight;
          sink.done();
          return true;
        });
  }

  httplib::Server server_;
  int port_ = -1;
  std::thread thread_;
  std::mutex mu_;
  std::vector<json> bodies_;
};

BenchWorkload small_random(int64_t n, int64_t out) {
  RandomDatasetOptions o;
  o.num_prompts = n;
  o.input_len = 12;
  o.output_len = out;
  o.vocab = {0, 300};
  return *make_random_workload(o);
}

TEST(BenchClientRun, MeasuresStreamAgainstFakeServer) {
  FakeOpenAiServer fake;
  BenchTarget target{fake.url(), "fake-model", 10};
  const BenchWorkload w = small_random(3, 5);
  auto run = run_bench(target, w, BenchRunOptions{});
  ASSERT_TRUE(run.ok()) << run.status().to_string();
  ASSERT_EQ(run->records.size(), 3u);
  for (const auto& r : run->records) {
    ASSERT_TRUE(r.success) << r.error;
    EXPECT_EQ(r.http_status, 200);
    EXPECT_GE(r.ttft(), 0.060);  // the fake waits 60 ms before the first chunk
    EXPECT_EQ(r.chunk_times.size(), 5u);
    EXPECT_TRUE(r.usage_reported);
    EXPECT_EQ(r.completion_tokens, 5);
    EXPECT_EQ(r.prompt_tokens, 12);
    EXPECT_EQ(r.cached_tokens, FakeOpenAiServer::kCached);
    EXPECT_EQ(r.text, "tok tok tok tok tok ");
    // The fake sleeps 60 ms, then 5 ms between its 5 chunks: no reply can end sooner. (Gaps seen by
    // the client can be shorter: TCP may deliver two chunks in one read.)
    EXPECT_GE(r.e2e(), 0.060 + 4 * 0.005);
  }
  EXPECT_EQ(fake.peak.load(), 3);  // no limit, all at once: the client did not serialize them
  // What the server was sent.
  const auto bodies = fake.bodies();
  ASSERT_EQ(bodies.size(), 3u);
  std::set<std::vector<int32_t>> sent;
  for (const auto& b : bodies) {
    EXPECT_EQ(b["model"], "fake-model");
    EXPECT_EQ(b["stream"], true);
    EXPECT_EQ(b["stream_options"]["include_usage"], true);
    EXPECT_EQ(b["ignore_eos"], true);
    EXPECT_EQ(b["temperature"], 0.0);
    EXPECT_EQ(b["max_tokens"], 5);
    sent.insert(b["prompt"].get<std::vector<int32_t>>());
  }
  for (const auto& j : w.jobs) EXPECT_EQ(sent.count(j.prompt_ids), 1u);

  const BenchMetrics m = compute_bench_metrics(run->records, run->duration_s, {});
  EXPECT_EQ(m.completed, 3);
  EXPECT_EQ(m.output_tokens, 15);
  EXPECT_DOUBLE_EQ(m.cache_hit_rate, 7.0 / 12.0);
  EXPECT_GE(m.ttft.median_ms, 60);
}

TEST(BenchClientRun, HonoursMaxConcurrency) {
  FakeOpenAiServer fake;
  fake.first_delay = std::chrono::milliseconds(40);
  BenchRunOptions o;
  o.max_concurrency = 2;
  std::atomic<int64_t> last_done{0};
  o.on_progress = [&](int64_t done, int64_t total, int64_t) {
    EXPECT_EQ(total, 6);
    last_done = done;
  };
  auto run = run_bench(BenchTarget{fake.url(), "fake-model", 10}, small_random(6, 2), o);
  ASSERT_TRUE(run.ok());
  for (const auto& r : run->records) EXPECT_TRUE(r.success) << r.error;
  EXPECT_EQ(fake.peak.load(), 2);
  EXPECT_EQ(last_done.load(), 6);
  // Six ~45 ms requests two at a time take three rounds.
  EXPECT_GE(run->duration_s, 3 * 0.040);
}

TEST(BenchClientRun, ReportsHttpAndStreamErrorsAsFailures) {
  FakeOpenAiServer fake;
  fake.first_delay = std::chrono::milliseconds(1);
  auto rejected =
      run_bench(BenchTarget{fake.url(), "reject", 10}, small_random(2, 3), BenchRunOptions{});
  ASSERT_TRUE(rejected.ok());
  for (const auto& r : rejected->records) {
    EXPECT_FALSE(r.success);
    EXPECT_EQ(r.http_status, 400);
    EXPECT_NE(r.error.find("no such model"), std::string::npos) << r.error;
  }
  EXPECT_EQ(compute_bench_metrics(rejected->records, rejected->duration_s, {}).failed, 2);

  auto mid_stream =
      run_bench(BenchTarget{fake.url(), "fake-model", 10}, small_random(1, 99), BenchRunOptions{});
  ASSERT_TRUE(mid_stream.ok());
  EXPECT_FALSE(mid_stream->records[0].success);
  EXPECT_EQ(mid_stream->records[0].error, "boom");

  // Nothing listens on port 1.
  auto refused =
      run_bench(BenchTarget{"http://127.0.0.1:1", "m", 2}, small_random(1, 3), BenchRunOptions{});
  ASSERT_TRUE(refused.ok());
  EXPECT_FALSE(refused->records[0].success);
  EXPECT_EQ(refused->records[0].http_status, 0);
  EXPECT_NE(refused->records[0].error.find("http://127.0.0.1:1"), std::string::npos)
      << refused->records[0].error;
  EXPECT_FALSE(
      run_bench(BenchTarget{"ftp://x", "m", 2}, small_random(1, 3), BenchRunOptions{}).ok());
}

TEST(BenchClientRun, MultiTurnSendsReceivedRepliesInOrder) {
  FakeOpenAiServer fake;
  fake.first_delay = std::chrono::milliseconds(5);
  MultiTurnDatasetOptions mo;
  mo.num_conversations = 2;
  mo.num_turns = 3;
  mo.words_per_turn = 4;
  mo.output_len = 2;
  const BenchWorkload w = *make_multi_turn_workload(mo);
  auto run = run_bench(BenchTarget{fake.url(), "fake-model", 10}, w, BenchRunOptions{});
  ASSERT_TRUE(run.ok());
  ASSERT_EQ(run->records.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    const auto& r = run->records[i];
    ASSERT_TRUE(r.success) << r.error;
    EXPECT_EQ(r.job, static_cast<int64_t>(i / 3));
    EXPECT_EQ(r.turn, static_cast<int64_t>(i % 3));
    EXPECT_EQ(r.prompt_tokens, 2 * r.turn + 1);  // the fake reports the number of messages
    if (r.turn > 0) {
      EXPECT_GE(r.send_time, run->records[i - 1].end_time);
    }
  }
  // Every chat request carries the earlier user turns and the replies the fake streamed.
  int checked = 0;
  for (const auto& b : fake.bodies()) {
    const json& msgs = b["messages"];
    ASSERT_EQ(msgs.size() % 2, 1u);
    const size_t turn = msgs.size() / 2;
    const BenchJob* job = nullptr;
    for (const auto& j : w.jobs) {
      if (j.turns[0].user_message == msgs[0]["content"]) job = &j;
    }
    ASSERT_NE(job, nullptr);
    for (size_t k = 0; k <= turn; ++k) {
      EXPECT_EQ(msgs[2 * k]["role"], "user");
      EXPECT_EQ(msgs[2 * k]["content"], job->turns[k].user_message);
      if (k < turn) {
        EXPECT_EQ(msgs[2 * k + 1]["role"], "assistant");
        EXPECT_EQ(msgs[2 * k + 1]["content"], "tok tok ");
      }
    }
    ++checked;
  }
  EXPECT_EQ(checked, 6);
}

TEST(BenchClientRun, ModelQueryAndFlush) {
  FakeOpenAiServer fake;
  auto info = query_first_model(fake.url(), 5);
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->id, "fake-model");
  EXPECT_EQ(info->vocab_size, 300);
  EXPECT_EQ(info->max_model_len, 4096);
  EXPECT_TRUE(flush_server_cache(fake.url() + "/", 5).ok());
  EXPECT_EQ(fake.flushes.load(), 1);
  auto down = query_first_model("http://127.0.0.1:1", 2);
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.status().code(), StatusCode::kIoError);
  EXPECT_NE(down.status().message().find("http://127.0.0.1:1"), std::string::npos);
}

TEST(BenchClientCli, RunsAgainstFakeServerAndWritesJson) {
  FakeOpenAiServer fake;
  fake.first_delay = std::chrono::milliseconds(5);
  const std::string out = (std::filesystem::temp_directory_path() /
                           ("tessera_bench_serve_" + std::to_string(getpid()) + ".json"))
                              .string();
  const auto o = testing::run_tessera(
      "bench-serve --port " + std::to_string(fake.port()) +
      " --dataset generated-shared-prefix --gsp-num-groups 2 --gsp-prompts-per-group 2"
      " --gsp-system-prompt-len 8 --gsp-question-len 4 --gsp-output-len 3"
      " --max-concurrency 2 --warmup 1 --flush-cache --slo-ttft-ms 10000"
      " --output-file " +
      out);
  ASSERT_EQ(o.exit_code, 0) << o.text;
  EXPECT_NE(o.text.find("Successful requests:"), std::string::npos) << o.text;
  std::ifstream f(out);
  const json j = json::parse(f, nullptr, false);
  std::filesystem::remove(out);
  ASSERT_TRUE(j.is_object()) << o.text;
  EXPECT_EQ(j["config"]["model"], "fake-model");  // asked of /v1/models
  EXPECT_EQ(j["config"]["request_rate"], "inf");
  EXPECT_EQ(j["metrics"]["completed"], 4);
  EXPECT_EQ(j["metrics"]["failed"], 0);
  EXPECT_EQ(j["metrics"]["total_input_tokens"], 4 * 12);
  EXPECT_EQ(j["metrics"]["total_output_tokens"], 4 * 3);
  EXPECT_EQ(j["metrics"]["good_requests"], 4);
  EXPECT_EQ(fake.flushes.load(), 1);
  EXPECT_EQ(fake.bodies().size(), 5u);  // one warmup request + four measured
  EXPECT_LE(fake.peak.load(), 2);

  const auto down =
      testing::run_tessera("bench-serve --base-url http://127.0.0.1:1 --num-prompts 1");
  EXPECT_EQ(down.exit_code, 1);
  EXPECT_NE(down.text.find("cannot reach the server at http://127.0.0.1:1"), std::string::npos)
      << down.text;
}

}  // namespace
}  // namespace tessera::serve
