// Tokenizers for language models: byte-level BPE (GPT-2 and the models that reuse its scheme) and
// SentencePiece-style BPE with byte fallback (LLaMA 1/2, what llama.cpp calls "SPM").
//
// A Tokenizer is built once from a TokenizerVocab (what GGUF's tokenizer.ggml.* metadata holds, or
// what the loaders below read from other vocabulary files) and is then immutable: encode/decode are
// const and safe to call from several threads at once. Any text is accepted, including invalid
// UTF-8 (its bytes are kept: byte tokens for both models), so encode never fails.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ir/status.h"

namespace tessera::llm {

// GGUF token types (tokenizer.ggml.token_type).
enum TokenType : int32_t {
  kTokenNormal = 1,
  kTokenUnknown = 2,
  kTokenControl = 3,
  kTokenUserDefined = 4,
  kTokenUnused = 5,
  kTokenByte = 6,
};

// What GGUF's tokenizer.ggml.* metadata holds; also filled from other vocabulary files.
struct TokenizerVocab {
  std::string model;  // "gpt2" (byte-level BPE) or "llama" (SentencePiece-style BPE)
  std::string pre;    // pre-tokenizer name (GGUF tokenizer.ggml.pre), "" = default for the model
  std::vector<std::string> tokens;  // id -> token text (byte-level: GPT-2's unicode-mapped bytes;
                                    // llama: "▁" for spaces, "<0x0A>" byte tokens)
  std::vector<float> scores;  // llama: merge priority (higher merges first); may be empty for gpt2
  std::vector<int32_t> token_types;  // TokenType per id; may be empty (= all normal)
  std::vector<std::string> merges;   // "a b" pairs in rank order; gpt2: required; llama: optional,
                                     // used instead of scores when present
  int32_t bos_id = -1, eos_id = -1, unk_id = -1, pad_id = -1;
  bool add_bos = false;  // prepend BOS when encoding with add_special
  // llama: prepend "▁" to the text (SentencePiece's add_dummy_prefix)
  bool add_space_prefix = true;
};

class Tokenizer {
 public:
  // Validates the vocabulary: a known model, unique tokens, ids and per-token arrays in range,
  // merges that name existing tokens and produce one, and the byte tokens the model needs.
  static Result<std::unique_ptr<Tokenizer>> create(TokenizerVocab vocab);

  // add_special: BOS first (if vocab.add_bos). parse_special: control and user-defined token texts
  // in the input ("<|endoftext|>", "<s>") become their ids; otherwise they are plain text.
  std::vector<int32_t> encode(std::string_view text, bool add_special = true,
                              bool parse_special = false) const;
  // Ids out of range decode to nothing. skip_special drops control tokens (BOS, EOS, ...). For
  // llama, the space that encoding prefixed is removed after a leading BOS, as llama.cpp does.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special = true) const;
  // The raw bytes this token stands for (may be a partial UTF-8 sequence); "" for an id out of
  // range.
  std::string token_to_piece(int32_t id) const;

  int32_t vocab_size() const { return static_cast<int32_t>(vocab_.tokens.size()); }
  int32_t bos_id() const { return vocab_.bos_id; }
  int32_t eos_id() const { return vocab_.eos_id; }
  // EOS, and the end-of-turn tokens of known vocabularies (<|endoftext|>, <|eot_id|>, <|im_end|>,
  // <|end|>).
  bool is_end_of_generation(int32_t id) const;
  const TokenizerVocab& vocab() const { return vocab_; }

 private:
  struct MergeTarget {
    double priority;  // lower merges first
    int32_t merged_id;
  };

  Tokenizer() = default;
  Status init();
  int32_t token_type(int32_t id) const;
  bool find_merge(int32_t left, int32_t right, MergeTarget* target) const;
  // Merges adjacent symbols, best priority first (ties: leftmost), until no pair merges.
  void merge_symbols(std::vector<int32_t>& symbols) const;
  // One fragment of text without special tokens (bpe_byte_level.cc, bpe_sentencepiece.cc).
  void encode_byte_level(std::string_view text, std::vector<int32_t>& out) const;
  void encode_sentencepiece(std::string_view text, bool add_prefix,
                            std::vector<int32_t>& out) const;

  TokenizerVocab vocab_;
  bool byte_level_ = false;
  std::unordered_map<std::string, int32_t> token_ids_;
  std::unordered_map<uint64_t, MergeTarget> merges_;  // (left << 32 | right) -> target
  bool merges_by_score_ = false;     // llama without merges: any pair whose text is a token
  std::vector<std::string> pieces_;  // id -> raw bytes
  int32_t byte_tokens_[256] =
      {};  // byte -> id (gpt2: its mapped char; llama: <0xXX>, -1 if absent)
  std::vector<int32_t> special_by_first_byte_[256];  // parse_special candidates, longest first
  std::vector<int32_t> end_of_generation_ids_;
};

// Streams text while tokens arrive: feed ids one by one, get back only complete UTF-8 (holds
// partial sequences until completed). Invalid bytes are passed through once they cannot become
// valid. For llama, the space before the first piece is kept (generated text follows a prompt).
// The tokenizer must outlive the decoder; one decoder per stream (not thread-safe).
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  std::string push(int32_t id);
  // Whatever is held back (an unfinished sequence at the end of the stream).
  std::string flush();

 private:
  const Tokenizer& tokenizer_;
  std::string pending_;
};

// GPT-2's encoder.json (token text -> id) and vocab.bpe (merges; first line a "#version" comment).
Result<TokenizerVocab> load_gpt2_vocab(const std::string& encoder_json_path,
                                       const std::string& vocab_bpe_path);
// Hugging Face tokenizer.json: BPE models (byte-level GPT-2 style, or llama style with
// byte_fallback) plus added_tokens.
Result<TokenizerVocab> load_hf_tokenizer_json(const std::string& tokenizer_json_path);
// The file scripts/llama_vocab_export.mjs writes from llama-tokenizer-js:
// {"model":"llama","tokens":[...],"types":[...],"merges":["a b",...],"bos_id":1,...}.
Result<TokenizerVocab> load_llama_vocab_export(const std::string& path);
// SentencePiece-style scores from a llama vocabulary's merge ranks (what GGUF files carry: scores,
// no merges): a token scores minus the rank of the first merge that makes it, tokens no merge
// makes -1e9. The merges are dropped; encoding gives the same ids.
Status scores_from_merges(TokenizerVocab& vocab);

}  // namespace tessera::llm
