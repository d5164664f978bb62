#include "llm/language_model.h"

#include <algorithm>

#include "backends/native/quant_matmul.h"
#include "llm/gguf.h"
#include "llm/gguf_model.h"
#include "llm/gpt2_graph.h"

namespace tessera::llm {

Result<std::unique_ptr<LanguageModel>> LanguageModel::load_gguf(const std::string& path, const ModelOptions& opts) {
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::open(path));
  TESSERA_ASSIGN_OR_RETURN(ModelConfig config, config_from_gguf(*file));
  TESSERA_ASSIGN_OR_RETURN(WeightMap weights, load_gguf_weights(*file, config, opts.fuse_projections));
  std::optional<TokenizerVocab> vocab;
  if (file->find("tokenizer.ggml.model")) {
    TESSERA_ASSIGN_OR_RETURN(TokenizerVocab v, vocab_from_gguf(*file));
    vocab = std::move(v);
  }
  file.reset();  // the weights are copies: drop the mapping
  return create(config, std::move(weights), vocab ? &*vocab : nullptr, opts);
}

namespace {

// In place (a copy when the tensor is shared with the caller): Q4_0 and Q8_0 matrices of whole
// 16-row panels to Q4_0C / Q8_0C (AVX-512 and AVX2 have panel kernels); with `grouped_rows` (AVX-512),
// others whose rows are whole groups of four blocks to Q4_0R / Q8_0R.
void regroup_quantized(WeightMap& weights, bool grouped_rows) {
  for (auto& [name, w] : weights) {
    const bool q4 = w.type == quant::QType::kQ4_0;
    if ((!q4 && w.type != quant::QType::kQ8_0) || w.dims.size() != 2) continue;
    const bool panels = w.dims[1] % quant::kPanelRows == 0;
    if (!panels && (!grouped_rows || w.dims[0] % 128 != 0)) continue;
    if (w.data.storage().use_count() > 1) w.data = w.data.clone();
    if (panels) {
      if (q4) {
        quant::repack_q4_0_to_q4_0c(w.data.raw_data(), w.dims[1], w.dims[0]);
      } else {
        quant::repack_q8_0_to_q8_0c(w.data.raw_data(), w.dims[1], w.dims[0]);
      }
      w.type = q4 ? quant::QType::kQ4_0C : quant::QType::kQ8_0C;
      continue;
    }
    auto* bytes = static_cast<uint8_t*>(w.data.raw_data());
    const int64_t row_bytes = quant::row_bytes(w.type, w.dims[0]);
    for (int64_t r = 0; r < w.dims[1]; ++r) {
      uint8_t* row = bytes + r * row_bytes;
      if (q4) {
        quant::repack_q4_0_to_q4_0r(row, w.dims[0], row);
      } else {
        quant::repack_q8_0_to_q8_0r(row, w.dims[0], row);
      }
    }
    w.type = q4 ? quant::QType::kQ4_0R : quant::QType::kQ8_0R;
  }
}

}  // namespace

Result<std::unique_ptr<LanguageModel>> LanguageModel::create(const ModelConfig& config, WeightMap weights,
                                                             const TokenizerVocab* vocab, const ModelOptions& opts) {
  TESSERA_RETURN_IF_ERROR(config.validate());
  if (opts.threads < 1) return invalid_argument("threads must be at least 1");
  if (opts.kv_block_size < 1) return invalid_argument("the KV block size must be at least 1");
  std::unique_ptr<LanguageModel> m(new LanguageModel());
  m->config_ = config;
  m->weights_ = std::move(weights);
  // Joined first: the panel layouts interleave rows, so they cannot be joined by rows.
  if (opts.fuse_projections) fuse_projections(m->weights_, config);  // (a GGUF load has joined them already)
  const std::string qmm_path = native::quant_matmul_path(quant::QType::kQ4_0);
  if (opts.regroup_quantized && opts.backend == "native" && qmm_path != "scalar") {
    regroup_quantized(m->weights_, qmm_path == "avx512-vnni");
  }
  for (const auto& [name, w] : m->weights_) m->weight_bytes_ += static_cast<int64_t>(w.data.nbytes());
  if (vocab) {
    TESSERA_ASSIGN_OR_RETURN(m->tokenizer_, Tokenizer::create(*vocab));
    if (m->tokenizer_->vocab_size() > config.vocab_size) {
      return invalid_argument("the tokenizer has " + std::to_string(m->tokenizer_->vocab_size()) +
                              " tokens, the model's embedding only " + std::to_string(config.vocab_size));
    }
  }
  m->context_length_ = opts.context_length > 0 ? opts.context_length : config.context_length;
  if (config.arch == Architecture::kGpt2 && m->context_length_ > config.context_length) {
    return invalid_argument("GPT-2 has learned positions for " + std::to_string(config.context_length) +
                            " tokens; the context cannot be longer");
  }
  const int64_t cache_tokens = opts.kv_cache_tokens > 0 ? opts.kv_cache_tokens : std::min<int64_t>(m->context_length_, 4096);
  const int64_t blocks = (cache_tokens + opts.kv_block_size - 1) / opts.kv_block_size;
  if (blocks > (int64_t{1} << 30)) return invalid_argument("the KV cache is too large");
  m->cache_ = std::make_unique<KvCache>(config, blocks, opts.kv_block_size);
  for (int64_t l = 0; l < config.layers; ++l) {
    m->cache_inputs_[k_cache_input(l)] = m->cache_->k(l);
    m->cache_inputs_[v_cache_input(l)] = m->cache_->v(l);
  }
  const KvCacheShape cache_shape{blocks, opts.kv_block_size};
  TESSERA_ASSIGN_OR_RETURN(Graph g, config.arch == Architecture::kGpt2 ? build_gpt2_graph(config, m->weights_, cache_shape)
                                                                         : build_llama_graph(config, m->weights_, cache_shape));
  SessionOptions sopts;
  sopts.threads = opts.threads;
  sopts.backend = opts.backend;
  TESSERA_ASSIGN_OR_RETURN(m->session_, Session::from_graph(std::move(g), sopts));
  return m;
}

void LanguageModel::set_profile(bool on) {
  profile_ = on;
  session_->set_profile(on);
}

Result<Tensor> LanguageModel::step(const std::vector<StepSequence>& batch) {
  if (batch.empty()) return invalid_argument("an empty step");
  int64_t total = 0, rows = 0;
  size_t max_blocks = 1;
  for (const StepSequence& s : batch) {
    if (!s.blocks || s.tokens.empty()) return invalid_argument("every sequence of a step needs tokens");
    const int64_t end = s.blocks->length + static_cast<int64_t>(s.tokens.size());
    if (end > context_length_) {
      return invalid_argument("a sequence of " + std::to_string(end) + " tokens exceeds the context length of " +
                              std::to_string(context_length_));
    }
    for (int32_t t : s.tokens) {
      if (t < 0 || t >= config_.vocab_size) return invalid_argument("token id " + std::to_string(t) + " is outside the vocabulary");
    }
    total += static_cast<int64_t>(s.tokens.size());
    rows += s.want_logits ? 1 : 0;
  }
  if (rows == 0) return invalid_argument("a step must want logits for at least one sequence");
  // Reserve every sequence's blocks first; undo all of it if one does not fit.
  std::vector<size_t> old_sizes;
  for (const StepSequence& s : batch) old_sizes.push_back(s.blocks->blocks.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    const StepSequence& s = batch[i];
    Status st = cache_->reserve(*s.blocks, s.blocks->length + static_cast<int64_t>(s.tokens.size()));
    if (!st.ok()) {
      for (size_t j = 0; j <= i; ++j) {
        auto& blocks = batch[j].blocks->blocks;
        while (blocks.size() > old_sizes[j]) {
          cache_->pool().release(blocks.back());
          blocks.pop_back();
        }
      }
      return st;
    }
    max_blocks = std::max(max_blocks, s.blocks->blocks.size());
  }
  Tensor tokens(DType::kInt32, {total}), positions(DType::kInt32, {total}), token_seq(DType::kInt32, {total});
  Tensor tables(DType::kInt32, {static_cast<int64_t>(batch.size()), static_cast<int64_t>(max_blocks)});
  Tensor logit_rows(DType::kInt32, {rows});
  int64_t t = 0, r = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    const StepSequence& s = batch[i];
    for (size_t j = 0; j < s.tokens.size(); ++j, ++t) {
      tokens.data<int32_t>()[t] = s.tokens[j];
      positions.data<int32_t>()[t] = static_cast<int32_t>(s.blocks->length + static_cast<int64_t>(j));
      token_seq.data<int32_t>()[t] = static_cast<int32_t>(i);
    }
    if (s.want_logits) logit_rows.data<int32_t>()[r++] = static_cast<int32_t>(t - 1);
    std::copy(s.blocks->blocks.begin(), s.blocks->blocks.end(), tables.data<int32_t>() + i * max_blocks);
  }
  std::map<std::string, Tensor> inputs = cache_inputs_;
  inputs["tokens"] = tokens;
  inputs["positions"] = positions;
  inputs["token_seq"] = token_seq;
  inputs["block_tables"] = tables;
  inputs["logit_rows"] = logit_rows;
  TESSERA_ASSIGN_OR_RETURN(auto outputs, session_->run(inputs));
  for (const StepSequence& s : batch) s.blocks->length += static_cast<int64_t>(s.tokens.size());
  if (profile_) {
    const std::vector<double>& secs = session_->last_run_stats().step_seconds;
    for (size_t i = 0; i < secs.size(); ++i) {
      const std::vector<int> nodes = session_->step_nodes(static_cast<int>(i));
      if (nodes.empty()) continue;
      const Node& node = session_->graph().node(nodes[0]);
      // Per op and role: "QMatMul attn_q" for the layers' "blk.N.attn_q" nodes together.
      std::string role = node.name;
      if (const size_t dot = role.find('.', 4); role.rfind("blk.", 0) == 0 && dot != std::string::npos) role = role.substr(dot + 1);
      OpTime& t = op_times_[node.op_type + " " + role];
      t.seconds += secs[i];
      ++t.calls;
    }
  }
  return outputs.at("logits");
}

}  // namespace tessera::llm
