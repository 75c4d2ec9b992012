// RELIABILITY.md E1 and a light F5: every refusal of either endpoint is an OpenAI error object that
// leaks nothing, and mutated requests (truncated, bytes flipped, fields retyped) never throw or crash.
#include <gtest/gtest.h>

#include <random>

#include "serve/chat_request.h"
#include "serve/completion_request.h"
#include "serve_test_util.h"

namespace day0 {
namespace {

using nlohmann::ordered_json;
using serve_test::expect_error_schema;
using serve_test::test_config;

const std::vector<std::string> kCompletionSeeds = {
    R"({"model": "gpt-oss-20b", "prompt": "Hello", "max_tokens": 8, "temperature": 0.5, "stop": ["\n"], "logprobs": 2})",
    R"({"prompt": [1, 2, 3], "stream": true, "stream_options": {"include_usage": true}, "seed": 5, "top_k": 4})",
    R"({"prompt": ["x"], "logit_bias": {"12": -3}, "stop_token_ids": [7], "min_p": 0.1, "n": 1})",
};
const std::vector<std::string> kChatSeeds = {
    R"({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": [{"type": "text", "text": "t"}]}],
        "max_completion_tokens": 9, "logprobs": true, "top_logprobs": 3, "tools": [{"type": "function",
        "function": {"name": "f", "parameters": {"type": "object"}}}], "tool_choice": "auto"})",
    R"({"messages": [{"role": "user", "content": "u"}, {"role": "assistant", "content": null, "tool_calls":
        [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c", "content": "r"}], "reasoning_effort": "low", "stream": true})",
};

// Both endpoints on one body: either accepted, or refused with a well-formed error.
void check_both(const std::string& body) {
  ASSERT_NO_THROW({
    const auto c = parse_completion_request(body, test_config());
    if (!c.ok()) expect_error_schema(c.error());
    const auto h = parse_chat_request(body, test_config());
    if (!h.ok()) expect_error_schema(h.error());
  }) << body;
}

TEST(ErrorSchema, the_seed_requests_are_valid) {
  for (const auto& s : kCompletionSeeds) EXPECT_TRUE(parse_completion_request(s, test_config()).ok()) << s;
  for (const auto& s : kChatSeeds) EXPECT_TRUE(parse_chat_request(s, test_config()).ok()) << s;
}

TEST(ErrorSchema, every_field_retyped_to_every_json_kind_is_accepted_or_refused_cleanly) {
  const std::vector<std::string> values = {"null", "true", "-1", "0", "1.5", "1e308", "18446744073709551616",
                                           R"("")", R"("text")", "[]", "[1]", R"(["a"])", "{}", R"({"type": "text"})"};
  std::vector<std::string> seeds = kCompletionSeeds;
  seeds.insert(seeds.end(), kChatSeeds.begin(), kChatSeeds.end());
  for (const std::string& seed : seeds) {
    const ordered_json base = ordered_json::parse(seed);
    for (const auto& [key, unused] : base.items()) {
      for (const std::string& v : values) {
        ordered_json j = base;
        j[key] = ordered_json::parse(v);
        check_both(j.dump());
      }
    }
  }
}

TEST(ErrorSchema, truncations_and_byte_flips_of_valid_requests_never_throw) {
  std::mt19937 rng(2024);
  std::vector<std::string> seeds = kCompletionSeeds;
  seeds.insert(seeds.end(), kChatSeeds.begin(), kChatSeeds.end());
  for (const std::string& seed : seeds) {
    for (std::size_t cut = 0; cut < seed.size(); cut += 3) check_both(seed.substr(0, cut));
    for (int trial = 0; trial < 300; ++trial) {
      std::string body = seed;
      const int flips = std::uniform_int_distribution<int>(1, 4)(rng);
      for (int f = 0; f < flips; ++f) {
        const std::size_t at = std::uniform_int_distribution<std::size_t>(0, body.size() - 1)(rng);
        body[at] = static_cast<char>(std::uniform_int_distribution<int>(0, 255)(rng));
      }
      check_both(body);
    }
  }
}

TEST(ErrorSchema, messages_of_refusals_quote_no_raw_control_or_invalid_bytes) {
  const auto r = parse_completion_request("{\"prompt\": \"hi\", \"\xc3\xa9v\x01l\": 1}", test_config());
  ASSERT_FALSE(r.ok());
  expect_error_schema(r.error());
  EXPECT_EQ(r.error().message.find('\x01'), std::string::npos);
}

}  // namespace
}  // namespace day0
