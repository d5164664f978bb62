// SentencePiece-style BPE (llama.cpp's "SPM"): spaces become "▁", each UTF-8 character starts as
// its own token (or as <0xXX> byte tokens when the vocabulary lacks it), then adjacent pairs merge.
#include <string>

#include "llm/tokenizer.h"
#include "llm/unicode_text.h"

namespace tessera::llm {

void Tokenizer::encode_sentencepiece(std::string_view text, bool add_prefix,
                                     std::vector<int32_t>& out) const {
  static constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581 "▁"
  std::vector<int32_t> symbols;
  const auto add_char = [&](std::string_view bytes) {
    const auto it = token_ids_.find(std::string(bytes));
    if (it != token_ids_.end() && token_type(it->second) != kTokenControl) {
      symbols.push_back(it->second);
      return;
    }
    for (char b : bytes) {
      const int32_t id = byte_tokens_[static_cast<uint8_t>(b)];
      if (id >= 0) {
        symbols.push_back(id);
      } else if (vocab_.unk_id >= 0) {
        symbols.push_back(vocab_.unk_id);
      }
    }
  };
  if (add_prefix) add_char(kSpace);
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Char c = decode_utf8(text, pos);
    if (text[pos] == ' ') {
      add_char(kSpace);
    } else {
      add_char(text.substr(pos, c.length));
    }
    pos += c.length;
  }
  merge_symbols(symbols);
  out.insert(out.end(), symbols.begin(), symbols.end());
}

}  // namespace tessera::llm
