// Internals of the byte-level BPE tokenizer, exposed for tests.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace tessera::llm {

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes map to themselves, the others to U+0100 on.
uint32_t byte_to_code_point(uint8_t byte);
// The inverse; -1 for a code point that stands for no byte.
int32_t code_point_to_byte(uint32_t code_point);

// Splits text as GPT-2's pre-tokenizer regex does (JavaScript semantics, as gpt-3-encoder runs it):
// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// The pieces cover the text exactly; invalid UTF-8 bytes count as neither letter, number nor space.
std::vector<std::string_view> gpt2_pre_tokenize(std::string_view text);

}  // namespace tessera::llm
