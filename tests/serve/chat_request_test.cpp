// POST /v1/chat/completions bodies: messages per role, content parts, tools passed through, the
// template input; each bad input is its own case with a 400 naming the exact place (V2, V4).
#include "serve/chat_request.h"

#include <gtest/gtest.h>

#include "serve_test_util.h"

namespace day0 {
namespace {

using nlohmann::ordered_json;
using serve_test::expect_bad_request;
using serve_test::test_config;

ApiResult<ChatRequest> parse(const std::string& body) { return parse_chat_request(body, test_config()); }

const char* kUser = R"({"role": "user", "content": "hi"})";

// {"messages": [<message>]}
ApiResult<ChatRequest> with_message(const std::string& message) { return parse(R"({"messages": [)" + message + "]}"); }

// {"messages": [user hi], <field>: <value>}
ApiResult<ChatRequest> with(const std::string& field, const std::string& value) {
  return parse(std::string(R"({"messages": [)") + kUser + "], \"" + field + "\": " + value + "}");
}

// ---- good requests ----

TEST(ChatRequest, minimal_request_gets_defaults_and_a_generation_prompt) {
  const auto r = with_message(kUser);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->model, "gpt-oss-20b");
  EXPECT_EQ(r->messages, ordered_json::parse(R"([{"role": "user", "content": "hi"}])"));
  EXPECT_TRUE(r->tools.is_null());
  EXPECT_TRUE(r->add_generation_prompt);
  EXPECT_FALSE(r->max_tokens.has_value());
  EXPECT_FALSE(r->sampling.logprobs);
}

TEST(ChatRequest, a_whole_conversation_with_a_tool_round_trip_is_normalised_for_the_template) {
  const auto r = parse(R"({"model": "gpt-oss-20b", "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "developer", "content": [{"type": "text", "text": "Use tools."}]},
      {"role": "user", "name": "ann", "content": [{"type": "text", "text": "Weather"}, {"type": "text", "text": "in Oslo?"}]},
      {"role": "assistant", "content": null, "reasoning_content": "need the tool",
       "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 3}"},
      {"role": "assistant", "content": "3 degrees."}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather now",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
    "tool_choice": "auto", "parallel_tool_calls": false, "reasoning_effort": "high",
    "chat_template_kwargs": {"builtin_tools": []}, "add_generation_prompt": true})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const ordered_json& m = r->messages;
  ASSERT_EQ(m.size(), 6u);
  EXPECT_EQ(m[1]["content"], "Use tools.");
  EXPECT_EQ(m[2]["content"], "Weather\nin Oslo?");  // text parts joined as vLLM joins them
  EXPECT_EQ(m[2]["name"], "ann");
  EXPECT_TRUE(m[3]["content"].is_null());
  EXPECT_EQ(m[3]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(m[3]["reasoning_content"], "need the tool");
  EXPECT_EQ(m[4]["tool_call_id"], "call_1");
  EXPECT_EQ(r->tool_choice, "auto");
  EXPECT_EQ(r->tools[0]["function"]["parameters"]["required"][0], "city");

  const ordered_json input = chat_template_input(*r);
  std::vector<std::string> keys;
  for (const auto& [k, v] : input.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"messages", "tools", "add_generation_prompt", "builtin_tools", "reasoning_effort"}));
  EXPECT_EQ(input["reasoning_effort"], "high");
  // The schema keeps the client's key order (templates print it).
  std::vector<std::string> schema_keys;
  for (const auto& [k, v] : input["tools"][0]["function"]["parameters"].items()) schema_keys.push_back(k);
  EXPECT_EQ(schema_keys, (std::vector<std::string>{"type", "properties", "required"}));
}

TEST(ChatRequest, sampling_and_logprob_fields_round_trip) {
  const auto r = parse(std::string(R"({"messages": [)") + kUser + R"(], "max_completion_tokens": 64, "max_tokens": 8,
      "temperature": 0.2, "top_p": 0.8, "seed": 7, "stop": "\n\n", "logprobs": true, "top_logprobs": 5,
      "stream": true, "stream_options": {"include_usage": false}, "frequency_penalty": 1, "n": 1,
      "response_format": {"type": "text"}, "user": "x"})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->max_tokens, 64);  // max_completion_tokens wins over the deprecated max_tokens
  EXPECT_EQ(r->max_tokens_param, "max_completion_tokens");
  EXPECT_EQ(r->sampling.temperature, 0.2);
  EXPECT_EQ(r->sampling.seed, 7u);
  EXPECT_EQ(r->sampling.stop, (std::vector<std::string>{"\n\n"}));
  EXPECT_TRUE(r->sampling.logprobs);
  EXPECT_EQ(r->sampling.top_logprobs, 5);
  EXPECT_EQ(r->sampling.frequency_penalty, 1.0);
  EXPECT_TRUE(r->stream);
  EXPECT_FALSE(r->include_usage);
}

TEST(ChatRequest, the_deprecated_max_tokens_is_used_alone) {
  const auto r = with("max_tokens", "12");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->max_tokens, 12);
  EXPECT_EQ(r->max_tokens_param, "max_tokens");
}

TEST(ChatRequest, an_assistant_refusal_part_and_an_empty_string_content_are_accepted) {
  const auto r = parse(R"({"messages": [{"role": "user", "content": ""},
      {"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]}, {"role": "user", "content": "please"}]})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->messages[1]["content"], "no");
}

// ---- messages ----

TEST(ChatRequest, missing_messages_are_refused) { expect_bad_request(parse("{}"), "messages", "required"); }
TEST(ChatRequest, empty_messages_are_refused) { expect_bad_request(parse(R"({"messages": []})"), "messages", "must not be empty"); }
TEST(ChatRequest, messages_not_an_array_are_refused) { expect_bad_request(parse(R"({"messages": "hi"})"), "messages", "array"); }
TEST(ChatRequest, too_many_messages_are_refused) {
  std::string body = R"({"messages": [)";
  for (int i = 0; i <= 4096; ++i) body += (i ? "," : "") + std::string(kUser);
  expect_bad_request(parse(body + "]}"), "messages", "at most 4096 messages, got 4097");
}
TEST(ChatRequest, a_message_that_is_not_an_object_is_refused) { expect_bad_request(with_message(R"("hi")"), "messages[0]", "JSON object"); }
TEST(ChatRequest, a_message_without_role_is_refused) { expect_bad_request(with_message(R"({"content": "hi"})"), "messages[0].role", "required"); }
TEST(ChatRequest, an_unknown_role_is_refused) {
  expect_bad_request(with_message(R"({"role": "wizard", "content": "hi"})"), "messages[0].role", "got 'wizard'");
}
TEST(ChatRequest, a_role_of_the_wrong_type_is_refused) { expect_bad_request(with_message(R"({"role": 1, "content": "hi"})"), "messages[0].role", "string"); }
TEST(ChatRequest, null_user_content_is_refused) {
  expect_bad_request(with_message(R"({"role": "user", "content": null})"), "messages[0].content", "must not be null");
}
TEST(ChatRequest, missing_user_content_is_refused) { expect_bad_request(with_message(R"({"role": "user"})"), "messages[0].content", "required"); }
TEST(ChatRequest, numeric_content_is_refused) {
  expect_bad_request(with_message(R"({"role": "user", "content": 42})"), "messages[0].content", "got an integer");
}
TEST(ChatRequest, an_empty_content_part_array_is_refused) {
  expect_bad_request(with_message(R"({"role": "user", "content": []})"), "messages[0].content", "empty array");
}
TEST(ChatRequest, an_image_part_is_refused_as_unsupported) {
  expect_bad_request(with_message(R"({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x"}}]})"),
                     "messages[0].content[0].type", "'image_url' is not supported");
}
TEST(ChatRequest, a_text_part_without_text_is_refused) {
  expect_bad_request(with_message(R"({"role": "user", "content": [{"type": "text"}]})"), "messages[0].content[0].text", "required");
}
TEST(ChatRequest, a_text_part_with_numeric_text_is_refused) {
  expect_bad_request(with_message(R"({"role": "user", "content": [{"type": "text", "text": 1}]})"), "messages[0].content[0].text", "string");
}
TEST(ChatRequest, a_content_part_with_an_unknown_field_is_refused) {
  expect_bad_request(with_message(R"({"role": "user", "content": [{"type": "text", "text": "a", "cache": 1}]})"),
                     "messages[0].content[0].cache", "Unrecognized");
}
TEST(ChatRequest, a_refusal_part_in_a_user_message_is_refused) {
  expect_bad_request(with_message(R"({"role": "user", "content": [{"type": "refusal", "refusal": "no"}]})"),
                     "messages[0].content[0].type", "not supported");
}
TEST(ChatRequest, an_assistant_message_without_content_or_tool_calls_is_refused) {
  expect_bad_request(parse(std::string(R"({"messages": [)") + kUser + R"(, {"role": "assistant", "content": null}]})"),
                     "messages[1].content", "required without tool_calls");
}
TEST(ChatRequest, a_tool_message_without_tool_call_id_is_refused) {
  expect_bad_request(with_message(R"({"role": "tool", "content": "42"})"), "messages[0].tool_call_id", "required");
}
TEST(ChatRequest, an_unknown_message_field_is_refused) {
  expect_bad_request(with_message(R"({"role": "user", "content": "hi", "mood": "happy"})"), "messages[0].mood", "Unrecognized");
}
TEST(ChatRequest, tool_calls_on_a_user_message_are_refused) {
  expect_bad_request(with_message(R"({"role": "user", "content": "hi", "tool_calls": []})"), "messages[0].tool_calls", "Unrecognized");
}
TEST(ChatRequest, a_tool_call_without_function_is_refused) {
  expect_bad_request(with_message(R"({"role": "assistant", "tool_calls": [{"id": "c", "type": "function"}]})"),
                     "messages[0].tool_calls[0].function", "required");
}
TEST(ChatRequest, a_tool_call_with_object_arguments_is_refused) {
  expect_bad_request(with_message(R"({"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": {}}}]})"),
                     "messages[0].tool_calls[0].function.arguments", "string");
}

// ---- tools ----

TEST(ChatRequest, tools_not_an_array_are_refused) { expect_bad_request(with("tools", "{}"), "tools", "array"); }
TEST(ChatRequest, a_tool_of_another_type_is_refused) {
  expect_bad_request(with("tools", R"([{"type": "retrieval"}])"), "tools[0].type", "'function'");
}
TEST(ChatRequest, a_tool_function_without_name_is_refused) {
  expect_bad_request(with("tools", R"([{"type": "function", "function": {"description": "x"}}])"), "tools[0].function.name", "non-empty");
}
TEST(ChatRequest, a_tool_schema_that_is_not_an_object_is_refused) {
  expect_bad_request(with("tools", R"([{"type": "function", "function": {"name": "f", "parameters": "string"}}])"),
                     "tools[0].function.parameters", "JSON Schema object");
}
TEST(ChatRequest, tool_choice_required_is_refused) { expect_bad_request(with("tool_choice", R"("required")"), "tool_choice", "not supported"); }
TEST(ChatRequest, a_named_tool_choice_is_refused) {
  expect_bad_request(with("tool_choice", R"({"type": "function", "function": {"name": "f"}})"), "tool_choice", "not supported");
}
TEST(ChatRequest, tool_choice_of_the_wrong_type_is_refused) { expect_bad_request(with("tool_choice", "1"), "tool_choice", "'auto' or 'none'"); }

// ---- chat-only fields ----

TEST(ChatRequest, logprobs_not_a_boolean_is_refused) { expect_bad_request(with("logprobs", "5"), "logprobs", "boolean"); }
TEST(ChatRequest, top_logprobs_above_twenty_is_refused) {
  expect_bad_request(parse(std::string(R"({"messages": [)") + kUser + R"(], "logprobs": true, "top_logprobs": 21})"),
                     "top_logprobs", "[0, 20], got 21");
}
TEST(ChatRequest, top_logprobs_without_logprobs_is_refused) { expect_bad_request(with("top_logprobs", "2"), "top_logprobs", "needs logprobs"); }
TEST(ChatRequest, max_completion_tokens_zero_is_refused) { expect_bad_request(with("max_completion_tokens", "0"), "max_completion_tokens", "got 0"); }
TEST(ChatRequest, reasoning_effort_out_of_the_list_is_refused) {
  expect_bad_request(with("reasoning_effort", R"("extreme")"), "reasoning_effort", "'low', 'medium' or 'high'");
}
TEST(ChatRequest, chat_template_kwargs_not_an_object_is_refused) { expect_bad_request(with("chat_template_kwargs", "[]"), "chat_template_kwargs", "object"); }
TEST(ChatRequest, chat_template_kwargs_may_not_replace_the_messages) {
  expect_bad_request(with("chat_template_kwargs", R"({"messages": []})"), "chat_template_kwargs.messages", "request field");
}
TEST(ChatRequest, n_above_one_is_refused) { expect_bad_request(with("n", "2"), "n", "n must be 1"); }
TEST(ChatRequest, json_schema_response_format_is_refused) {
  expect_bad_request(with("response_format", R"({"type": "json_schema", "json_schema": {}})"), "response_format", "not supported");
}
TEST(ChatRequest, the_legacy_functions_field_is_refused_by_name) { expect_bad_request(with("functions", "[]"), "functions", "Unrecognized"); }
TEST(ChatRequest, temperature_out_of_range_is_refused) { expect_bad_request(with("temperature", "-0.5"), "temperature", "[0, 2]"); }
TEST(ChatRequest, unknown_model_is_404) {
  const auto r = with("model", R"("nope")");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().http_status, 404);
  EXPECT_EQ(r.error().code, "model_not_found");
}

}  // namespace
}  // namespace day0
