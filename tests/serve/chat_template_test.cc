#include "serve/chat_template.h"

#include <gtest/gtest.h>

namespace tessera::serve {
namespace {

// system + user + assistant + user: every turn kind, and a second user turn after an answer.
std::vector<ChatMessage> conversation() {
  return {{"system", "You are helpful."},
          {"user", "Hello!"},
          {"assistant", "Hi there."},
          {"user", "How are you?"}};
}

std::string render_ok(ChatTemplateStyle style, const std::vector<ChatMessage>& messages,
                      bool add_generation_prompt, std::string_view bos, std::string_view eos) {
  Result<std::string> r = render_chat(style, messages, add_generation_prompt, bos, eos);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? r.value() : std::string();
}

TEST(ChatTemplate, NamesRoundTrip) {
  for (ChatTemplateStyle s :
       {ChatTemplateStyle::kChatML, ChatTemplateStyle::kLlama2, ChatTemplateStyle::kLlama3,
        ChatTemplateStyle::kZephyr, ChatTemplateStyle::kPlain}) {
    Result<ChatTemplateStyle> parsed = parse_chat_template_style(chat_template_style_name(s));
    ASSERT_TRUE(parsed.ok()) << chat_template_style_name(s);
    EXPECT_EQ(*parsed, s);
  }
  EXPECT_STREQ(chat_template_style_name(ChatTemplateStyle::kChatML), "chatml");
  EXPECT_STREQ(chat_template_style_name(ChatTemplateStyle::kLlama2), "llama2");
  EXPECT_STREQ(chat_template_style_name(ChatTemplateStyle::kLlama3), "llama3");
  EXPECT_STREQ(chat_template_style_name(ChatTemplateStyle::kZephyr), "zephyr");
  EXPECT_STREQ(chat_template_style_name(ChatTemplateStyle::kPlain), "plain");
}

TEST(ChatTemplate, UnknownNameListsTheValidOnes) {
  Result<ChatTemplateStyle> r = parse_chat_template_style("ChatML");  // names are lower case
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  const std::string& msg = r.status().message();
  EXPECT_NE(msg.find("'ChatML'"), std::string::npos) << msg;
  for (const char* name : {"chatml", "llama2", "llama3", "zephyr", "plain"}) {
    EXPECT_NE(msg.find(name), std::string::npos) << msg;
  }
  EXPECT_FALSE(parse_chat_template_style("").ok());
}

TEST(ChatTemplate, ChatML) {
  EXPECT_EQ(render_ok(ChatTemplateStyle::kChatML, conversation(), true, "<s>", "</s>"),
            "<|im_start|>system\nYou are helpful.<|im_end|>\n"
            "<|im_start|>user\nHello!<|im_end|>\n"
            "<|im_start|>assistant\nHi there.<|im_end|>\n"
            "<|im_start|>user\nHow are you?<|im_end|>\n"
            "<|im_start|>assistant\n");
  // Without the generation prompt; content is not trimmed.
  EXPECT_EQ(render_ok(ChatTemplateStyle::kChatML, {{"user", " hi\n"}}, false, "", ""),
            "<|im_start|>user\n hi\n<|im_end|>\n");
}

TEST(ChatTemplate, Llama3) {
  EXPECT_EQ(render_ok(ChatTemplateStyle::kLlama3, conversation(), true, "<|begin_of_text|>",
                      "<|eot_id|>"),
            "<|begin_of_text|>"
            "<|start_header_id|>system<|end_header_id|>\n\nYou are helpful.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHello!<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHi there.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHow are you?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  // `message['content'] | trim`: both ends, all of Python's whitespace (here U+3000 and U+00A0),
  // inner whitespace kept; BOS once.
  EXPECT_EQ(render_ok(ChatTemplateStyle::kLlama3,
                      {{"user", " \n\tHello,  world \xe3\x80\x80"}, {"assistant", "\xc2\xa0ok\n"}},
                      false, "<|begin_of_text|>", ""),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello,  world<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nok<|eot_id|>");
}

TEST(ChatTemplate, Llama2) {
  const std::string expected =
      "<s>[INST] <<SYS>>\nYou are helpful.\n<</SYS>>\n\nHello! [/INST] Hi there. </s>"
      "<s>[INST] How are you? [/INST]";
  EXPECT_EQ(render_ok(ChatTemplateStyle::kLlama2, conversation(), true, "<s>", "</s>"), expected);
  // Llama-2 has no generation prompt: the answer follows "[/INST]".
  EXPECT_EQ(render_ok(ChatTemplateStyle::kLlama2, conversation(), false, "<s>", "</s>"), expected);
  // No system message; content.strip() on each turn.
  EXPECT_EQ(render_ok(ChatTemplateStyle::kLlama2, {{"user", "  Hi  "}, {"assistant", "\nYes.\n"}},
                      true, "<s>", "</s>"),
            "<s>[INST] Hi [/INST] Yes. </s>");
  // With a system message the strip applies to the folded text: the user's leading spaces stay.
  EXPECT_EQ(render_ok(ChatTemplateStyle::kLlama2, {{"system", " S "}, {"user", "  Hi  "}}, true,
                      "<s>", "</s>"),
            "<s>[INST] <<SYS>>\n S \n<</SYS>>\n\n  Hi [/INST]");
}

TEST(ChatTemplate, Zephyr) {
  EXPECT_EQ(render_ok(ChatTemplateStyle::kZephyr, conversation(), true, "<s>", "</s>"),
            "<|system|>\nYou are helpful.</s>\n"
            "<|user|>\nHello!</s>\n"
            "<|assistant|>\nHi there.</s>\n"
            "<|user|>\nHow are you?</s>\n"
            "<|assistant|>\n");
  EXPECT_EQ(render_ok(ChatTemplateStyle::kZephyr, {{"user", "x"}}, false, "<s>", "</s>"),
            "<|user|>\nx</s>\n");
}

TEST(ChatTemplate, Plain) {
  EXPECT_EQ(render_ok(ChatTemplateStyle::kPlain, conversation(), true, "<s>", "</s>"),
            "<s>system: You are helpful.\nuser: Hello!\nassistant: Hi there.\n"
            "user: How are you?\nassistant:");
  EXPECT_EQ(render_ok(ChatTemplateStyle::kPlain, {{"user", "x"}}, false, "", ""), "user: x\n");
}

TEST(ChatTemplate, UnknownRoleIsAnErrorInEveryStyle) {
  for (ChatTemplateStyle s :
       {ChatTemplateStyle::kChatML, ChatTemplateStyle::kLlama2, ChatTemplateStyle::kLlama3,
        ChatTemplateStyle::kZephyr, ChatTemplateStyle::kPlain}) {
    Result<std::string> r = render_chat(s, {{"user", "a"}, {"tool", "b"}}, true, "<s>", "</s>");
    ASSERT_FALSE(r.ok()) << chat_template_style_name(s);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("'tool'"), std::string::npos) << r.status().message();
    EXPECT_FALSE(render_chat(s, {}, true, "<s>", "</s>").ok()) << "no messages";
  }
}

TEST(ChatTemplate, Llama2RequiresAlternation) {
  const std::vector<std::vector<ChatMessage>> bad = {
      {{"user", "a"}, {"user", "b"}},
      {{"assistant", "a"}},
      {{"system", "s"}, {"assistant", "a"}},
      {{"user", "a"}, {"assistant", "b"}, {"assistant", "c"}},
      {{"user", "a"}, {"system", "s"}},
      {{"system", "s"}, {"system", "t"}, {"user", "a"}},
  };
  for (const auto& messages : bad) {
    Result<std::string> r = render_chat(ChatTemplateStyle::kLlama2, messages, true, "<s>", "</s>");
    ASSERT_FALSE(r.ok()) << messages.size();
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("alternate"), std::string::npos) << r.status().message();
  }
  // The other styles accept any order.
  EXPECT_TRUE(render_chat(ChatTemplateStyle::kChatML, bad[0], true, "", "").ok());
  // A system message alone renders "" in the reference; here it is an error.
  EXPECT_FALSE(
      render_chat(ChatTemplateStyle::kLlama2, {{"system", "s"}}, true, "<s>", "</s>").ok());
}

// Short excerpts of the templates that GGUF files carry in tokenizer.chat_template.
constexpr const char* kChatMLTemplate =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] "
    "+ '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|im_start|>assistant\\n' "
    "}}{% endif %}";
constexpr const char* kLlama3Template =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | "
    "trim "
    "+ '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}";
constexpr const char* kLlama2Template =
    "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}";
constexpr const char* kZephyrTemplate =  // TinyLlama-1.1B-Chat-v1.0
    "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + "
    "message['content'] + eos_token }}\n{% elif message['role'] == 'system' %}\n{{ '<|system|>\n' "
    "+ message['content'] + eos_token }}";
constexpr const char* kPhi3Template =
    "{% for message in messages %}{% if message['role'] == 'user' %}{{'<|user|>' + '\\n' + "
    "message['content'] + '<|end|>' + '\\n' + '<|assistant|>' + '\\n'}}";
constexpr const char* kGemmaTemplate =
    "{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}";

TEST(ChatTemplate, DetectsTheFamilyFromTheTemplate) {
  const std::vector<std::string> no_vocab;
  EXPECT_EQ(detect_chat_template(kChatMLTemplate, no_vocab), ChatTemplateStyle::kChatML);
  EXPECT_EQ(detect_chat_template(kLlama3Template, no_vocab), ChatTemplateStyle::kLlama3);
  EXPECT_EQ(detect_chat_template(kLlama2Template, no_vocab), ChatTemplateStyle::kLlama2);
  EXPECT_EQ(detect_chat_template(kZephyrTemplate, no_vocab), ChatTemplateStyle::kZephyr);
  // Phi-3 has <|user|> but ends turns with <|end|>: not Zephyr. Gemma: not a family we render.
  EXPECT_EQ(detect_chat_template(kPhi3Template, no_vocab), ChatTemplateStyle::kPlain);
  EXPECT_EQ(detect_chat_template(kGemmaTemplate, no_vocab), ChatTemplateStyle::kPlain);
  // The template wins over the vocabulary.
  EXPECT_EQ(detect_chat_template(kLlama2Template, {"<s>", "<|im_start|>"}),
            ChatTemplateStyle::kLlama2);
}

TEST(ChatTemplate, WithoutATemplateDetectsFromTheVocabulary) {
  EXPECT_EQ(detect_chat_template("", {"<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"}),
            ChatTemplateStyle::kChatML);
  EXPECT_EQ(detect_chat_template("", {"<|begin_of_text|>", "<|start_header_id|>", "<|eot_id|>"}),
            ChatTemplateStyle::kLlama3);
  // A LLaMA-1/2 vocabulary is the same for base and chat models: plain.
  EXPECT_EQ(detect_chat_template("", {"<unk>", "<s>", "</s>", "[INST]", "<|user|>"}),
            ChatTemplateStyle::kPlain);
  EXPECT_EQ(detect_chat_template("", {}), ChatTemplateStyle::kPlain);
  // Only whole tokens count, not substrings of tokens.
  EXPECT_EQ(detect_chat_template("", {"x<|im_start|>"}), ChatTemplateStyle::kPlain);
  // An unrecognised template falls back to the vocabulary too.
  EXPECT_EQ(detect_chat_template(kGemmaTemplate, {"<|im_start|>"}), ChatTemplateStyle::kChatML);
}

}  // namespace
}  // namespace tessera::serve
