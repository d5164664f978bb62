// Chat templates: a list of messages rendered to the prompt text a chat model was trained on.
//
// GGUF files carry the Hugging Face Jinja template as `tokenizer.chat_template`. tessera does not
// run Jinja (as llama.cpp's llm_chat_apply_template does not): it recognises the template's family
// by its markers and renders that family's format in C++, byte for byte as the reference template
// (with Hugging Face's Jinja settings, trim_blocks and lstrip_blocks) renders it.
//
// The rendered text contains the special tokens as text ("<|im_start|>", "<s>"): encode it with
// special-token parsing on and without adding BOS/EOS, since the text already has them where the
// template puts them.
//
// Thread-safe: free functions without state.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ir/status.h"

namespace tessera::serve {

enum class ChatTemplateStyle {
  kChatML,  // <|im_start|>role\ncontent<|im_end|>\n (OpenHermes, Qwen, SmolLM); no BOS
  kLlama2,  // <s>[INST] <<SYS>>\nsys\n<</SYS>>\n\nuser [/INST] answer </s>
            // (meta-llama/Llama-2-chat)
  kLlama3,  // <|begin_of_text|><|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|>
  kZephyr,  // <|user|>\ncontent</s>\n (HuggingFaceH4/zephyr, TinyLlama-1.1B-Chat); no BOS
  kPlain,   // BOS, then "role: content\n" per message, "assistant:" (base models; tessera's own)
};

// "chatml", "llama2", "llama3", "zephyr", "plain".
const char* chat_template_style_name(ChatTemplateStyle style);
// The inverse of chat_template_style_name; an unknown name is invalid_argument listing the names.
Result<ChatTemplateStyle> parse_chat_template_style(std::string_view name);

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

// The family of a model's chat template, by the first marker found, in this order:
// "<|im_start|>" ChatML, "<|start_header_id|>" Llama-3, "[INST]" Llama-2 (also Mistral-instruct and
// CodeLlama, whose formats are close to it), "<|user|>" Zephyr (but not with "<|end|>": that is
// Phi-3, which has its own end-of-turn token). When the template has none of these (or is empty:
// the file has no template), the vocabulary decides: a token "<|im_start|>" means ChatML, a token
// "<|start_header_id|>" Llama-3. Otherwise kPlain: a base model, or a template we do not know. We
// do not guess Llama-2 from the vocabulary, since base LLaMA models share the chat model's.
ChatTemplateStyle detect_chat_template(std::string_view jinja_template,
                                       const std::vector<std::string>& vocab_tokens);

// Renders messages in a style. add_generation_prompt appends the header of an assistant turn so the
// model writes the answer (Llama-2 has none: the answer follows "[/INST]" directly). bos_text and
// eos_text are the model's BOS and EOS token texts (e.g. "<s>", "</s>"; "<|begin_of_text|>" for
// Llama-3), put where the template has bos_token / eos_token: Llama-2 (both), Llama-3 (BOS once,
// before the first message), Zephyr (EOS after every message), Plain (BOS at the start; pass ""
// for none). ChatML uses neither.
//
// Errors (invalid_argument): no messages; a role other than system/user/assistant; for Llama-2,
// roles that do not alternate user/assistant/user/... after an optional first system message, or
// a system message alone.
Result<std::string> render_chat(ChatTemplateStyle style, const std::vector<ChatMessage>& messages,
                                bool add_generation_prompt, std::string_view bos_text,
                                std::string_view eos_text);

}  // namespace tessera::serve
