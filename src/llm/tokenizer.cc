// Tokenizer: validation, the shared BPE merge loop, special tokens, decoding and streaming.
#include "llm/tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <queue>

#include "llm/bpe_byte_level.h"
#include "llm/unicode_text.h"

namespace tessera::llm {
namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581 "▁"

std::string format_byte_token(int byte) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "<0x%02X>", byte);
  return buf;
}

// "<0x0A>" -> 10; -1 if the text is not a byte token.
int parse_byte_token(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  int value = 0;
  for (char c : text.substr(3, 2)) {
    value <<= 4;
    if (c >= '0' && c <= '9') {
      value |= c - '0';
    } else if (c >= 'A' && c <= 'F') {
      value |= c - 'A' + 10;
    } else {
      return -1;
    }
  }
  return value;
}

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  for (size_t pos = 0;;) {
    const size_t hit = text.find(from, pos);
    if (hit == std::string_view::npos) {
      out.append(text.substr(pos));
      return out;
    }
    out.append(text.substr(pos, hit - pos)).append(to);
    pos = hit + from.size();
  }
}

// The bytes a byte-level token stands for; nullopt-like false if a character maps to no byte.
bool byte_level_bytes(std::string_view text, std::string* bytes) {
  bytes->clear();
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Char c = decode_utf8(text, pos);
    const int32_t b = c.code_point == kInvalidCodePoint ? -1 : code_point_to_byte(c.code_point);
    if (b < 0) return false;
    bytes->push_back(static_cast<char>(b));
    pos += c.length;
  }
  return true;
}

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::create(TokenizerVocab vocab) {
  std::unique_ptr<Tokenizer> tokenizer(new Tokenizer());
  tokenizer->vocab_ = std::move(vocab);
  TESSERA_RETURN_IF_ERROR(tokenizer->init().with_context("tokenizer vocabulary"));
  return tokenizer;
}

int32_t Tokenizer::token_type(int32_t id) const {
  return vocab_.token_types.empty() ? kTokenNormal : vocab_.token_types[id];
}

Status Tokenizer::init() {
  const TokenizerVocab& v = vocab_;
  if (v.model != "gpt2" && v.model != "llama") {
    return invalid_argument("unknown tokenizer model '" + v.model + "' (expected gpt2 or llama)");
  }
  byte_level_ = v.model == "gpt2";
  if (byte_level_ && !v.pre.empty() && v.pre != "default" && v.pre != "gpt2") {
    return unimplemented("pre-tokenizer '" + v.pre + "' (only GPT-2's regex is implemented)");
  }
  const size_t n = v.tokens.size();
  if (n == 0) return invalid_argument("no tokens");
  if (n > (1u << 30)) return invalid_argument("too many tokens: " + std::to_string(n));
  if (!v.scores.empty() && v.scores.size() != n) {
    return invalid_argument(std::to_string(v.scores.size()) + " scores for " + std::to_string(n) +
                            " tokens");
  }
  if (!v.token_types.empty() && v.token_types.size() != n) {
    return invalid_argument(std::to_string(v.token_types.size()) + " token types for " +
                            std::to_string(n) + " tokens");
  }
  for (size_t id = 0; id < v.token_types.size(); ++id) {
    if (v.token_types[id] < kTokenNormal || v.token_types[id] > kTokenByte) {
      return invalid_argument("token " + std::to_string(id) + " has unknown type " +
                              std::to_string(v.token_types[id]));
    }
  }
  const std::pair<const char*, int32_t> special_ids[] = {
      {"bos", v.bos_id}, {"eos", v.eos_id}, {"unk", v.unk_id}, {"pad", v.pad_id}};
  for (const auto& [name, id] : special_ids) {
    if (id < -1 || id >= static_cast<int64_t>(n)) {
      return invalid_argument(std::string(name) + " id " + std::to_string(id) +
                              " is not a token id (" + std::to_string(n) + " tokens)");
    }
  }
  if (v.add_bos && v.bos_id < 0) return invalid_argument("add_bos is set but there is no bos id");

  // Token texts; a duplicate keeps its first id (some published vocabularies repeat padding
  // tokens).
  token_ids_.reserve(n);
  for (size_t id = 0; id < n; ++id) token_ids_.emplace(v.tokens[id], static_cast<int32_t>(id));

  // Raw bytes per token, and byte -> token.
  pieces_.resize(n);
  std::fill(std::begin(byte_tokens_), std::end(byte_tokens_), -1);
  for (size_t id = 0; id < n; ++id) {
    const std::string& text = v.tokens[id];
    const int32_t type = token_type(static_cast<int32_t>(id));
    if (type == kTokenControl || type == kTokenUserDefined || type == kTokenUnknown) {
      pieces_[id] = text;
    } else if (byte_level_) {
      if (!byte_level_bytes(text, &pieces_[id])) pieces_[id] = text;
    } else {
      const int byte = parse_byte_token(text);
      if (byte >= 0 && (type == kTokenByte || v.token_types.empty())) {
        pieces_[id] = std::string(1, static_cast<char>(byte));
        if (byte_tokens_[byte] < 0) byte_tokens_[byte] = static_cast<int32_t>(id);
      } else {
        pieces_[id] = replace_all(text, kSpaceMarker, " ");
      }
    }
  }
  if (byte_level_) {
    for (int b = 0; b < 256; ++b) {
      const auto it = token_ids_.find(encode_utf8(byte_to_code_point(static_cast<uint8_t>(b))));
      if (it == token_ids_.end()) {
        return invalid_argument("byte-level vocabulary has no token for byte " +
                                format_byte_token(b) + " ('" +
                                encode_utf8(byte_to_code_point(static_cast<uint8_t>(b))) + "')");
      }
      byte_tokens_[b] = it->second;
    }
    if (v.merges.empty()) return invalid_argument("byte-level BPE needs merges");
  }

  // Merges: "left right" in rank order.
  merges_.reserve(v.merges.size());
  for (size_t rank = 0; rank < v.merges.size(); ++rank) {
    const std::string& merge = v.merges[rank];
    const size_t space = merge.find(' ');
    const auto fail = [&](const std::string& why) {
      return invalid_argument("merge " + std::to_string(rank) + " '" + merge + "': " + why);
    };
    if (space == std::string::npos || merge.find(' ', space + 1) != std::string::npos) {
      return fail("expected two tokens separated by one space");
    }
    const std::string left = merge.substr(0, space), right = merge.substr(space + 1);
    const auto l = token_ids_.find(left), r = token_ids_.find(right),
               m = token_ids_.find(left + right);
    if (l == token_ids_.end()) return fail("'" + left + "' is not a token");
    if (r == token_ids_.end()) return fail("'" + right + "' is not a token");
    if (m == token_ids_.end()) return fail("'" + left + right + "' is not a token");
    merges_.emplace(pair_key(l->second, r->second),
                    MergeTarget{static_cast<double>(rank), m->second});
  }
  if (!byte_level_ && v.merges.empty()) {
    if (v.scores.empty()) return invalid_argument("a llama vocabulary needs scores or merges");
    merges_by_score_ = true;
  }

  // Special tokens that parse_special recognizes, longest first.
  for (size_t id = 0; id < n; ++id) {
    const int32_t type = token_type(static_cast<int32_t>(id));
    if ((type == kTokenControl || type == kTokenUserDefined) && !v.tokens[id].empty()) {
      special_by_first_byte_[static_cast<uint8_t>(v.tokens[id][0])].push_back(
          static_cast<int32_t>(id));
    }
  }
  for (auto& bucket : special_by_first_byte_) {
    std::stable_sort(bucket.begin(), bucket.end(),
                     [&](int32_t a, int32_t b) { return v.tokens[a].size() > v.tokens[b].size(); });
  }

  if (v.eos_id >= 0) end_of_generation_ids_.push_back(v.eos_id);
  for (const char* text : {"<|endoftext|>", "<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|end|>"}) {
    const auto it = token_ids_.find(text);
    if (it != token_ids_.end()) end_of_generation_ids_.push_back(it->second);
  }
  return Status::ok_status();
}

bool Tokenizer::find_merge(int32_t left, int32_t right, MergeTarget* target) const {
  if (!merges_by_score_) {
    const auto it = merges_.find(pair_key(left, right));
    if (it == merges_.end()) return false;
    *target = it->second;
    return true;
  }
  const auto it = token_ids_.find(vocab_.tokens[left] + vocab_.tokens[right]);
  if (it == token_ids_.end() || token_type(it->second) != kTokenNormal) return false;
  *target = {-static_cast<double>(vocab_.scores[it->second]), it->second};
  return true;
}

void Tokenizer::merge_symbols(std::vector<int32_t>& symbols) const {
  const int32_t n = static_cast<int32_t>(symbols.size());
  if (n < 2) return;
  struct Candidate {
    double priority;
    int32_t left, right;  // positions
    int32_t left_id, right_id, merged_id;
  };
  // Best (lowest) priority first; ties go to the leftmost pair.
  const auto worse = [](const Candidate& a, const Candidate& b) {
    return a.priority != b.priority ? a.priority > b.priority : a.left > b.left;
  };
  std::priority_queue<Candidate, std::vector<Candidate>, decltype(worse)> queue(worse);
  std::vector<int32_t> prev(n), next(n);
  std::vector<int32_t>& ids = symbols;
  for (int32_t i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  const auto try_add = [&](int32_t left) {
    if (left < 0 || next[left] < 0) return;
    const int32_t right = next[left];
    MergeTarget target;
    if (find_merge(ids[left], ids[right], &target)) {
      queue.push({target.priority, left, right, ids[left], ids[right], target.merged_id});
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i) try_add(i);
  std::vector<bool> alive(n, true);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    if (!alive[c.left] || !alive[c.right] || next[c.left] != c.right || ids[c.left] != c.left_id ||
        ids[c.right] != c.right_id) {
      continue;  // stale: one side has merged since
    }
    ids[c.left] = c.merged_id;
    alive[c.right] = false;
    next[c.left] = next[c.right];
    if (next[c.left] >= 0) prev[next[c.left]] = c.left;
    try_add(prev[c.left]);
    try_add(c.left);
  }
  int32_t out = 0;
  for (int32_t i = 0; i < n; ++i) {
    if (alive[i]) symbols[out++] = ids[i];
  }
  symbols.resize(out);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  std::vector<int32_t> out;
  if (add_special && vocab_.add_bos) out.push_back(vocab_.bos_id);
  // As llama.cpp: the space prefix goes before the first text fragment and after each special
  // token.
  bool after_special = true;
  const auto encode_fragment = [&](std::string_view fragment) {
    if (fragment.empty()) return;
    if (byte_level_) {
      encode_byte_level(fragment, out);
    } else {
      encode_sentencepiece(fragment, vocab_.add_space_prefix && after_special, out);
    }
    after_special = false;
  };
  if (!parse_special) {
    encode_fragment(text);
    return out;
  }
  size_t fragment_start = 0;
  for (size_t pos = 0; pos < text.size();) {
    int32_t special = -1;
    for (int32_t id : special_by_first_byte_[static_cast<uint8_t>(text[pos])]) {
      if (text.substr(pos, vocab_.tokens[id].size()) == vocab_.tokens[id]) {
        special = id;
        break;
      }
    }
    if (special < 0) {
      ++pos;
      continue;
    }
    encode_fragment(text.substr(fragment_start, pos - fragment_start));
    out.push_back(special);
    after_special = true;
    pos += vocab_.tokens[special].size();
    fragment_start = pos;
  }
  encode_fragment(text.substr(fragment_start));
  return out;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  std::string out;
  // llama: the text after a leading BOS starts with the space that encoding prefixed; drop it.
  bool strip_space = !byte_level_ && vocab_.add_space_prefix && !ids.empty() &&
                     vocab_.bos_id >= 0 && ids[0] == vocab_.bos_id;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || id >= vocab_size()) continue;
    if (skip_special && token_type(id) == kTokenControl) continue;
    std::string_view piece = pieces_[id];
    if (strip_space && i > 0) {
      if (!piece.empty() && piece[0] == ' ') piece.remove_prefix(1);
      strip_space = false;
    }
    out.append(piece);
  }
  return out;
}

std::string Tokenizer::token_to_piece(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return "";
  return pieces_[id];
}

bool Tokenizer::is_end_of_generation(int32_t id) const {
  return id >= 0 && std::find(end_of_generation_ids_.begin(), end_of_generation_ids_.end(), id) !=
                        end_of_generation_ids_.end();
}

std::string StreamDecoder::push(int32_t id) {
  pending_ += tokenizer_.token_to_piece(id);
  // Hold back a trailing sequence that is still incomplete (at most 3 bytes of a 4-byte one).
  size_t complete = pending_.size();
  for (size_t back = 1; back <= 3 && back <= pending_.size(); ++back) {
    const auto c = static_cast<unsigned char>(pending_[pending_.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back for its lead
    if (utf8_sequence_length(c) > back) complete = pending_.size() - back;
    break;
  }
  std::string out = pending_.substr(0, complete);
  pending_.erase(0, complete);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace tessera::llm
