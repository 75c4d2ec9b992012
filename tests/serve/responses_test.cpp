// Response objects checked field by field against the OpenAI API reference: text_completion,
// chat.completion, their logprobs formats, and usage.
#include <gtest/gtest.h>

#include "serve/chat_response.h"
#include "serve/completion_response.h"

namespace day0 {
namespace {

using nlohmann::ordered_json;

const ResponseMeta kMeta{"cmpl-0123", 1700000000, "gpt-oss-20b"};

std::vector<std::string> keys_of(const ordered_json& j) {
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  return keys;
}

using Keys = std::vector<std::string>;

TEST(ResponseCommon, response_ids_are_prefix_and_32_hex_digits) {
  EXPECT_EQ(response_id("chatcmpl", 0x0123456789abcdefull, 0xfull), "chatcmpl-0123456789abcdef000000000000000f");
}

TEST(ResponseCommon, usage_totals_prompt_and_completion_tokens) {
  EXPECT_EQ(usage_json({12, 30}), ordered_json::parse(R"({"prompt_tokens": 12, "completion_tokens": 30, "total_tokens": 42})"));
}

TEST(ResponseCommon, logprobs_print_as_short_decimals_and_minus_infinity_as_minus_9999) {
  EXPECT_EQ(logprob_json(-0.1053605f).dump(), "-0.1053605");
  EXPECT_EQ(logprob_json(-INFINITY).get<double>(), -9999.0);
  EXPECT_EQ(logprob_json(NAN).get<double>(), -9999.0);
  EXPECT_EQ(logprob_json(0.f).get<double>(), 0.0);
}

TEST(ResponseCommon, partial_utf8_token_text_becomes_a_replacement_character_and_json_never_throws) {
  EXPECT_EQ(token_string("\xe2\x82"), "\xef\xbf\xbd");
  EXPECT_EQ(token_string("ok"), "ok");
  EXPECT_NO_THROW(json_text(ordered_json("bad \xff byte")));
}

TEST(CompletionResponse, has_the_openai_fields_in_order) {
  const ordered_json j = completion_response(kMeta, {" there", FinishReason::length, std::nullopt}, {3, 2});
  EXPECT_EQ(keys_of(j), (Keys{"id", "object", "created", "model", "choices", "usage"}));
  EXPECT_EQ(j["id"], "cmpl-0123");
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["created"], 1700000000);
  EXPECT_EQ(j["model"], "gpt-oss-20b");
  ASSERT_EQ(j["choices"].size(), 1u);
  const ordered_json& c = j["choices"][0];
  EXPECT_EQ(keys_of(c), (Keys{"index", "text", "logprobs", "finish_reason"}));
  EXPECT_EQ(c["index"], 0);
  EXPECT_EQ(c["text"], " there");
  EXPECT_TRUE(c["logprobs"].is_null());
  EXPECT_EQ(c["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["total_tokens"], 5);
}

TEST(CompletionResponse, logprobs_use_the_legacy_format_with_the_sampled_token_among_the_top) {
  const std::vector<LogprobEntry> lp = {
      {{"He", -0.5f}, {{"He", -0.5f}, {"She", -1.25f}}},
      {{"llo", -2.0f}, {{"y", -0.25f}, {"\xc3", -1.0f}}},  // sampled token not in the top: added
      {{"\xc3\xa9!", -0.125f}, {}},
  };
  const ordered_json j = completion_logprobs_json(lp, 0);
  EXPECT_EQ(keys_of(j), (Keys{"tokens", "token_logprobs", "top_logprobs", "text_offset"}));
  EXPECT_EQ(j["tokens"], ordered_json::parse(R"(["He", "llo", "é!"])"));
  EXPECT_EQ(j["token_logprobs"], ordered_json::parse("[-0.5, -2.0, -0.125]"));
  EXPECT_EQ(j["top_logprobs"][0], ordered_json::parse(R"({"He": -0.5, "She": -1.25})"));
  EXPECT_EQ(keys_of(j["top_logprobs"][1]), (Keys{"y", "\xef\xbf\xbd", "llo"}));
  EXPECT_EQ(j["top_logprobs"][2], ordered_json::parse(R"({"é!": -0.125})"));
  EXPECT_EQ(j["text_offset"], ordered_json::parse("[0, 2, 5]"));  // characters, not bytes
  EXPECT_EQ(completion_logprobs_json(lp, 10)["text_offset"][0], 10);
}

TEST(CompletionResponse, stream_chunks_carry_text_then_the_finish_and_usage_null_when_asked) {
  const ordered_json chunk = completion_chunk(kMeta, "Hi", nullptr, FinishReason::none, true);
  EXPECT_EQ(keys_of(chunk), (Keys{"id", "object", "created", "model", "choices", "usage"}));
  EXPECT_EQ(chunk["object"], "text_completion");
  EXPECT_EQ(chunk["choices"][0]["text"], "Hi");
  EXPECT_TRUE(chunk["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(chunk["usage"].is_null());
  EXPECT_FALSE(completion_chunk(kMeta, "Hi", nullptr, FinishReason::none, false).contains("usage"));
  const ordered_json usage = completion_usage_chunk(kMeta, {4, 5});
  EXPECT_TRUE(usage["choices"].is_array() && usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["total_tokens"], 9);
}

TEST(ChatResponse, has_the_openai_fields_in_order) {
  const ResponseMeta meta{"chatcmpl-9", 1700000001, "gpt-oss-20b"};
  const ordered_json j = chat_completion_response(meta, {"Hello!", std::nullopt, nullptr, FinishReason::stop, std::nullopt}, {9, 3});
  EXPECT_EQ(keys_of(j), (Keys{"id", "object", "created", "model", "choices", "usage"}));
  EXPECT_EQ(j["object"], "chat.completion");
  const ordered_json& c = j["choices"][0];
  EXPECT_EQ(keys_of(c), (Keys{"index", "message", "logprobs", "finish_reason"}));
  EXPECT_EQ(c["message"], ordered_json::parse(R"({"role": "assistant", "content": "Hello!", "refusal": null})"));
  EXPECT_TRUE(c["logprobs"].is_null());
  EXPECT_EQ(c["finish_reason"], "stop");
  EXPECT_EQ(j["usage"], ordered_json::parse(R"({"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12})"));
}

TEST(ChatResponse, reasoning_and_tool_calls_are_reported_and_tool_calls_finish_as_tool_calls) {
  const ordered_json calls = ordered_json::parse(
      R"([{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}])");
  const ordered_json j = chat_completion_response(kMeta, {"", "thinking...", calls, FinishReason::stop, std::nullopt}, {1, 1});
  const ordered_json& m = j["choices"][0]["message"];
  EXPECT_EQ(m["reasoning_content"], "thinking...");
  EXPECT_EQ(m["tool_calls"], calls);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
  const ordered_json cut = chat_completion_response(kMeta, {"", std::nullopt, calls, FinishReason::length, std::nullopt}, {1, 1});
  EXPECT_EQ(cut["choices"][0]["finish_reason"], "length");
}

TEST(ChatResponse, logprobs_list_token_logprob_bytes_and_top_alternatives) {
  const std::vector<LogprobEntry> lp = {{{"\xc3\xa9", -0.25f}, {{"\xc3\xa9", -0.25f}, {"e", -1.5f}}},
                                        {{"\xe2\x82", -3.0f}, {}}};
  const ordered_json j = chat_logprobs_json(lp);
  EXPECT_EQ(keys_of(j), (Keys{"content", "refusal"}));
  EXPECT_TRUE(j["refusal"].is_null());
  const ordered_json& first = j["content"][0];
  EXPECT_EQ(keys_of(first), (Keys{"token", "logprob", "bytes", "top_logprobs"}));
  EXPECT_EQ(first["token"], "é");
  EXPECT_EQ(first["logprob"], -0.25);
  EXPECT_EQ(first["bytes"], ordered_json::parse("[195, 169]"));
  EXPECT_EQ(first["top_logprobs"][1], ordered_json::parse(R"({"token": "e", "logprob": -1.5, "bytes": [101]})"));
  // A token holding part of a character: the text is repaired, the bytes are exact.
  EXPECT_EQ(j["content"][1]["token"], "\xef\xbf\xbd");
  EXPECT_EQ(j["content"][1]["bytes"], ordered_json::parse("[226, 130]"));
  EXPECT_TRUE(j["content"][1]["top_logprobs"].empty());

  const ordered_json full = chat_completion_response(kMeta, {"é", std::nullopt, nullptr, FinishReason::stop, lp}, {1, 2});
  EXPECT_EQ(full["choices"][0]["logprobs"], j);
}

TEST(ChatResponse, chunks_have_a_delta_and_usage_chunks_have_no_choices) {
  const ordered_json chunk = chat_chunk(kMeta, ordered_json::parse(R"({"content": "x"})"), nullptr, FinishReason::none, false);
  EXPECT_EQ(keys_of(chunk), (Keys{"id", "object", "created", "model", "choices"}));
  EXPECT_EQ(chunk["object"], "chat.completion.chunk");
  EXPECT_EQ(keys_of(chunk["choices"][0]), (Keys{"index", "delta", "logprobs", "finish_reason"}));
  const ordered_json usage = chat_usage_chunk(kMeta, {1, 2});
  EXPECT_EQ(usage["object"], "chat.completion.chunk");
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 2);
}

}  // namespace
}  // namespace day0
