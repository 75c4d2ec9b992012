// The bad-input matrix over HTTP (RELIABILITY.md V1-V3, V8, E1): each case is its own test against one shared
// server on the bundled model, answered with the right status and an OpenAI error object naming the field; after
// every case the next good request is answered and the server is idle again (nothing running, no KV block held).
#include <gtest/gtest.h>

#include <cstring>
#include <regex>

#include "serve/server_fixture.h"

namespace day0::serve_test {
namespace {

constexpr int kContext = 256;  // a small context keeps the over-the-context cases cheap

class ServerBadInput : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    TestServerConfig c;
    c.max_model_len = kContext;
    c.chat_template = true;
    c.limits.max_body_bytes = 1u << 20;
    server_ = TestServer::start(c).release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(server_, nullptr); }
  // The server answers the next good request and goes back to idle after every bad one.
  void TearDown() override {
    httplib::Client c = server_->client();
    auto r = post_json(c, "/v1/completions", R"({"prompt": "def f(x):", "max_tokens": 2, "temperature": 0})");
    ASSERT_TRUE(r) << "no answer to the good request after the bad one";
    EXPECT_EQ(r->status, 200) << r->body;
    const auto j = nlohmann::json::parse(r->body, nullptr, false);
    ASSERT_TRUE(j.is_object()) << r->body;
    EXPECT_EQ(j["object"], "text_completion");
    EXPECT_TRUE(wait_idle(server_->port()));
  }

  httplib::Result completion(const std::string& body) {
    httplib::Client c = server_->client();
    return post_json(c, "/v1/completions", body);
  }
  httplib::Result chat(const std::string& body) {
    httplib::Client c = server_->client();
    return post_json(c, "/v1/chat/completions", body);
  }

  static TestServer* server_;
};

TestServer* ServerBadInput::server_ = nullptr;

// Status, type and param (null, exact, or a prefix ending in '*') of an OpenAI error response; the message
// contains `needle`. Even a JSON syntax error names the field where it happened.
void expect_error(const httplib::Result& r, int status, const std::string& type, const char* param,
                  const std::string& needle = "") {
  ASSERT_TRUE(r) << "no response";
  EXPECT_EQ(r->status, status) << r->body;
  const nlohmann::json e = error_of(r);
  ASSERT_TRUE(e.is_object());
  EXPECT_EQ(e["type"], type) << r->body;
  if (param == nullptr) {
    EXPECT_TRUE(e["param"].is_null()) << r->body;
  } else if (std::string(param).ends_with("*")) {  // a path that starts with this
    const std::string prefix(param, std::strlen(param) - 1);
    EXPECT_TRUE(e["param"].is_string() && e["param"].get<std::string>().rfind(prefix, 0) == 0) << r->body;
  } else {
    EXPECT_EQ(e["param"], param) << r->body;
  }
  EXPECT_NE(e["message"].get<std::string>().find(needle), std::string::npos) << r->body;
}

std::string token_prompt(int n) {
  std::string ids;
  for (int i = 0; i < n; ++i) ids += (i ? "," : "") + std::to_string(100 + i % 50);
  return "[" + ids + "]";
}

// ---- V1: malformed JSON

TEST_F(ServerBadInput, truncated_json_is_400) {
  expect_error(completion(R"({"prompt": "x", "max_tokens": 2)"), 400, "invalid_request_error", nullptr, "JSON");
}

TEST_F(ServerBadInput, trailing_garbage_after_json_is_400) {
  expect_error(completion(R"({"prompt": "x"} trailing)"), 400, "invalid_request_error", nullptr);
}

TEST_F(ServerBadInput, nan_in_json_is_400) {
  expect_error(completion(R"({"prompt": "x", "temperature": NaN})"), 400, "invalid_request_error", "temperature");
}

TEST_F(ServerBadInput, duplicate_keys_are_400) {
  expect_error(completion(R"({"prompt": "x", "prompt": "y"})"), 400, "invalid_request_error", "prompt", "duplicate");
}

TEST_F(ServerBadInput, empty_body_is_400) { expect_error(completion(""), 400, "invalid_request_error", nullptr); }

TEST_F(ServerBadInput, invalid_utf8_is_400) {
  expect_error(completion("{\"prompt\": \"\xff\xfe\"}"), 400, "invalid_request_error", "prompt", "UTF-8");
}

TEST_F(ServerBadInput, deep_nesting_is_400) {
  expect_error(completion(R"({"prompt": "x", "user": )" + std::string(10000, '[') + std::string(10000, ']') + "}"),
               400, "invalid_request_error", "user[0]*", "deeper");
}

TEST_F(ServerBadInput, json_that_is_not_an_object_is_400) {
  expect_error(completion(R"(["prompt"])"), 400, "invalid_request_error", nullptr);
}

// ---- V2: wrong types and out-of-range sampling parameters

TEST_F(ServerBadInput, max_tokens_as_a_string_is_400_naming_max_tokens) {
  expect_error(completion(R"({"prompt": "x", "max_tokens": "10"})"), 400, "invalid_request_error", "max_tokens");
}

TEST_F(ServerBadInput, max_tokens_fraction_is_400) {
  expect_error(completion(R"({"prompt": "x", "max_tokens": 1.5})"), 400, "invalid_request_error", "max_tokens");
}

TEST_F(ServerBadInput, max_tokens_zero_is_400) {
  expect_error(completion(R"({"prompt": "x", "max_tokens": 0})"), 400, "invalid_request_error", "max_tokens");
}

TEST_F(ServerBadInput, prompt_as_a_number_is_400_naming_prompt) {
  expect_error(completion(R"({"prompt": 42})"), 400, "invalid_request_error", "prompt");
}

TEST_F(ServerBadInput, stream_as_a_string_is_400_naming_stream) {
  expect_error(completion(R"({"prompt": "x", "stream": "yes"})"), 400, "invalid_request_error", "stream");
}

TEST_F(ServerBadInput, negative_temperature_is_400) {
  expect_error(completion(R"({"prompt": "x", "temperature": -1})"), 400, "invalid_request_error", "temperature",
               "[0, 2]");
}

TEST_F(ServerBadInput, huge_temperature_is_400) {
  expect_error(completion(R"({"prompt": "x", "temperature": 1e9})"), 400, "invalid_request_error", "temperature");
}

TEST_F(ServerBadInput, top_p_zero_is_400) {
  expect_error(completion(R"({"prompt": "x", "top_p": 0})"), 400, "invalid_request_error", "top_p");
}

TEST_F(ServerBadInput, top_p_above_one_is_400) {
  expect_error(completion(R"({"prompt": "x", "top_p": 1.5})"), 400, "invalid_request_error", "top_p");
}

TEST_F(ServerBadInput, negative_top_k_is_400) {
  expect_error(completion(R"({"prompt": "x", "top_k": -5})"), 400, "invalid_request_error", "top_k");
}

TEST_F(ServerBadInput, n_other_than_one_is_400) {
  expect_error(completion(R"({"prompt": "x", "n": 2})"), 400, "invalid_request_error", "n");
}

TEST_F(ServerBadInput, logprobs_above_the_limit_is_400) {
  expect_error(completion(R"({"prompt": "x", "logprobs": 1000})"), 400, "invalid_request_error", "logprobs");
}

TEST_F(ServerBadInput, negative_seed_is_400) {
  expect_error(completion(R"({"prompt": "x", "seed": -1})"), 400, "invalid_request_error", "seed");
}

TEST_F(ServerBadInput, too_many_stop_strings_is_400) {
  std::string stops;
  for (int i = 0; i < 1000; ++i) stops += (i ? ",\"s" : "\"s") + std::to_string(i) + "\"";
  expect_error(completion(R"({"prompt": "x", "stop": [)" + stops + "]}"), 400, "invalid_request_error", "stop");
}

TEST_F(ServerBadInput, token_id_outside_the_vocabulary_is_400) {
  expect_error(completion(R"({"prompt": [1, 2, 999999]})"), 400, "invalid_request_error", "prompt[2]");
}

TEST_F(ServerBadInput, unknown_model_is_404_naming_model) {
  expect_error(completion(R"({"model": "gpt-5", "prompt": "x"})"), 404, "not_found_error", "model", "gpt-5");
}

TEST_F(ServerBadInput, unknown_field_is_400_naming_it) {
  expect_error(completion(R"({"prompt": "x", "max_tokenz": 5})"), 400, "invalid_request_error", "max_tokenz",
               "Unrecognized request argument");
}

// ---- Prompts: empty, oversized, over the context with max_tokens (V3)

TEST_F(ServerBadInput, empty_prompt_is_400) {
  expect_error(completion(R"({"prompt": ""})"), 400, "invalid_request_error", "prompt", "empty");
}

TEST_F(ServerBadInput, empty_token_list_is_400) {
  expect_error(completion(R"({"prompt": []})"), 400, "invalid_request_error", "prompt", "empty");
}

TEST_F(ServerBadInput, prompt_longer_than_the_context_is_400_context_length_exceeded) {
  const auto r = completion(R"({"prompt": )" + token_prompt(kContext + 1) + "}");
  expect_error(r, 400, "invalid_request_error", "prompt", std::to_string(kContext + 1) + " input tokens");
  EXPECT_EQ(error_of(r)["code"], "context_length_exceeded");
}

TEST_F(ServerBadInput, oversized_text_prompt_is_400_with_the_numbers) {
  std::string text;
  for (int i = 0; i < 2000; ++i) text += "x = " + std::to_string(i) + "\\n";
  const auto r = completion(R"({"prompt": ")" + text + "\"}");
  expect_error(r, 400, "invalid_request_error", "prompt", "maximum context length is 256 tokens");
  EXPECT_EQ(error_of(r)["code"], "context_length_exceeded");
}

TEST_F(ServerBadInput, prompt_plus_max_tokens_over_the_context_is_400_naming_max_tokens) {
  const auto r = completion(R"({"prompt": )" + token_prompt(200) + R"(, "max_tokens": 57})");
  expect_error(r, 400, "invalid_request_error", "max_tokens", "257 tokens (200 in the input, 57 in the completion)");
  EXPECT_EQ(error_of(r)["code"], "context_length_exceeded");
}

TEST_F(ServerBadInput, prompt_one_short_of_the_context_with_one_token_is_answered_with_length) {
  const auto r = completion(R"({"prompt": )" + token_prompt(kContext - 1) +
                            R"(, "max_tokens": 1, "temperature": 0, "ignore_eos": true})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const auto j = nlohmann::json::parse(r->body);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["prompt_tokens"], kContext - 1);
  EXPECT_EQ(j["usage"]["completion_tokens"], 1);
}

// ---- Chat

TEST_F(ServerBadInput, chat_with_empty_messages_is_400) {
  expect_error(chat(R"({"messages": []})"), 400, "invalid_request_error", "messages");
}

TEST_F(ServerBadInput, chat_with_an_unknown_role_is_400) {
  expect_error(chat(R"({"messages": [{"role": "wizard", "content": "hi"}]})"), 400, "invalid_request_error",
               "messages[0].role");
}

TEST_F(ServerBadInput, chat_with_a_null_user_content_is_400) {
  expect_error(chat(R"({"messages": [{"role": "user", "content": null}]})"), 400, "invalid_request_error",
               "messages[0].content");
}

TEST_F(ServerBadInput, chat_over_the_context_is_400_naming_messages) {
  std::string long_text;
  for (int i = 0; i < 400; ++i) long_text += "word ";
  const auto r = chat(R"({"messages": [{"role": "user", "content": ")" + long_text + "\"}]}");
  expect_error(r, 400, "invalid_request_error", "messages", "maximum context length");
}

// ---- HTTP level (V5, V8)

TEST_F(ServerBadInput, body_over_the_limit_is_413) {
  const auto r = completion(R"({"prompt": ")" + std::string(2u << 20, 'a') + "\"}");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_EQ(error_of(r)["code"], "payload_too_large");
}

TEST_F(ServerBadInput, form_content_type_is_415) {
  httplib::Client c = server_->client();
  const auto r = c.Post("/v1/completions", R"({"prompt": "x"})", "application/x-www-form-urlencoded");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 415);
  EXPECT_EQ(error_of(r)["code"], "unsupported_media_type");
}

TEST_F(ServerBadInput, get_on_a_post_route_is_405_with_allow) {
  httplib::Client c = server_->client();
  const auto r = c.Get("/v1/completions");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405);
  EXPECT_EQ(r->get_header_value("Allow"), "POST");
  EXPECT_EQ(error_of(r)["code"], "method_not_allowed");
}

TEST_F(ServerBadInput, unknown_route_is_404_json) {
  httplib::Client c = server_->client();
  const auto r = c.Get("/v1/engines");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(error_of(r)["type"], "not_found_error");
}

TEST_F(ServerBadInput, oversized_header_is_refused_and_the_server_stays_up) {
  httplib::Client c = server_->client();
  const auto r = c.Get("/health", {{"X-Big", std::string(64 * 1024, 'a')}});
  // The library refuses a header line over 8 KiB (400) or drops the connection; either way no 2xx.
  if (r) {
    EXPECT_GE(r->status, 400);
  }
  auto again = server_->client().Get("/health");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 200);
}

TEST_F(ServerBadInput, error_bodies_hold_no_paths_or_addresses) {
  const auto r = completion(R"({"prompt": "x", "temperature": "hot"})");
  ASSERT_TRUE(r);
  EXPECT_FALSE(std::regex_search(r->body, std::regex(R"(\.cc|\.cu|\.cpp|0x[0-9a-f]{8})"))) << r->body;
}

}  // namespace
}  // namespace day0::serve_test
