#include "serve/engine.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace tessera::serve {

namespace {

// Returns the free pages of every malloc arena to the system (glibc), so that a server's resident
// memory falls back after a burst of requests.
void release_free_memory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

int64_t blocks_for(int64_t tokens, int64_t block_size) { return (tokens + block_size - 1) / block_size; }

// Where the text must be cut for the first stop string in it (npos: none).
size_t first_stop(const std::string& text, const std::vector<std::string>& stops) {
  size_t cut = std::string::npos;
  for (const std::string& s : stops) {
    if (!s.empty()) cut = std::min(cut, text.find(s));
  }
  return cut;
}

// The longest end of `text` that is the beginning of a stop string (to hold back: the next
// token may complete it).
size_t stop_prefix_at_end(const std::string& text, const std::vector<std::string>& stops) {
  size_t hold = 0;
  for (const std::string& s : stops) {
    for (size_t k = std::min(s.size() - 1, text.size()); k > hold; --k) {
      if (text.compare(text.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
    }
  }
  return hold;
}

TokenLogprob logprobs_of(const float* logits, int64_t vocab, int32_t token, int top_n) {
  const float max = *std::max_element(logits, logits + vocab);
  double sum = 0;
  for (int64_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i] - max));
  const float log_norm = max + static_cast<float>(std::log(sum));
  TokenLogprob lp;
  lp.token = token;
  lp.logprob = logits[token] - log_norm;
  if (top_n > 0) {
    std::vector<int32_t> ids(vocab);
    for (int64_t i = 0; i < vocab; ++i) ids[i] = static_cast<int32_t>(i);
    const int64_t n = std::min<int64_t>(top_n, vocab);
    std::partial_sort(ids.begin(), ids.begin() + n, ids.end(),
                      [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
    for (int64_t i = 0; i < n; ++i) lp.top.emplace_back(ids[i], logits[ids[i]] - log_norm);
  }
  return lp;
}

}  // namespace

// ---- RequestChannel ----

std::optional<RequestEvent> RequestChannel::next(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lk(mu_);
  if (!cv_.wait_for(lk, timeout, [&] { return !events_.empty(); })) return std::nullopt;
  RequestEvent e = std::move(events_.front());
  events_.pop_front();
  return e;
}

void RequestChannel::cancel() {
  cancelled_.store(true, std::memory_order_relaxed);
  if (wake_engine_) wake_engine_();
}

void RequestChannel::push(RequestEvent e) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    events_.push_back(std::move(e));
  }
  cv_.notify_all();
}

// ---- Engine ----

enum class RequestState { kWaiting, kRunning, kDone };

struct Engine::Request {
  uint64_t id = 0;
  RequestParams p;
  std::shared_ptr<RequestChannel> channel;
  std::vector<int32_t> tokens;  // prompt, then the sampled tokens
  int64_t prompt_len = 0;
  llm::SequenceBlocks seq;      // seq.length: tokens whose K/V are cached
  int64_t tree_blocks = 0;      // seq.blocks[0, tree_blocks) belong to the prefix cache
  PrefixCache::Node* locked = nullptr;
  std::optional<llm::Sampler> sampler;
  std::optional<llm::StreamDecoder> decoder;
  std::string held;   // text held back: it may be the start of a stop string
  RequestEvent out;   // what the next event carries
  RequestState state = RequestState::kWaiting;
  bool in_batch = false;
  int64_t generated = 0;
  int64_t cached_tokens = -1;  // the prefix-cache hit when first scheduled
  Clock::time_point arrival, last_token;
  RequestRecord record;
};

struct Engine::BatchItem {
  Request* r;
  int64_t n;  // tokens fed this step
};

Engine::Engine(llm::LanguageModel& model, EngineOptions opts) : model_(model), opts_(std::move(opts)) {
  opts_.max_batch_tokens = std::max<int64_t>(1, opts_.max_batch_tokens);
  opts_.chunk_size = std::max<int64_t>(1, opts_.chunk_size);
  opts_.max_running = std::max<int64_t>(1, opts_.max_running);
  if (opts_.prefix_cache) cache_ = std::make_unique<PrefixCache>(model_.cache().pool(), model_.cache().block_size());
  model_.cache().commit();  // the KV cache's memory is taken now, not as requests reach new blocks
  publish_stats();
  thread_ = std::thread(&Engine::loop, this);
}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  if (cache_) cache_->flush();  // the blocks go back to the model's pool
}

Submission Engine::submit(RequestParams params) {
  Submission s;
  auto reject = [&](Rejection why, std::string msg) {
    s.rejection = why;
    s.error = std::move(msg);
    return s;
  };
  const int64_t prompt = static_cast<int64_t>(params.prompt.size());
  const int64_t context = model_.context_length();
  if (prompt == 0) return reject(Rejection::kInvalid, "the prompt has no tokens");
  for (int32_t t : params.prompt) {
    if (t < 0 || t >= model_.config().vocab_size) {
      return reject(Rejection::kInvalid, "token id " + std::to_string(t) + " is outside the vocabulary (0 to " +
                                             std::to_string(model_.config().vocab_size - 1) + ")");
    }
  }
  if (params.max_tokens < 1) return reject(Rejection::kInvalid, "max_tokens must be at least 1");
  if (prompt + params.max_tokens > context) {
    return reject(Rejection::kInvalid, "this model's maximum context length is " + std::to_string(context) +
                                           " tokens; the request has " + std::to_string(prompt) + " prompt tokens and asks for " +
                                           std::to_string(params.max_tokens) + " more");
  }
  const llm::KvCache& kv = model_.cache();
  if (blocks_for(prompt + 1, kv.block_size()) > kv.blocks()) {
    return reject(Rejection::kInvalid, "the prompt needs " + std::to_string(prompt + 1) + " tokens of KV cache; the server holds " +
                                           std::to_string(kv.blocks() * kv.block_size()) + " (--kv-cache-size)");
  }
  auto r = std::make_unique<Request>();
  r->p = std::move(params);
  r->tokens = r->p.prompt;
  r->prompt_len = prompt;
  r->sampler.emplace(r->p.sampling);
  if (model_.tokenizer()) r->decoder.emplace(*model_.tokenizer());
  r->arrival = Clock::now();
  r->channel = std::make_shared<RequestChannel>();
  r->channel->wake_engine_ = [this] {
    std::lock_guard<std::mutex> lk(mu_);
    wake_.notify_all();
  };
  s.channel = r->channel;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopping_) return reject(Rejection::kShuttingDown, "the server is shutting down");
    // Requests that can start at once (free running slots) do not count against the queue:
    // a burst that arrives before the engine thread wakes must not be refused for them.
    const int64_t free_slots = std::max<int64_t>(0, opts_.max_running - stats_.running);
    if (static_cast<int64_t>(inbox_.size()) + stats_.waiting >= opts_.max_waiting + free_slots) {
      s.channel.reset();
      return reject(Rejection::kQueueFull, "the server is busy: " + std::to_string(opts_.max_waiting) +
                                               " requests are already waiting; retry later");
    }
    r->id = next_id_++;
    inbox_.push_back(std::move(r));
  }
  wake_.notify_all();
  return s;
}

int64_t Engine::flush_prefix_cache() {
  std::unique_lock<std::mutex> lk(mu_);
  const int64_t ticket = ++flush_requested_;
  wake_.notify_all();
  flush_cv_.wait(lk, [&] { return flush_done_ >= ticket || stopping_; });
  return flushed_blocks_;
}

Engine::Stats Engine::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  Stats st = stats_;
  st.waiting += static_cast<int64_t>(inbox_.size());  // submitted, not yet seen by the engine thread
  return st;
}

void Engine::publish_stats() {
  const llm::KvBlockPool& pool = model_.cache().pool();
  std::lock_guard<std::mutex> lk(mu_);
  stats_.running = static_cast<int64_t>(running_.size());
  stats_.waiting = static_cast<int64_t>(waiting_.size());
  stats_.kv_blocks_total = pool.capacity();
  stats_.kv_blocks_in_use = pool.capacity() - pool.free_count();
  stats_.prefix_cached_blocks = cache_ ? cache_->cached_blocks() : 0;
  stats_.steps = steps_;
  stats_.preemptions = preemptions_;
  if (stats_.invariant_error.empty()) stats_.invariant_error = invariant_error_;
}

void Engine::loop() {
  while (true) {
    bool flush = false;
    {
      std::unique_lock<std::mutex> lk(mu_);
      auto has_work = [&] {
        return stopping_ || !inbox_.empty() || flush_done_ < flush_requested_ || !running_.empty() || !waiting_.empty();
      };
      // Idle for a second after work: hand the memory the burst freed back to the system, once:
      // the step buffers kept for the largest batch, and the free pages of every thread's
      // malloc arena (request state, HTTP buffers).
      if (worked_since_trim_ && !wake_.wait_for(lk, std::chrono::seconds(1), has_work)) {
        worked_since_trim_ = false;
        lk.unlock();
        model_.release_free_buffers();
        release_free_memory();
        lk.lock();
      }
      wake_.wait(lk, has_work);
      if (stopping_) break;
      while (!inbox_.empty()) {
        waiting_.push_back(std::move(inbox_.front()));
        inbox_.pop_front();
      }
      flush = flush_done_ < flush_requested_;
    }
    if (flush) {
      const int64_t freed = cache_ ? cache_->flush() : 0;
      publish_stats();
      {
        std::lock_guard<std::mutex> lk(mu_);
        flushed_blocks_ = freed;
        flush_done_ = flush_requested_;
      }
      flush_cv_.notify_all();
    }
    drop_cancelled();
    std::vector<BatchItem> batch;
    build_batch(batch);
    if (!batch.empty()) {
      run_step(batch);
      worked_since_trim_ = true;
    }
    std::erase_if(running_, [](const auto& r) { return r->state == RequestState::kDone; });
    std::erase_if(waiting_, [](const auto& r) { return r->state == RequestState::kDone; });
    if (opts_.check_invariants && invariant_error_.empty()) invariant_error_ = check_block_ownership();
    publish_stats();
  }
  // Stopping: everyone still here is told so.
  for (auto& r : running_) finish(*r, "abort", "the server is shutting down");
  for (auto& r : waiting_) finish(*r, "abort", "the server is shutting down");
  std::lock_guard<std::mutex> lk(mu_);
  for (auto& r : inbox_) {
    RequestEvent e;
    e.finished = true;
    e.finish_reason = "abort";
    e.error = "the server is shutting down";
    r->channel->push(std::move(e));
  }
  inbox_.clear();
  flush_cv_.notify_all();
}

void Engine::drop_cancelled() {
  for (auto& r : running_) {
    if (r->channel->cancelled()) finish(*r, "abort");
  }
  for (auto& r : waiting_) {
    if (r->channel->cancelled()) finish(*r, "abort");
  }
}

void Engine::release_blocks(Request& r) {
  if (r.locked) {
    cache_->unlock(r.locked);
    r.locked = nullptr;
  }
  llm::KvBlockPool& pool = model_.cache().pool();
  for (size_t i = static_cast<size_t>(r.tree_blocks); i < r.seq.blocks.size(); ++i) pool.release(r.seq.blocks[i]);
  r.seq.blocks.clear();
  r.seq.length = 0;
  r.tree_blocks = 0;
}

void Engine::preempt(Request& r) {
  release_blocks(r);
  r.state = RequestState::kWaiting;
  r.in_batch = false;
  ++preemptions_;
  auto it = std::find_if(running_.begin(), running_.end(), [&](const auto& p) { return p.get() == &r; });
  waiting_.push_front(std::move(*it));
  running_.erase(it);
}

int64_t Engine::running_count() const {
  return std::count_if(running_.begin(), running_.end(), [](const auto& p) { return p->state == RequestState::kRunning; });
}

bool Engine::reserve_blocks(Request& r, int64_t length, bool may_preempt) {
  llm::KvCache& kv = model_.cache();
  while (true) {
    const int64_t need = blocks_for(length, kv.block_size()) - static_cast<int64_t>(r.seq.blocks.size());
    if (need <= 0) return true;
    const int64_t free = kv.pool().free_count();
    if (free < need && cache_) cache_->evict(need - free);
    if (kv.pool().free_count() >= need) return kv.reserve(r.seq, length).ok();
    if (!may_preempt) return false;
    // The newest running request not already in this step gives its blocks back.
    Request* victim = nullptr;
    for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
      if ((*it)->state == RequestState::kRunning && !(*it)->in_batch) {
        victim = it->get();
        break;
      }
    }
    if (victim == &r) {
      if (running_count() == 1) {
        finish(r, "length");  // it outgrew the whole cache
      } else {
        preempt(r);
      }
      return false;
    }
    if (!victim) return false;
    preempt(*victim);
  }
}

void Engine::admit(Request& r) {
  if (cache_) {
    PrefixCache::Match m = cache_->match(r.p.cache_namespace, r.tokens, static_cast<int64_t>(r.tokens.size()) - 1);
    r.locked = m.node;
    r.seq.blocks = std::move(m.blocks);
    r.seq.length = m.tokens;
    r.tree_blocks = static_cast<int64_t>(r.seq.blocks.size());
  }
  if (r.cached_tokens < 0) {
    r.cached_tokens = r.seq.length;
    r.record.queue_seconds = seconds_between(r.arrival, Clock::now());
  }
}

bool Engine::build_batch(std::vector<BatchItem>& batch) {
  int64_t budget = opts_.max_batch_tokens;
  auto add = [&](Request& r, int64_t n) {
    r.in_batch = true;
    batch.push_back({&r, n});
    budget -= n;
  };
  // Running requests: decode tokens first (latency), then the rest of their prefills, oldest first.
  std::vector<Request*> order;
  for (auto& r : running_) {
    if (static_cast<int64_t>(r->tokens.size()) - r->seq.length == 1) order.push_back(r.get());
  }
  for (auto& r : running_) {
    if (static_cast<int64_t>(r->tokens.size()) - r->seq.length > 1) order.push_back(r.get());
  }
  for (Request* r : order) {
    if (budget == 0) break;
    if (r->state != RequestState::kRunning) continue;  // preempted or finished meanwhile
    const int64_t n = std::min({static_cast<int64_t>(r->tokens.size()) - r->seq.length, opts_.chunk_size, budget});
    if (reserve_blocks(*r, r->seq.length + n, true)) add(*r, n);
  }

  // Waiting requests: the starving in arrival order, then the longest cached prefix first.
  const Clock::time_point now = Clock::now();
  std::vector<Request*> starving, others;
  for (auto& r : waiting_) {
    if (r->state != RequestState::kWaiting) continue;
    (seconds_between(r->arrival, now) > opts_.starvation_seconds ? starving : others).push_back(r.get());
  }
  if (cache_ && static_cast<int64_t>(waiting_.size()) <= opts_.lpm_queue_limit) {
    std::vector<std::pair<int64_t, Request*>> keyed;
    for (Request* r : others) {
      keyed.emplace_back(cache_->cached_prefix(r->p.cache_namespace, r->tokens, static_cast<int64_t>(r->tokens.size()) - 1), r);
    }
    std::stable_sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    others.clear();
    for (auto& [len, r] : keyed) others.push_back(r);
  }
  std::vector<Request*> candidates = std::move(starving);
  const size_t first_other = candidates.size();
  candidates.insert(candidates.end(), others.begin(), others.end());

  const int64_t bs = model_.cache().block_size();
  // Admission never preempts (reserve_blocks below may not), so the running count only grows here.
  int64_t running = running_count();
  for (size_t ci = 0; ci < candidates.size(); ++ci) {
    Request& w = *candidates[ci];
    if (budget == 0 || running >= opts_.max_running) break;
    if (cache_ && ci >= first_other) {
      // Wait for a request whose prefill covers more of this prompt than the cache does.
      const int64_t cached = cache_->cached_prefix(w.p.cache_namespace, w.tokens, static_cast<int64_t>(w.tokens.size()) - 1);
      bool defer = false;
      for (auto& other : running_) {
        const Request& o = *other;
        if (o.state != RequestState::kRunning || o.p.cache_namespace != w.p.cache_namespace || o.seq.length >= o.prompt_len) continue;
        const auto mm = std::mismatch(w.tokens.begin(), w.tokens.end() - 1, o.tokens.begin(), o.tokens.begin() + o.prompt_len);
        const int64_t shared = (mm.first - w.tokens.begin()) / bs * bs;
        if (shared >= cached + bs) {
          defer = true;
          break;
        }
      }
      if (defer) continue;
    }
    admit(w);
    const int64_t n = std::min({static_cast<int64_t>(w.tokens.size()) - w.seq.length, opts_.chunk_size, budget});
    if (!reserve_blocks(w, w.seq.length + n, false)) {
      release_blocks(w);
      break;
    }
    w.state = RequestState::kRunning;
    ++running;
    auto it = std::find_if(waiting_.begin(), waiting_.end(), [&](const auto& p) { return p.get() == &w; });
    running_.push_back(std::move(*it));
    waiting_.erase(it);
    add(w, n);
  }
  return !batch.empty();
}

void Engine::run_step(std::vector<BatchItem>& batch) {
  std::vector<llm::StepSequence> seqs;
  bool any_logits = false;
  for (const BatchItem& item : batch) {
    Request& r = *item.r;
    llm::StepSequence s;
    s.blocks = &r.seq;
    s.tokens.assign(r.tokens.begin() + r.seq.length, r.tokens.begin() + r.seq.length + item.n);
    s.want_logits = r.seq.length + item.n == static_cast<int64_t>(r.tokens.size());
    any_logits |= s.want_logits;
    seqs.push_back(std::move(s));
  }
  if (!any_logits) seqs.back().want_logits = true;  // a step returns at least one row (unused here)
  auto logits = model_.step(seqs);
  ++steps_;
  for (BatchItem& item : batch) item.r->in_batch = false;
  if (!logits.ok()) {
    for (BatchItem& item : batch) finish(*item.r, "error", logits.status().message());
    return;
  }
  const int64_t vocab = model_.config().vocab_size;
  int64_t row = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    Request& r = *batch[i].r;
    if (!seqs[i].want_logits) continue;
    const float* row_logits = logits->data<float>() + row++ * vocab;
    if (r.seq.length != static_cast<int64_t>(r.tokens.size())) continue;
    // Presence and frequency penalties count generated tokens only, as OpenAI's API defines them.
    append_token(r, r.sampler->sample(row_logits, vocab, r.tokens, static_cast<size_t>(r.prompt_len)), row_logits);
  }
  for (BatchItem& item : batch) {
    Request& r = *item.r;
    if (r.state != RequestState::kRunning) continue;
    if (cache_) cache_full_blocks(r);
    if (!r.out.token_ids.empty()) {
      r.channel->push(std::move(r.out));
      r.out = RequestEvent();
    }
  }
}

void Engine::cache_full_blocks(Request& r) {
  const int64_t full = r.seq.length / model_.cache().block_size();
  if (full <= r.tree_blocks) return;
  PrefixCache::Node* node = cache_->insert(r.p.cache_namespace, r.tokens, r.seq.blocks, full);
  cache_->lock(node);
  if (r.locked) cache_->unlock(r.locked);
  r.locked = node;
  r.tree_blocks = full;
}

void Engine::append_token(Request& r, int32_t token, const float* logits) {
  const Clock::time_point now = Clock::now();
  if (r.generated == 0) {
    r.record.ttft_seconds = seconds_between(r.arrival, now);
  } else {
    r.record.inter_token_seconds.push_back(seconds_between(r.last_token, now));
  }
  r.last_token = now;
  ++r.generated;
  r.tokens.push_back(token);
  r.out.token_ids.push_back(token);
  if (r.p.top_logprobs >= 0) r.out.logprobs.push_back(logprobs_of(logits, model_.config().vocab_size, token, r.p.top_logprobs));
  const llm::Tokenizer* tok = model_.tokenizer();
  if (!r.p.ignore_eos && tok && tok->is_end_of_generation(token)) {
    finish(r, "stop");
    return;
  }
  if (r.decoder) {
    std::string text = r.held + r.decoder->push(token);
    const size_t cut = first_stop(text, r.p.stop);
    if (cut != std::string::npos) {
      r.out.text += text.substr(0, cut);
      r.held.clear();
      r.decoder.reset();  // what follows the stop string is dropped
      finish(r, "stop");
      return;
    }
    const size_t hold = stop_prefix_at_end(text, r.p.stop);
    r.out.text += text.substr(0, text.size() - hold);
    r.held = text.substr(text.size() - hold);
  }
  if (r.generated >= r.p.max_tokens || static_cast<int64_t>(r.tokens.size()) >= model_.context_length()) finish(r, "length");
}

void Engine::finish(Request& r, const std::string& reason, const std::string& error) {
  if (r.state == RequestState::kDone) return;
  r.state = RequestState::kDone;
  if (cache_ && reason != "error" && reason != "abort") cache_full_blocks(r);
  release_blocks(r);
  RequestEvent e = std::move(r.out);
  if (r.decoder) e.text += r.held + r.decoder->flush();  // text a stop string did not claim
  e.finished = true;
  e.finish_reason = reason;
  e.error = error;
  e.prompt_tokens = r.prompt_len;
  e.cached_tokens = std::max<int64_t>(0, r.cached_tokens);
  e.completion_tokens = r.generated;
  r.record.finish_reason = reason;
  r.record.prompt_tokens = e.prompt_tokens;
  r.record.cached_tokens = e.cached_tokens;
  r.record.completion_tokens = e.completion_tokens;
  r.record.e2e_seconds = seconds_between(r.arrival, Clock::now());
  r.channel->push(std::move(e));
  if (opts_.on_finish) opts_.on_finish(r.record);
}

std::string Engine::check_block_ownership() {
  const llm::KvBlockPool& pool = model_.cache().pool();
  std::vector<int> owners(pool.capacity(), 0);
  std::vector<uint8_t> in_tree(pool.capacity(), 0);
  for (int32_t b = 0; b < pool.capacity(); ++b) owners[b] += pool.in_use(b) ? 0 : 1;
  std::vector<int32_t> tree;
  if (cache_) cache_->collect_blocks(tree);
  for (int32_t b : tree) {
    ++owners[b];
    in_tree[b] = 1;
  }
  for (const auto& r : running_) {
    for (size_t i = 0; i < r->seq.blocks.size(); ++i) {
      const int32_t b = r->seq.blocks[i];
      if (static_cast<int64_t>(i) < r->tree_blocks) {
        if (!in_tree[b]) return "request " + std::to_string(r->id) + " reads block " + std::to_string(b) + " as cached, but the prefix cache does not hold it";
      } else {
        ++owners[b];
      }
    }
  }
  for (const auto& r : waiting_) {
    if (!r->seq.blocks.empty()) return "waiting request " + std::to_string(r->id) + " holds blocks";
  }
  for (int32_t b = 0; b < pool.capacity(); ++b) {
    if (owners[b] != 1) return "block " + std::to_string(b) + " has " + std::to_string(owners[b]) + " owners";
  }
  return "";
}

}  // namespace tessera::serve
