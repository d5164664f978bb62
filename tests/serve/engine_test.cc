// The serving engine against the one-sequence generation loop: with continuous batching, chunked
// prefill, the prefix cache, preemption and cancellation, every request's greedy tokens must be
// what it gets alone, and every KV block must stay owned by exactly one owner.
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "llm/generate.h"
#include "llm/model_writer.h"
#include "llm/test_weights.h"
#include "serve/engine.h"

namespace tessera::serve {
namespace {

using namespace std::chrono_literals;

llm::ModelConfig engine_test_config() {
  llm::ModelConfig c;
  c.hidden = 64;
  c.ffn_hidden = 96;
  c.layers = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.context_length = 256;
  c.vocab_size = 512;
  return c;
}

// Reference kernels and float32 weights: a row's result does not depend on the batch around it,
// so batched, chunked and cached runs must give exactly the tokens of a run alone.
std::unique_ptr<llm::LanguageModel> make_model(int64_t cache_tokens, int64_t block_size = 4) {
  static const llm::testing::TestWeights tw = llm::testing::make_weights(engine_test_config(), quant::QType::kF32, 11);
  llm::ModelOptions o;
  o.backend = "ref";
  o.kv_block_size = block_size;
  o.kv_cache_tokens = cache_tokens;
  const llm::TokenizerVocab vocab = llm::builtin_llama_vocab(512);
  auto m = llm::LanguageModel::create(engine_test_config(), tw.weights, &vocab, o);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return m.ok() ? std::move(*m) : nullptr;
}

std::vector<int32_t> random_prompt(std::mt19937_64& rng, size_t n) {
  std::vector<int32_t> p(n);
  for (auto& t : p) t = static_cast<int32_t>(3 + rng() % 500);
  return p;
}

RequestParams greedy(std::vector<int32_t> prompt, int64_t max_tokens) {
  RequestParams p;
  p.prompt = std::move(prompt);
  p.max_tokens = max_tokens;
  p.sampling.temperature = 0;
  p.ignore_eos = true;
  return p;
}

std::vector<int32_t> solo(llm::LanguageModel& m, const std::vector<int32_t>& prompt, int64_t max_tokens) {
  llm::GenerateOptions g;
  g.max_tokens = max_tokens;
  g.sampling.temperature = 0;
  g.stop_at_end_of_generation = false;
  auto r = llm::generate(m, prompt, g);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? r->output_ids : std::vector<int32_t>{};
}

struct Collected {
  std::vector<int32_t> ids;
  std::string text;
  RequestEvent last;
};

Collected collect(RequestChannel& ch) {
  Collected c;
  for (int spins = 0; spins < 600; ++spins) {  // at most a minute
    auto e = ch.next(100ms);
    if (!e) continue;
    c.ids.insert(c.ids.end(), e->token_ids.begin(), e->token_ids.end());
    c.text += e->text;
    if (e->finished) {
      c.last = *e;
      return c;
    }
  }
  ADD_FAILURE() << "the request did not finish";
  return c;
}

// Stats are published at the end of each engine iteration, after the last events went out.
Engine::Stats idle_stats(const Engine& e) {
  for (int i = 0; i < 200; ++i) {
    const Engine::Stats st = e.stats();
    if (st.running == 0 && st.waiting == 0) return st;
    std::this_thread::sleep_for(5ms);
  }
  ADD_FAILURE() << "the engine did not go idle";
  return e.stats();
}

TEST(ServeEngine, SingleRequestMatchesGenerate) {
  auto ref = make_model(256);
  auto m = make_model(256);
  std::mt19937_64 rng(1);
  const auto prompt = random_prompt(rng, 37);
  const auto expected = solo(*ref, prompt, 12);
  for (bool cache : {false, true}) {
    EngineOptions o;
    o.prefix_cache = cache;
    o.chunk_size = 16;  // the prompt takes three steps
    o.check_invariants = true;
    Engine e(*m, o);
    for (int round = 0; round < 2; ++round) {  // the second round hits the prefix cache
      Submission s = e.submit(greedy(prompt, 12));
      ASSERT_TRUE(s.channel) << s.error;
      Collected c = collect(*s.channel);
      EXPECT_EQ(c.ids, expected) << "cache " << cache << " round " << round;
      EXPECT_EQ(c.last.finish_reason, "length");
      EXPECT_EQ(c.last.completion_tokens, 12);
      EXPECT_EQ(c.last.prompt_tokens, 37);
      EXPECT_EQ(c.last.cached_tokens, cache && round == 1 ? 36 : 0);  // whole blocks, below the last token
    }
    EXPECT_EQ(e.stats().invariant_error, "");
  }
}

TEST(ServeEngine, ConcurrentRequestsWithSharedPrefixesMatchSoloRuns) {
  auto ref = make_model(1024);
  auto m = make_model(1024);
  std::mt19937_64 rng(2);
  const auto shared_a = random_prompt(rng, 24), shared_b = random_prompt(rng, 13);
  std::vector<RequestParams> reqs;
  for (int i = 0; i < 10; ++i) {
    std::vector<int32_t> p = i % 2 ? shared_a : shared_b;
    const auto q = random_prompt(rng, 1 + rng() % 20);
    p.insert(p.end(), q.begin(), q.end());
    reqs.push_back(greedy(p, 4 + static_cast<int64_t>(rng() % 10)));
  }
  std::vector<std::vector<int32_t>> expected;
  for (const auto& r : reqs) expected.push_back(solo(*ref, r.prompt, r.max_tokens));

  EngineOptions o;
  o.max_batch_tokens = 40;
  o.chunk_size = 12;
  o.check_invariants = true;
  Engine e(*m, o);
  std::vector<std::shared_ptr<RequestChannel>> chans;
  for (const auto& r : reqs) chans.push_back(e.submit(r).channel);
  int64_t cached = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_TRUE(chans[i]);
    Collected c = collect(*chans[i]);
    EXPECT_EQ(c.ids, expected[i]) << "request " << i;
    cached += c.last.cached_tokens;
  }
  // The requests after the first of each group wait for its prefill and then hit the cache.
  EXPECT_GE(cached, 8 * 12);
  const Engine::Stats st = idle_stats(e);
  EXPECT_EQ(st.invariant_error, "");
  EXPECT_EQ(st.kv_blocks_in_use, st.prefix_cached_blocks);
  e.flush_prefix_cache();
  EXPECT_EQ(e.stats().kv_blocks_in_use, 0);
}

TEST(ServeEngine, PreemptionAndCancellationUnderChurnKeepOutputsAndBlocks) {
  auto ref = make_model(2048);
  auto m = make_model(96);  // 24 blocks of 4: requests must be preempted and recomputed
  std::mt19937_64 rng(3);
  const auto shared = random_prompt(rng, 16);
  for (bool cache : {true, false}) {
    EngineOptions o;
    o.prefix_cache = cache;
    o.max_batch_tokens = 32;
    o.chunk_size = 8;
    o.check_invariants = true;
    Engine e(*m, o);
    std::vector<RequestParams> reqs;
    std::vector<std::shared_ptr<RequestChannel>> chans;
    for (int i = 0; i < 24; ++i) {
      std::vector<int32_t> p = rng() % 2 ? shared : std::vector<int32_t>{};
      const auto q = random_prompt(rng, 2 + rng() % 30);
      p.insert(p.end(), q.begin(), q.end());
      reqs.push_back(greedy(p, 2 + static_cast<int64_t>(rng() % 24)));
      chans.push_back(e.submit(reqs.back()).channel);
      ASSERT_TRUE(chans.back());
      if (i % 5 == 4) chans.back()->cancel();
    }
    for (size_t i = 0; i < reqs.size(); ++i) {
      Collected c = collect(*chans[i]);
      if (i % 5 == 4) {
        EXPECT_EQ(c.last.finish_reason, "abort");
        continue;
      }
      EXPECT_EQ(c.last.finish_reason, "length");
      EXPECT_EQ(c.ids, solo(*ref, reqs[i].prompt, reqs[i].max_tokens)) << "request " << i << " cache " << cache;
    }
    const Engine::Stats st = idle_stats(e);
    EXPECT_EQ(st.invariant_error, "");
    EXPECT_GT(st.preemptions, 0);
    e.flush_prefix_cache();
    EXPECT_EQ(e.stats().kv_blocks_in_use, 0);
  }
}

TEST(ServeEngine, StopStringsCutTheTextAndLogprobsAreNormalized) {
  auto m = make_model(256);
  std::mt19937_64 rng(4);
  const auto prompt = random_prompt(rng, 9);
  Engine e(*m, EngineOptions{});
  RequestParams p = greedy(prompt, 24);
  p.top_logprobs = 3;
  Collected full = collect(*e.submit(p).channel);
  ASSERT_EQ(full.ids.size(), 24u);
  ASSERT_GE(full.text.size(), 6u);
  // Each token's logprob is the best of its top list (greedy), top lists are sorted, all <= 0.
  Submission s = e.submit(p);
  int64_t seen = 0;
  for (;;) {
    auto ev = s.channel->next(1000ms);
    ASSERT_TRUE(ev);
    for (const TokenLogprob& lp : ev->logprobs) {
      ASSERT_EQ(lp.top.size(), 3u);
      EXPECT_EQ(lp.top[0].first, lp.token);
      EXPECT_FLOAT_EQ(lp.top[0].second, lp.logprob);
      EXPECT_LE(lp.logprob, 0.0f);
      EXPECT_GE(lp.top[0].second, lp.top[1].second);
      EXPECT_GE(lp.top[1].second, lp.top[2].second);
      ++seen;
    }
    if (ev->finished) break;
  }
  EXPECT_EQ(seen, 24);
  // A stop string from the middle of the text: the answer ends just before it.
  const std::string stop = full.text.substr(full.text.size() / 2, 3);
  p.stop = {stop};
  p.top_logprobs = -1;
  Collected cut = collect(*e.submit(p).channel);
  EXPECT_EQ(cut.last.finish_reason, "stop");
  EXPECT_EQ(cut.text, full.text.substr(0, full.text.find(stop)));
}

TEST(ServeEngine, RefusesBadRequestsAndAFullQueue) {
  auto m = make_model(64);
  EngineOptions o;
  o.max_waiting = 2;
  o.max_running = 1;
  Engine e(*m, o);
  EXPECT_EQ(e.submit(greedy({}, 4)).rejection, Rejection::kInvalid);
  EXPECT_EQ(e.submit(greedy({1, 9999}, 4)).rejection, Rejection::kInvalid);
  EXPECT_EQ(e.submit(greedy({1, 2}, 0)).rejection, Rejection::kInvalid);
  EXPECT_EQ(e.submit(greedy({1, 2}, 255)).rejection, Rejection::kInvalid);           // past the context
  EXPECT_EQ(e.submit(greedy(std::vector<int32_t>(100, 5), 4)).rejection, Rejection::kInvalid);  // past the cache
  // One running, two waiting: the next is refused until the queue drains. Requests that finish
  // while the loop runs make room again (on a loaded machine the loop may be descheduled for many
  // requests' time), so the burst is far larger than the room.
  std::vector<std::shared_ptr<RequestChannel>> chans;
  int refused = 0;
  for (int i = 0; i < 32; ++i) {
    Submission s = e.submit(greedy({1, 2, 3}, 40));
    if (s.rejection == Rejection::kQueueFull) ++refused;
    if (s.channel) chans.push_back(s.channel);
  }
  EXPECT_GE(refused, 4);
  for (auto& c : chans) EXPECT_EQ(collect(*c).last.finish_reason, "length");
  EXPECT_EQ(e.submit(greedy({1, 2, 3}, 4)).rejection, Rejection::kNone);
}

}  // namespace
}  // namespace tessera::serve
