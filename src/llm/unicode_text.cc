#include "llm/unicode_text.h"

#include <algorithm>

namespace tessera::llm {
namespace {

bool in_ranges(const CodePointRange* ranges, size_t n, uint32_t cp) {
  const CodePointRange* end = ranges + n;
  // The first range whose last >= cp.
  const CodePointRange* it = std::lower_bound(
      ranges, end, cp, [](const CodePointRange& r, uint32_t v) { return r.last < v; });
  return it != end && it->first <= cp;
}

}  // namespace

size_t utf8_sequence_length(unsigned char lead) {
  if (lead < 0xC2) return 1;  // ASCII, continuation bytes, overlong 2-byte leads
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  if (lead < 0xF5) return 4;
  return 1;
}

Utf8Char decode_utf8(std::string_view text, size_t pos) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(pos);
  if (lead < 0x80) return {lead, 1};
  const size_t n = utf8_sequence_length(lead);
  if (n == 1 || pos + n > text.size()) return {kInvalidCodePoint, 1};
  uint32_t cp = lead & (0x7F >> n);
  for (size_t i = 1; i < n; ++i) {
    const unsigned char c = byte(pos + i);
    if ((c & 0xC0) != 0x80) return {kInvalidCodePoint, 1};
    cp = (cp << 6) | (c & 0x3F);
  }
  // Overlong 3/4-byte forms, surrogates and values past U+10FFFF are not valid UTF-8.
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
      (cp >= 0xD800 && cp <= 0xDFFF)) {
    return {kInvalidCodePoint, 1};
  }
  return {cp, static_cast<uint32_t>(n)};
}

std::string encode_utf8(uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

bool is_letter(uint32_t cp) {
  return in_ranges(unicode_tables::kLetterRanges, unicode_tables::kLetterRanges_size, cp);
}

bool is_number(uint32_t cp) {
  return in_ranges(unicode_tables::kNumberRanges, unicode_tables::kNumberRanges_size, cp);
}

bool is_whitespace(uint32_t cp) {
  if (cp < 0x80) return cp == ' ' || (cp >= '\t' && cp <= '\r');
  return cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
         cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000 || cp == 0xFEFF;
}

}  // namespace tessera::llm
