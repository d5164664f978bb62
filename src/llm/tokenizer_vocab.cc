// Readers of vocabulary files into TokenizerVocab: GPT-2's encoder.json + vocab.bpe, Hugging Face
// tokenizer.json, and the export of llama-tokenizer-js (scripts/llama_vocab_export.mjs).
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "llm/tokenizer.h"

namespace tessera::llm {
namespace {

using nlohmann::json;

Result<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("cannot open " + path);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return io_error("cannot read " + path);
  return text.str();
}

Result<json> read_json_file(const std::string& path) {
  TESSERA_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return invalid_argument(path + ": not valid JSON");
  return doc;
}

// tokens[id] = text for a {"text": id, ...} object; every id in 0..size-1 exactly once.
Status tokens_from_id_map(const json& map, size_t min_size, std::vector<std::string>* tokens) {
  if (!map.is_object()) return invalid_argument("the vocabulary is not a {token: id} object");
  tokens->assign(std::max(map.size(), min_size), std::string());
  std::vector<bool> seen(tokens->size(), false);
  for (const auto& [text, id] : map.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() >= static_cast<int64_t>(tokens->size())) {
      return invalid_argument("token '" + text + "' has id " + id.dump() + ", not in 0.." +
                              std::to_string(tokens->size() - 1));
    }
    const size_t i = id.get<size_t>();
    if (seen[i]) return invalid_argument("id " + std::to_string(i) + " is given to two tokens");
    seen[i] = true;
    (*tokens)[i] = text;
  }
  return Status::ok_status();
}

int32_t find_token(const std::vector<std::string>& tokens, std::string_view text) {
  for (size_t id = 0; id < tokens.size(); ++id) {
    if (tokens[id] == text) return static_cast<int32_t>(id);
  }
  return -1;
}

Status read_merges(const json& merges, std::vector<std::string>* out) {
  if (!merges.is_array()) return invalid_argument("merges is not an array");
  out->reserve(merges.size());
  for (const json& m : merges) {
    if (m.is_string()) {
      out->push_back(m.get<std::string>());
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      out->push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
    } else {
      return invalid_argument("merge " + std::to_string(out->size()) +
                              " is neither \"a b\" nor [a, b]");
    }
  }
  return Status::ok_status();
}

bool contains_type(const json& node, std::string_view type) {
  if (node.is_object()) {
    const auto it = node.find("type");
    if (it != node.end() && it->is_string() && it->get<std::string>() == type) return true;
    for (const auto& [key, value] : node.items()) {
      if (contains_type(value, type)) return true;
    }
  } else if (node.is_array()) {
    for (const json& item : node) {
      if (contains_type(item, type)) return true;
    }
  }
  return false;
}

Result<TokenizerVocab> hf_vocab_from_json(const json& doc) {
  if (!doc.is_object() || !doc.contains("model") || !doc["model"].is_object()) {
    return invalid_argument("no \"model\" object");
  }
  const json& model = doc["model"];
  if (!model.contains("type") || model["type"] != "BPE") {
    return unimplemented("only BPE tokenizer models are supported (model.type is " +
                         (model.contains("type") ? model["type"].dump() : std::string("missing")) +
                         ")");
  }
  TokenizerVocab vocab;
  const bool byte_fallback = model.value("byte_fallback", false);
  vocab.model = byte_fallback || contains_type(doc, "Metaspace") ? "llama" : "gpt2";
  if (vocab.model == "gpt2" && !contains_type(doc, "ByteLevel")) {
    return unimplemented("a BPE tokenizer.json without ByteLevel or byte fallback");
  }
  // The pre-tokenizer regex is GPT-2's unless a Split step says otherwise (llama 3, qwen2, ...).
  if (vocab.model == "gpt2" && contains_type(doc, "Split")) vocab.pre = "hf-split";

  // Added tokens may lie past the model's vocabulary.
  size_t size = 0;
  const json empty = json::array();
  const json& added = doc.contains("added_tokens") ? doc["added_tokens"] : empty;
  if (!added.is_array()) return invalid_argument("added_tokens is not an array");
  for (const json& t : added) {
    if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() ||
        t["id"].get<int64_t>() < 0 || t["id"].get<int64_t>() >= (1 << 30) ||
        !t.contains("content") || !t["content"].is_string()) {
      return invalid_argument("added token " + t.dump() + " lacks a valid id or content");
    }
    size = std::max(size, t["id"].get<size_t>() + 1);
  }
  if (!model.contains("vocab")) return invalid_argument("model has no vocab");
  // Ids of added tokens may be absent from model.vocab; fill those holes below.
  std::vector<std::string> tokens;
  {
    const json& map = model["vocab"];
    if (!map.is_object()) return invalid_argument("model.vocab is not a {token: id} object");
    size_t max_id = 0;
    for (const auto& [text, id] : map.items()) {
      if (id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < (1 << 30)) {
        max_id = std::max(max_id, id.get<size_t>());
      }
    }
    TESSERA_RETURN_IF_ERROR(tokens_from_id_map(map, std::max(size, max_id + 1), &tokens));
  }
  vocab.tokens = std::move(tokens);
  vocab.token_types.assign(vocab.tokens.size(), kTokenNormal);
  for (const json& t : added) {
    const size_t id = t["id"].get<size_t>();
    vocab.tokens[id] = t["content"].get<std::string>();
    vocab.token_types[id] = t.value("special", false) ? kTokenControl : kTokenUserDefined;
  }
  if (model.contains("merges"))
    TESSERA_RETURN_IF_ERROR(read_merges(model["merges"], &vocab.merges));

  if (vocab.model == "llama") {
    for (size_t id = 0; id < vocab.tokens.size(); ++id) {
      const std::string& text = vocab.tokens[id];
      if (text.size() == 6 && text.rfind("<0x", 0) == 0 && text.back() == '>')
        vocab.token_types[id] = kTokenByte;
    }
    vocab.bos_id = find_token(vocab.tokens, "<s>");
    vocab.eos_id = find_token(vocab.tokens, "</s>");
    vocab.add_bos = vocab.bos_id >= 0;
    // Newer files say prepend_scheme "never" / "first" on their Metaspace step.
    const std::string dump = doc.contains("pre_tokenizer") ? doc["pre_tokenizer"].dump() : "";
    vocab.add_space_prefix = dump.find("\"never\"") == std::string::npos;
  } else {
    vocab.eos_id = find_token(vocab.tokens, "<|endoftext|>");
    vocab.bos_id = vocab.eos_id;
    vocab.add_space_prefix = false;
  }
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    vocab.unk_id = find_token(vocab.tokens, model["unk_token"].get<std::string>());
  }
  return vocab;
}

}  // namespace

Result<TokenizerVocab> load_gpt2_vocab(const std::string& encoder_json_path,
                                       const std::string& vocab_bpe_path) {
  TESSERA_ASSIGN_OR_RETURN(json encoder, read_json_file(encoder_json_path));
  TokenizerVocab vocab;
  vocab.model = "gpt2";
  vocab.add_space_prefix = false;
  TESSERA_RETURN_IF_ERROR(
      tokens_from_id_map(encoder, 0, &vocab.tokens).with_context(encoder_json_path));

  TESSERA_ASSIGN_OR_RETURN(std::string bpe, read_text_file(vocab_bpe_path));
  std::istringstream lines(bpe);
  std::string line;
  bool first = true;
  while (std::getline(lines, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (first && line.rfind("#version", 0) == 0) {
      first = false;
      continue;
    }
    first = false;
    if (!line.empty()) vocab.merges.push_back(line);
  }
  vocab.token_types.assign(vocab.tokens.size(), kTokenNormal);
  vocab.eos_id = find_token(vocab.tokens, "<|endoftext|>");
  if (vocab.eos_id >= 0) {
    vocab.bos_id = vocab.eos_id;
    vocab.token_types[vocab.eos_id] = kTokenControl;
  }
  return vocab;
}

Result<TokenizerVocab> load_hf_tokenizer_json(const std::string& tokenizer_json_path) {
  TESSERA_ASSIGN_OR_RETURN(json doc, read_json_file(tokenizer_json_path));
  try {
    Result<TokenizerVocab> vocab = hf_vocab_from_json(doc);
    if (!vocab.ok()) return vocab.status().with_context(tokenizer_json_path);
    return vocab;
  } catch (
      const json::exception& e) {  // a field of an unexpected type that slipped past the checks
    return invalid_argument(tokenizer_json_path + ": " + e.what());
  }
}

Result<TokenizerVocab> load_llama_vocab_export(const std::string& path) {
  TESSERA_ASSIGN_OR_RETURN(json doc, read_json_file(path));
  const auto fail = [&](const std::string& why) { return invalid_argument(path + ": " + why); };
  if (!doc.is_object()) return fail("not a JSON object");
  TokenizerVocab vocab;
  try {
    vocab.model = doc.value("model", std::string("llama"));
    if (!doc.contains("tokens") || !doc["tokens"].is_array()) return fail("no \"tokens\" array");
    for (const json& t : doc["tokens"]) {
      if (!t.is_string()) return fail("a token is not a string");
      vocab.tokens.push_back(t.get<std::string>());
    }
    if (doc.contains("types")) {
      if (!doc["types"].is_array()) return fail("\"types\" is not an array");
      for (const json& t : doc["types"]) {
        if (!t.is_number_integer()) return fail("a token type is not an integer");
        vocab.token_types.push_back(t.get<int32_t>());
      }
    }
    if (doc.contains("scores")) {
      if (!doc["scores"].is_array()) return fail("\"scores\" is not an array");
      for (const json& s : doc["scores"]) {
        if (!s.is_number()) return fail("a score is not a number");
        vocab.scores.push_back(s.get<float>());
      }
    }
    if (doc.contains("merges")) {
      Status st = read_merges(doc["merges"], &vocab.merges);
      if (!st.ok()) return st.with_context(path);
    }
    for (auto [key, field] :
         {std::pair{"bos_id", &vocab.bos_id}, std::pair{"eos_id", &vocab.eos_id},
          std::pair{"unk_id", &vocab.unk_id}, std::pair{"pad_id", &vocab.pad_id}}) {
      if (!doc.contains(key)) continue;
      if (!doc[key].is_number_integer()) return fail(std::string(key) + " is not an integer");
      *field = doc[key].get<int32_t>();
    }
    vocab.add_bos = doc.value("add_bos", vocab.bos_id >= 0);
    vocab.add_space_prefix = doc.value("add_space_prefix", true);
  } catch (const json::exception& e) {
    return fail(e.what());
  }
  return vocab;
}

Status scores_from_merges(TokenizerVocab& v) {
  std::unordered_map<std::string, int32_t> ids;
  for (size_t id = 0; id < v.tokens.size(); ++id) ids.emplace(v.tokens[id], static_cast<int32_t>(id));
  v.scores.assign(v.tokens.size(), -1e9f);
  std::vector<bool> scored(v.tokens.size(), false);
  for (size_t rank = 0; rank < v.merges.size(); ++rank) {
    std::string merged = v.merges[rank];
    const size_t space = merged.find(' ');
    if (space == std::string::npos) return invalid_argument("merge '" + v.merges[rank] + "' is not two tokens");
    merged.erase(space, 1);
    auto it = ids.find(merged);
    if (it == ids.end()) return invalid_argument("merge '" + v.merges[rank] + "' makes no token of the vocabulary");
    if (!scored[it->second]) {
      v.scores[it->second] = -static_cast<float>(rank);
      scored[it->second] = true;
    }
  }
  v.merges.clear();
  return Status();
}

}  // namespace tessera::llm
