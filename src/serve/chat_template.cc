#include "serve/chat_template.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

namespace tessera::serve {
namespace {

constexpr std::array<std::pair<const char*, ChatTemplateStyle>, 5> kStyles = {{
    {"chatml", ChatTemplateStyle::kChatML},
    {"llama2", ChatTemplateStyle::kLlama2},
    {"llama3", ChatTemplateStyle::kLlama3},
    {"zephyr", ChatTemplateStyle::kZephyr},
    {"plain", ChatTemplateStyle::kPlain},
}};

bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

// Python's str.isspace() for one code point: what Jinja's `trim` and str.strip() remove.
bool is_python_space(uint32_t c) {
  if (c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f)) return true;
  return c == 0x85 || c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 ||
         c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

// The code point starting at s[i] and its length in bytes; invalid UTF-8 is one byte, not a space.
std::pair<uint32_t, size_t> decode_at(std::string_view s, size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  size_t len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xe ? 3 : (b >> 3) == 0x1e ? 4 : 0;
  if (len == 0 || i + len > s.size()) return {0xfffd, 1};
  uint32_t c = len == 1 ? b : b & (0x7f >> len);
  for (size_t k = 1; k < len; ++k) {
    const auto cont = static_cast<unsigned char>(s[i + k]);
    if ((cont & 0xc0) != 0x80) return {0xfffd, 1};
    c = (c << 6) | (cont & 0x3f);
  }
  return {c, len};
}

// Python's str.strip(): whitespace (Unicode, as str.isspace()) removed from both ends.
std::string_view strip(std::string_view s) {
  size_t begin = 0;
  while (begin < s.size()) {
    const auto [c, len] = decode_at(s, begin);
    if (!is_python_space(c)) break;
    begin += len;
  }
  size_t end = s.size();
  while (end > begin) {
    size_t start = end - 1;  // back up to the first byte of the last code point
    while (start > begin && (static_cast<unsigned char>(s[start]) & 0xc0) == 0x80 &&
           end - start < 4)
      --start;
    const auto [c, len] = decode_at(s, start);
    if (start + len != end || !is_python_space(c)) break;
    end = start;
  }
  return s.substr(begin, end - begin);
}

Status check_roles(const std::vector<ChatMessage>& messages) {
  if (messages.empty()) return invalid_argument("chat template: no messages");
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& r = messages[i].role;
    if (r != "system" && r != "user" && r != "assistant")
      return invalid_argument("chat template: message " + std::to_string(i) + " has role '" + r +
                              "'; the roles are system, user and assistant");
  }
  return Status();
}

// {% for m in messages %}{{'<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>' + '\n'}}
// {% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}
std::string render_chatml(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  std::string out;
  for (const ChatMessage& m : messages) {
    out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

// meta-llama/Meta-Llama-3-8B-Instruct: every message is
// '<|start_header_id|>' + role + '<|end_header_id|>\n\n' + content | trim + '<|eot_id|>', the
// first one preceded by bos_token.
std::string render_llama3(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                          std::string_view bos) {
  std::string out(bos);
  for (const ChatMessage& m : messages) {
    out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n";
    out += strip(m.content);
    out += "<|eot_id|>";
  }
  if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

// meta-llama/Llama-2-7b-chat-hf: a first system message is folded into the first user message as
// '<<SYS>>\n' + system + '\n<</SYS>>\n\n' + user; the rest must alternate user/assistant. A user
// turn is bos + '[INST] ' + content.strip() + ' [/INST]', an assistant turn
// ' ' + content.strip() + ' ' + eos. The strip applies to the folded text as a whole, so the
// system message itself keeps its spaces (as in the reference).
Result<std::string> render_llama2(const std::vector<ChatMessage>& messages, std::string_view bos,
                                  std::string_view eos) {
  size_t first = 0;
  std::string system;
  bool has_system = false;
  if (messages[0].role == "system") {
    system = messages[0].content;
    has_system = true;
    first = 1;
  }
  // The reference renders "" here; an empty prompt helps nobody.
  if (first == messages.size())
    return invalid_argument("chat template llama2: a system message needs a user message after it");
  std::string out;
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const bool want_user = (i - first) % 2 == 0;
    if ((m.role == "user") != want_user || m.role == "system") {
      return invalid_argument("chat template llama2: message " + std::to_string(i) + " has role '" +
                              m.role + "' where '" + (want_user ? "user" : "assistant") +
                              "' is expected; the roles must alternate user/assistant/user/... "
                              "after an optional first system message");
    }
    std::string content = m.content;
    if (i == first && has_system) content = "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + content;
    if (want_user) {
      out.append(bos).append("[INST] ").append(strip(content)).append(" [/INST]");
    } else {
      out.append(" ").append(strip(content)).append(" ").append(eos);
    }
  }
  return out;
}

// TinyLlama/TinyLlama-1.1B-Chat-v1.0 (zephyr): '<|' + role + '|>\n' + content + eos_token, each
// followed by the '\n' after the expression (trim_blocks removes only the ones after {% %} tags),
// and '<|assistant|>\n' after the last message with add_generation_prompt.
std::string render_zephyr(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                          std::string_view eos) {
  std::string out;
  for (const ChatMessage& m : messages) {
    out.append("<|").append(m.role).append("|>\n").append(m.content).append(eos).append("\n");
  }
  if (add_generation_prompt) out += "<|assistant|>\n";
  return out;
}

// tessera's own, for models without a chat template: "role: content" lines.
std::string render_plain(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                         std::string_view bos) {
  std::string out(bos);
  for (const ChatMessage& m : messages) out += m.role + ": " + m.content + "\n";
  if (add_generation_prompt) out += "assistant:";
  return out;
}

}  // namespace

const char* chat_template_style_name(ChatTemplateStyle style) {
  for (const auto& [name, s] : kStyles) {
    if (s == style) return name;
  }
  return "?";
}

Result<ChatTemplateStyle> parse_chat_template_style(std::string_view name) {
  std::string names;
  for (const auto& [n, s] : kStyles) {
    if (name == n) return s;
    names += names.empty() ? "" : ", ";
    names += n;
  }
  return invalid_argument("unknown chat template '" + std::string(name) + "' (known: " + names +
                          ")");
}

ChatTemplateStyle detect_chat_template(std::string_view jinja_template,
                                       const std::vector<std::string>& vocab_tokens) {
  if (contains(jinja_template, "<|im_start|>")) return ChatTemplateStyle::kChatML;
  if (contains(jinja_template, "<|start_header_id|>")) return ChatTemplateStyle::kLlama3;
  if (contains(jinja_template, "[INST]")) return ChatTemplateStyle::kLlama2;
  if (contains(jinja_template, "<|user|>") && !contains(jinja_template, "<|end|>"))
    return ChatTemplateStyle::kZephyr;
  auto has_token = [&](std::string_view t) {
    return std::find(vocab_tokens.begin(), vocab_tokens.end(), t) != vocab_tokens.end();
  };
  if (has_token("<|im_start|>")) return ChatTemplateStyle::kChatML;
  if (has_token("<|start_header_id|>")) return ChatTemplateStyle::kLlama3;
  return ChatTemplateStyle::kPlain;
}

Result<std::string> render_chat(ChatTemplateStyle style, const std::vector<ChatMessage>& messages,
                                bool add_generation_prompt, std::string_view bos_text,
                                std::string_view eos_text) {
  TESSERA_RETURN_IF_ERROR(check_roles(messages));
  switch (style) {
    case ChatTemplateStyle::kChatML: return render_chatml(messages, add_generation_prompt);
    case ChatTemplateStyle::kLlama2: return render_llama2(messages, bos_text, eos_text);
    case ChatTemplateStyle::kLlama3:
      return render_llama3(messages, add_generation_prompt, bos_text);
    case ChatTemplateStyle::kZephyr:
      return render_zephyr(messages, add_generation_prompt, eos_text);
    case ChatTemplateStyle::kPlain: return render_plain(messages, add_generation_prompt, bos_text);
  }
  return invalid_argument("chat template: unknown style");
}

}  // namespace tessera::serve
