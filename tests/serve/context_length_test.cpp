// RELIABILITY.md V3: prompt + max_tokens against the context length, after tokenization. Too long is a
// 400 context_length_exceeded with the numbers; the exact boundary is accepted.
#include <gtest/gtest.h>

#include "serve/chat_request.h"
#include "serve/completion_request.h"
#include "serve_test_util.h"

namespace day0 {
namespace {

using serve_test::expect_bad_request;
using serve_test::test_config;  // max_model_len 4096

CompletionRequest completion(const std::string& extra = "") {
  auto r = parse_completion_request(R"({"prompt": "hi")" + extra + "}", test_config());
  EXPECT_TRUE(r.ok());
  return *r;
}

TEST(ContextLength, a_prompt_longer_than_the_context_is_refused_with_the_numbers) {
  CompletionRequest r = completion();
  const ApiStatus s = resolve_max_tokens(r, 4097, test_config());
  expect_bad_request(s, "prompt", "maximum context length is 4096 tokens");
  EXPECT_EQ(s.error().code, "context_length_exceeded");
  EXPECT_NE(s.error().message.find("4097 input tokens"), std::string::npos);
}

TEST(ContextLength, a_prompt_that_fills_the_context_leaves_no_room_and_is_refused) {
  CompletionRequest r = completion();
  expect_bad_request(resolve_max_tokens(r, 4096, test_config()), "prompt", "no room for output");
}

TEST(ContextLength, prompt_plus_max_tokens_past_the_context_is_refused_naming_max_tokens) {
  CompletionRequest r = completion(R"(, "max_tokens": 100)");
  const ApiStatus s = resolve_max_tokens(r, 4000, test_config());
  expect_bad_request(s, "max_tokens", "you requested 4100 tokens (4000 in the input, 100 in the completion)");
  EXPECT_EQ(s.error().code, "context_length_exceeded");
}

TEST(ContextLength, the_exact_boundary_is_accepted) {
  CompletionRequest r = completion(R"(, "max_tokens": 1)");
  ASSERT_TRUE(resolve_max_tokens(r, 4095, test_config()).ok());
  EXPECT_EQ(r.sampling.max_tokens, 1);
}

TEST(ContextLength, max_tokens_larger_than_the_whole_context_is_a_context_error_not_a_type_error) {
  CompletionRequest r = completion(R"(, "max_tokens": 100000)");
  const ApiStatus s = resolve_max_tokens(r, 10, test_config());
  expect_bad_request(s, "max_tokens", "100010 tokens");
  EXPECT_EQ(s.error().code, "context_length_exceeded");
}

TEST(ContextLength, completions_default_to_16_tokens_clamped_to_the_room_left) {
  CompletionRequest r = completion();
  ASSERT_TRUE(resolve_max_tokens(r, 100, test_config()).ok());
  EXPECT_EQ(r.sampling.max_tokens, 16);
  ASSERT_TRUE(resolve_max_tokens(r, 4090, test_config()).ok());
  EXPECT_EQ(r.sampling.max_tokens, 6);
}

TEST(ContextLength, chat_defaults_to_all_the_room_left) {
  auto r = parse_chat_request(R"({"messages": [{"role": "user", "content": "hi"}]})", test_config());
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(resolve_max_tokens(*r, 1000, test_config()).ok());
  EXPECT_EQ(r->sampling.max_tokens, 3096);
}

TEST(ContextLength, chat_errors_name_the_field_the_client_used) {
  auto legacy = parse_chat_request(R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5000})", test_config());
  ASSERT_TRUE(legacy.ok());
  expect_bad_request(resolve_max_tokens(*legacy, 10, test_config()), "max_tokens", "context length");
  auto current = parse_chat_request(R"({"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 5000})",
                                    test_config());
  ASSERT_TRUE(current.ok());
  expect_bad_request(resolve_max_tokens(*current, 10, test_config()), "max_completion_tokens", "context length");
  expect_bad_request(resolve_max_tokens(*current, 5000, test_config()), "messages", "5000 input tokens");
}

TEST(ContextLength, without_a_known_context_length_nothing_is_checked) {
  ProtocolConfig config = test_config();
  config.max_model_len = 0;
  CompletionRequest r = completion(R"(, "max_tokens": 100000)");
  ASSERT_TRUE(resolve_max_tokens(r, 1000000, config).ok());
  EXPECT_EQ(r.sampling.max_tokens, 100000);
}

}  // namespace
}  // namespace day0
