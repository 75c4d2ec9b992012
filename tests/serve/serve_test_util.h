// Shared by the serve tests: a deployment config and checks of OpenAI error objects.
#pragma once

#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "serve/api_error.h"
#include "serve/protocol_config.h"
#include "serve/response_common.h"

namespace day0::serve_test {

inline ProtocolConfig test_config() {
  ProtocolConfig c;
  c.model_names = {"gpt-oss-20b", "default-alias"};
  c.max_model_len = 4096;
  c.vocab_size = 201088;
  return c;
}

// RELIABILITY.md E1: {"error": {"message": string, "type": string, "param": string|null, "code": string|null}}
// and nothing that looks like a source path or a pointer.
inline void expect_error_schema(const ApiError& e) {
  const nlohmann::ordered_json body = error_body(e);
  ASSERT_TRUE(body.is_object());
  ASSERT_EQ(body.size(), 1u);
  const auto& inner = body.at("error");
  ASSERT_EQ(inner.size(), 4u);
  EXPECT_TRUE(inner.at("message").is_string());
  EXPECT_FALSE(inner.at("message").get<std::string>().empty());
  EXPECT_TRUE(inner.at("type").is_string());
  EXPECT_TRUE(inner.at("param").is_string() || inner.at("param").is_null());
  EXPECT_TRUE(inner.at("code").is_string() || inner.at("code").is_null());
  const std::string text = json_text(body);
  EXPECT_FALSE(std::regex_search(text, std::regex(R"(\.cc|\.cu|0x[0-9a-f]{8})"))) << text;
  EXPECT_GE(e.http_status, 400);
  EXPECT_LT(e.http_status, 600);
}

// A 400 invalid_request_error naming `param`, whose message contains `needle`.
template <class R>
void expect_bad_request(const R& result, const std::string& param, const std::string& needle = "") {
  ASSERT_FALSE(result.ok()) << "accepted, expected an error on " << param;
  const ApiError& e = result.error();
  EXPECT_EQ(e.http_status, 400) << e.message;
  EXPECT_EQ(e.type, "invalid_request_error");
  EXPECT_EQ(e.param, param) << e.message;
  EXPECT_NE(e.message.find(needle), std::string::npos) << "message: " << e.message << "\nexpected: " << needle;
  expect_error_schema(e);
}

}  // namespace day0::serve_test
