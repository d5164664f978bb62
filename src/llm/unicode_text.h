// UTF-8 decoding and the few Unicode character classes the tokenizers need.
//
// Invalid input is never an error here: a byte that does not start a valid, complete UTF-8
// sequence decodes as one "character" of length 1 with code point kInvalidCodePoint, so callers
// keep every input byte and never read past the end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tessera::llm {

struct CodePointRange {
  uint32_t first;
  uint32_t last;  // inclusive
};

namespace unicode_tables {
extern const CodePointRange kLetterRanges[];
extern const size_t kLetterRanges_size;
extern const CodePointRange kNumberRanges[];
extern const size_t kNumberRanges_size;
}  // namespace unicode_tables

inline constexpr uint32_t kInvalidCodePoint = 0xFFFFFFFFu;

struct Utf8Char {
  uint32_t code_point;  // kInvalidCodePoint for a byte that is not valid UTF-8 here
  uint32_t length;      // bytes, >= 1 (whenever pos < text.size())
};

// The character starting at text[pos]; requires pos < text.size().
Utf8Char decode_utf8(std::string_view text, size_t pos);

// How many bytes a UTF-8 sequence starting with `lead` has (1 for ASCII and for invalid lead
// bytes).
size_t utf8_sequence_length(unsigned char lead);

// The UTF-8 bytes of a code point (which must be <= 0x10FFFF).
std::string encode_utf8(uint32_t code_point);

bool is_letter(uint32_t code_point);  // \p{L}
bool is_number(uint32_t code_point);  // \p{N}
// JavaScript's (and ECMAScript regex) \s: ASCII whitespace, NBSP, the Unicode Zs spaces, line and
// paragraph separators, and the byte order mark.
bool is_whitespace(uint32_t code_point);

}  // namespace tessera::llm
