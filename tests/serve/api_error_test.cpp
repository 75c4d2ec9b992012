// ApiError bodies: the OpenAI error object, nulls for absent param and code, and user text quoted safely.
#include "serve/api_error.h"

#include <gtest/gtest.h>

#include "serve/response_common.h"
#include "serve_test_util.h"

namespace day0 {
namespace {

TEST(ApiError, error_body_has_exactly_the_openai_fields) {
  const auto body = error_body(invalid_request("temperature", "temperature must be in [0, 2], got 5"));
  EXPECT_EQ(json_text(body),
            R"({"error":{"message":"temperature must be in [0, 2], got 5","type":"invalid_request_error","param":"temperature","code":null}})");
}

TEST(ApiError, empty_param_and_code_are_null) {
  const auto body = error_body(invalid_request("", "request body is empty"));
  EXPECT_TRUE(body["error"]["param"].is_null());
  EXPECT_TRUE(body["error"]["code"].is_null());
}

TEST(ApiError, model_not_found_is_a_404_with_its_code) {
  const ApiError e = model_not_found("llama");
  EXPECT_EQ(e.http_status, 404);
  EXPECT_EQ(e.type, "not_found_error");
  EXPECT_EQ(e.code, "model_not_found");
  EXPECT_EQ(e.param, "model");
  serve_test::expect_error_schema(e);
}

TEST(ApiError, quoted_user_text_is_valid_utf8_without_controls_and_bounded) {
  EXPECT_EQ(quote_user_text("caf\xc3\xa9"), "caf\xc3\xa9");
  EXPECT_EQ(quote_user_text("a\xff" "b"), "a\xef\xbf\xbd" "b");
  EXPECT_EQ(quote_user_text("a\nb"), "a\xef\xbf\xbd" "b");
  EXPECT_EQ(quote_user_text("\xed\xa0\x80"), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");  // a UTF-8 encoded surrogate
  EXPECT_EQ(quote_user_text(std::string(100, 'x'), 10), std::string(10, 'x') + "...");
}

}  // namespace
}  // namespace day0
