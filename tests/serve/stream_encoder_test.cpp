// Streams as the client sees them: SSE events in order, chat's role delta first, the finish chunk,
// the usage chunk only when asked, [DONE] last; an error after the start is one event then [DONE].
#include "serve/stream_encoder.h"

#include <gtest/gtest.h>

#include "serve/sse.h"

namespace day0 {
namespace {

using nlohmann::ordered_json;

const ResponseMeta kMeta{"chatcmpl-1", 1700000000, "gpt-oss-20b"};

// One token's logprob entry with no alternatives, or with itself as the only one.
std::vector<LogprobEntry> entry(const std::string& bytes, float logprob, bool self_as_top = false) {
  LogprobEntry e;
  e.token = TokenText{bytes, logprob};
  if (self_as_top) e.top.push_back(e.token);
  return {e};
}

// Concatenates in call order (the operands of + are evaluated in no fixed order).
template <class... Parts>
std::string in_order(Parts... parts) {
  std::string out;
  ((out += parts()), ...);
  return out;
}

// The JSON payloads of "data: ...\n\n" events; "[DONE]" as a string.
std::vector<ordered_json> events(const std::string& sse) {
  std::vector<ordered_json> out;
  std::size_t at = 0;
  while (at < sse.size()) {
    EXPECT_EQ(sse.compare(at, 6, "data: "), 0) << sse.substr(at);
    const std::size_t end = sse.find("\n\n", at);
    EXPECT_NE(end, std::string::npos);
    const std::string data = sse.substr(at + 6, end - at - 6);
    EXPECT_EQ(data.find('\n'), std::string::npos);
    out.push_back(data == "[DONE]" ? ordered_json("[DONE]") : ordered_json::parse(data));
    at = end + 2;
  }
  return out;
}

TEST(Sse, frames_events_and_done) {
  EXPECT_EQ(sse_event(ordered_json::parse(R"({"a": "x\ny"})")), "data: {\"a\":\"x\\ny\"}\n\n");
  EXPECT_EQ(sse_done(), "data: [DONE]\n\n");
}

TEST(StreamEncoder, chat_stream_sends_role_then_content_then_finish_then_done) {
  StreamEncoder s(Endpoint::chat, kMeta, false, false);
  const auto e = events(in_order([&] { return s.start(); }, [&] { return s.delta("Hel"); }, [&] { return s.delta(""); },
                                  [&] { return s.delta("lo"); }, [&] { return s.finish(FinishReason::stop, {5, 2}); }));
  ASSERT_EQ(e.size(), 5u);
  EXPECT_EQ(e[0]["choices"][0]["delta"], ordered_json::parse(R"({"role": "assistant", "content": ""})"));
  EXPECT_TRUE(e[0]["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(e[1]["choices"][0]["delta"], ordered_json::parse(R"({"content": "Hel"})"));
  EXPECT_EQ(e[2]["choices"][0]["delta"]["content"], "lo");
  EXPECT_TRUE(e[3]["choices"][0]["delta"].empty());
  EXPECT_EQ(e[3]["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(e[4], "[DONE]");
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(e[i]["id"], "chatcmpl-1");
    EXPECT_EQ(e[i]["object"], "chat.completion.chunk");
    EXPECT_FALSE(e[i].contains("usage"));
  }
}

TEST(StreamEncoder, include_usage_adds_null_usage_to_every_chunk_and_a_final_usage_chunk) {
  StreamEncoder s(Endpoint::chat, kMeta, true, false);
  const auto e = events(in_order([&] { return s.start(); }, [&] { return s.delta("x"); },
                                  [&] { return s.finish(FinishReason::length, {7, 1}); }));
  ASSERT_EQ(e.size(), 5u);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_TRUE(e[i].contains("usage") && e[i]["usage"].is_null());
  EXPECT_TRUE(e[3]["choices"].empty());
  EXPECT_EQ(e[3]["usage"], ordered_json::parse(R"({"prompt_tokens": 7, "completion_tokens": 1, "total_tokens": 8})"));
  EXPECT_EQ(e[4], "[DONE]");
}

TEST(StreamEncoder, completion_stream_has_no_role_chunk_and_counts_text_offsets_across_chunks) {
  StreamEncoder s(Endpoint::completions, ResponseMeta{"cmpl-2", 1, "m"}, false, true);
  EXPECT_EQ(s.start(), "");
  const auto first = entry("h\xc3\xa9", -0.5f), second = entry("llo", -0.25f);
  const auto e = events(in_order([&] { return s.delta("h\xc3\xa9", first); }, [&] { return s.delta("llo", second); },
                                  [&] { return s.finish(FinishReason::stop, {1, 2}); }));
  ASSERT_EQ(e.size(), 4u);
  EXPECT_EQ(e[0]["object"], "text_completion");
  EXPECT_EQ(e[0]["choices"][0]["text"], "hé");
  EXPECT_EQ(e[0]["choices"][0]["logprobs"]["text_offset"][0], 0);
  EXPECT_EQ(e[1]["choices"][0]["logprobs"]["text_offset"][0], 2);
  EXPECT_EQ(e[2]["choices"][0]["text"], "");
  EXPECT_EQ(e[2]["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(e[2]["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(e[3], "[DONE]");
}

TEST(StreamEncoder, chat_chunks_carry_logprobs_when_asked) {
  StreamEncoder s(Endpoint::chat, kMeta, false, true);
  const auto e = events(s.delta("a", entry("a", -1.0f, true)));
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0]["choices"][0]["logprobs"]["content"][0]["token"], "a");
  EXPECT_EQ(e[0]["choices"][0]["logprobs"]["content"][0]["top_logprobs"][0]["logprob"], -1.0);
}

TEST(StreamEncoder, an_error_after_the_start_is_one_error_event_then_done) {
  StreamEncoder s(Endpoint::chat, kMeta, false, false);
  const auto e = events(in_order([&] { return s.start(); },
                                  [&] { return s.fail(ApiError{503, "engine failed", "unavailable_error", "", ""}); }));
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[1], ordered_json::parse(
                      R"({"error": {"message": "engine failed", "type": "unavailable_error", "param": null, "code": null}})"));
  EXPECT_EQ(e[2], "[DONE]");
}

}  // namespace
}  // namespace day0
