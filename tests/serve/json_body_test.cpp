// Strict request JSON (RELIABILITY.md V1): every malformed body is a 400 invalid_request_error, named
// where possible, and the pathological ones are refused at their limit, without reading on.
#include "serve/json_body.h"

#include <gtest/gtest.h>

#include "serve_test_util.h"

namespace day0 {
namespace {

using serve_test::expect_bad_request;

TEST(JsonBody, a_valid_object_parses_and_keeps_the_clients_key_order) {
  const auto j = parse_json_body(R"({"zeta": 1, "alpha": {"b": [1, 2.5, "x", null, true]}, "mid": "caf\u00e9 \ud83d\ude00"})");
  ASSERT_TRUE(j.ok()) << j.error().message;
  EXPECT_EQ(j->begin().key(), "zeta");
  EXPECT_EQ((*j)["mid"], "caf\xc3\xa9 \xf0\x9f\x98\x80");
}

TEST(JsonBody, empty_body_is_refused) { expect_bad_request(parse_json_body(""), "", "empty"); }

TEST(JsonBody, whitespace_only_body_is_refused) { expect_bad_request(parse_json_body(" \r\n\t"), "", "empty"); }

TEST(JsonBody, truncated_body_is_refused) {
  expect_bad_request(parse_json_body(R"({"model": "m", "prompt": "hi")"), "", "not valid JSON");
}

TEST(JsonBody, truncated_inside_a_value_names_the_field) {
  expect_bad_request(parse_json_body(R"({"model": "m", "prompt": "hi)"), "prompt", "not valid JSON");
}

TEST(JsonBody, trailing_garbage_is_refused) {
  expect_bad_request(parse_json_body(R"({"prompt": "hi"} {"prompt": "again"})"), "", "not valid JSON");
}

TEST(JsonBody, nan_literal_is_refused_naming_the_field) {
  expect_bad_request(parse_json_body(R"({"temperature": NaN})"), "temperature", "not valid JSON");
}

TEST(JsonBody, infinity_literal_is_refused_naming_the_field) {
  expect_bad_request(parse_json_body(R"({"top_p": Infinity})"), "top_p", "not valid JSON");
}

TEST(JsonBody, negative_infinity_literal_is_refused_naming_the_field) {
  expect_bad_request(parse_json_body(R"({"temperature": -Infinity})"), "temperature", "not valid JSON");
}

TEST(JsonBody, a_number_that_overflows_double_is_refused_naming_the_field) {
  expect_bad_request(parse_json_body(R"({"temperature": 1e400})"), "temperature", "");
}

TEST(JsonBody, duplicate_keys_are_refused_rather_than_last_wins) {
  expect_bad_request(parse_json_body(R"({"prompt": "a", "prompt": "b"})"), "prompt", "duplicate key 'prompt'");
}

TEST(JsonBody, duplicate_keys_in_a_nested_object_name_the_nested_path) {
  expect_bad_request(parse_json_body(R"({"stream_options": {"include_usage": true, "include_usage": false}})"),
                     "stream_options.include_usage", "duplicate key");
}

// "Refused quickly" without a clock (a time bound fails on a loaded machine): a byte that is not JSON sits just past
// the limit, so a parser that read on, or parsed the whole body before checking, would report it instead.
TEST(JsonBody, ten_thousand_deep_nesting_is_refused_at_the_limit_without_reading_on) {
  const std::string body = std::string(70, '[') + "!" + std::string(9930, '[') + std::string(10000, ']');
  expect_bad_request(parse_json_body(body), "", "deeper than 64");
}

TEST(JsonBody, deep_nesting_inside_a_field_names_where) {
  const std::string body = R"({"messages": )" + std::string(100, '[') + std::string(100, ']') + "}";
  const auto r = parse_json_body(body);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().param.rfind("messages[0][0]", 0), 0u) << r.error().param;
}

TEST(JsonBody, a_million_element_array_is_refused_at_the_limit_naming_the_field) {
  std::string body = R"({"prompt": [)";
  for (int i = 0; i < 1000000; ++i) body += i == 0 ? "1" : i == 262150 ? ",!" : ",1";  // not JSON past the limit
  body += "]}";
  expect_bad_request(parse_json_body(body), "prompt", "more than 262144 elements");
}

TEST(JsonBody, array_length_limit_is_configurable) {
  EXPECT_TRUE(parse_json_body("[1, 2, 3]", JsonLimits{.max_depth = 4, .max_array_elements = 3}).ok());
  expect_bad_request(parse_json_body("[1, 2, 3, 4]", JsonLimits{.max_depth = 4, .max_array_elements = 3}), "",
                     "more than 3 elements");
}

TEST(JsonBody, invalid_utf8_in_a_string_is_refused_naming_the_field) {
  expect_bad_request(parse_json_body("{\"prompt\": \"ab\xff\xfe\"}"), "prompt", "not valid JSON");
}

TEST(JsonBody, overlong_utf8_encoding_is_refused) {
  expect_bad_request(parse_json_body("{\"prompt\": \"\xc0\xaf\"}"), "prompt", "not valid JSON");
}

TEST(JsonBody, lone_surrogate_escape_is_refused_naming_the_field) {
  expect_bad_request(parse_json_body(R"({"prompt": "x\ud800y"})"), "prompt", "surrogate");
}

TEST(JsonBody, utf8_byte_order_mark_is_refused) {
  expect_bad_request(parse_json_body("\xEF\xBB\xBF{\"prompt\": \"hi\"}"), "", "byte order mark");
}

TEST(JsonBody, comments_are_refused) {
  expect_bad_request(parse_json_body("{\"prompt\": \"hi\" /* note */}"), "", "not valid JSON");
}

TEST(JsonBody, parse_errors_do_not_leak_library_internals_or_raw_bytes) {
  const auto r = parse_json_body("{\"prompt\": \"\x01\x80 raw\"}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message.find("json.exception"), std::string::npos) << r.error().message;
  EXPECT_EQ(r.error().message.find('\x80'), std::string::npos);
  serve_test::expect_error_schema(r.error());
}

}  // namespace
}  // namespace day0
