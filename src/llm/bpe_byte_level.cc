// Byte-level BPE (GPT-2): pre-tokenize with GPT-2's regex, map each byte to its printable stand-in
// character, then merge by rank.
#include "llm/bpe_byte_level.h"

#include <array>

#include "llm/tokenizer.h"
#include "llm/unicode_text.h"

namespace tessera::llm {
namespace {

bool is_printable_latin1(uint32_t b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

std::array<uint32_t, 256> make_byte_map() {
  std::array<uint32_t, 256> map{};
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) map[b] = is_printable_latin1(b) ? b : next++;
  return map;
}

const std::array<uint32_t, 256>& byte_map() {
  static const std::array<uint32_t, 256> map = make_byte_map();
  return map;
}

enum class CharClass { kLetter, kNumber, kSpace, kOther };

struct ClassifiedChar {
  uint32_t code_point;
  uint32_t offset;  // byte offset in the text
  CharClass cls;
};

CharClass classify(uint32_t cp) {
  if (cp == kInvalidCodePoint) return CharClass::kOther;
  if (is_letter(cp)) return CharClass::kLetter;
  if (is_number(cp)) return CharClass::kNumber;
  if (is_whitespace(cp)) return CharClass::kSpace;
  return CharClass::kOther;
}

}  // namespace

uint32_t byte_to_code_point(uint8_t byte) { return byte_map()[byte]; }

int32_t code_point_to_byte(uint32_t cp) {
  if (cp < 256 && is_printable_latin1(cp)) return static_cast<int32_t>(cp);
  if (cp < 256 || cp >= 256 + 68) return -1;  // 68 = the bytes that are not printable Latin-1
  const auto& map = byte_map();
  for (int32_t b = 0; b < 256; ++b) {
    if (map[b] == cp) return b;
  }
  return -1;
}

std::vector<std::string_view> gpt2_pre_tokenize(std::string_view text) {
  std::vector<ClassifiedChar> chars;
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Char c = decode_utf8(text, pos);
    chars.push_back({c.code_point, static_cast<uint32_t>(pos), classify(c.code_point)});
    pos += c.length;
  }
  const size_t n = chars.size();
  const auto offset = [&](size_t i) { return i < n ? chars[i].offset : text.size(); };
  const auto is = [&](size_t i, CharClass cls) { return i < n && chars[i].cls == cls; };
  const auto cp = [&](size_t i) { return i < n ? chars[i].code_point : 0; };

  std::vector<std::string_view> pieces;
  size_t i = 0;
  while (i < n) {
    size_t end = i;
    // 's|'t|'re|'ve|'m|'ll|'d
    if (cp(i) == '\'') {
      const uint32_t a = cp(i + 1), b = cp(i + 2);
      if (a == 's' || a == 't' || a == 'm' || a == 'd') {
        end = i + 2;
      } else if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) {
        end = i + 3;
      }
    }
    //  ?\p{L}+ |  ?\p{N}+ |  ?[^\s\p{L}\p{N}]+
    if (end == i) {
      const size_t start = cp(i) == ' ' && i + 1 < n && !is(i + 1, CharClass::kSpace) ? i + 1 : i;
      const CharClass cls = chars[start].cls;
      if (cls != CharClass::kSpace) {
        end = start;
        while (is(end, cls)) ++end;
      }
    }
    // \s+(?!\S) | \s+
    if (end == i) {
      size_t run_end = i;
      while (is(run_end, CharClass::kSpace)) ++run_end;
      // Leave the last space of a run to the word that follows, unless the run is one space long.
      end = (run_end < n && run_end - i > 1) ? run_end - 1 : run_end;
    }
    pieces.push_back(text.substr(offset(i), offset(end) - offset(i)));
    i = end;
  }
  return pieces;
}

void Tokenizer::encode_byte_level(std::string_view text, std::vector<int32_t>& out) const {
  std::vector<int32_t> symbols;
  for (std::string_view piece : gpt2_pre_tokenize(text)) {
    symbols.clear();
    for (char c : piece) symbols.push_back(byte_tokens_[static_cast<uint8_t>(c)]);
    merge_symbols(symbols);
    out.insert(out.end(), symbols.begin(), symbols.end());
  }
}

}  // namespace tessera::llm
