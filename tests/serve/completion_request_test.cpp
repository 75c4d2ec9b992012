// POST /v1/completions bodies: good requests round-trip into CompletionRequest; each bad input is its
// own case and must give a 400 (404 for an unknown model) naming the field (RELIABILITY.md V2).
#include "serve/completion_request.h"

#include <gtest/gtest.h>

#include "serve_test_util.h"

namespace day0 {
namespace {

using serve_test::expect_bad_request;
using serve_test::test_config;

ApiResult<CompletionRequest> parse(const std::string& body) { return parse_completion_request(body, test_config()); }

// {"prompt": "hi", <field>: <value>}
ApiResult<CompletionRequest> with(const std::string& field, const std::string& value) {
  return parse(R"({"prompt": "hi", ")" + field + "\": " + value + "}");
}

// ---- good requests ----

TEST(CompletionRequest, minimal_request_gets_the_default_model_and_openai_defaults) {
  const auto r = parse(R"({"prompt": "Hello"})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->model, "gpt-oss-20b");
  EXPECT_EQ(std::get<std::string>(r->prompt), "Hello");
  EXPECT_FALSE(r->stream);
  EXPECT_FALSE(r->include_usage);
  EXPECT_FALSE(r->max_tokens.has_value());
  EXPECT_EQ(r->sampling.temperature, 1.0);
  EXPECT_EQ(r->sampling.top_p, 1.0);
  EXPECT_FALSE(r->sampling.logprobs);
  EXPECT_FALSE(r->sampling.seed.has_value());
  EXPECT_TRUE(r->sampling.stop.empty());
}

TEST(CompletionRequest, every_supported_field_round_trips) {
  const auto r = parse(R"({
    "model": "default-alias", "prompt": "Once upon", "max_tokens": 32, "temperature": 0.7, "top_p": 0.9,
    "top_k": 40, "min_p": 0.05, "presence_penalty": 0.5, "frequency_penalty": -0.25, "repetition_penalty": 1.1,
    "seed": 42, "stop": ["\n", "END"], "stop_token_ids": [200002], "ignore_eos": true, "logprobs": 3,
    "stream": true, "stream_options": {"include_usage": true}, "user": "u-1", "n": 1, "best_of": 1,
    "echo": false, "logit_bias": {"100": -5, "7": 2.5}, "suffix": null, "response_format": {"type": "text"}})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->model, "default-alias");
  EXPECT_EQ(std::get<std::string>(r->prompt), "Once upon");
  EXPECT_EQ(r->max_tokens, 32);
  const SamplingParams& s = r->sampling;
  EXPECT_EQ(s.temperature, 0.7);
  EXPECT_EQ(s.top_p, 0.9);
  EXPECT_EQ(s.top_k, 40);
  EXPECT_EQ(s.min_p, 0.05);
  EXPECT_EQ(s.presence_penalty, 0.5);
  EXPECT_EQ(s.frequency_penalty, -0.25);
  EXPECT_EQ(s.repetition_penalty, 1.1);
  EXPECT_EQ(s.seed, 42u);
  EXPECT_EQ(s.stop, (std::vector<std::string>{"\n", "END"}));
  EXPECT_EQ(s.stop_token_ids, (std::vector<std::int32_t>{200002}));
  EXPECT_TRUE(s.ignore_eos);
  EXPECT_TRUE(s.logprobs);
  EXPECT_EQ(s.top_logprobs, 3);
  EXPECT_EQ(s.logit_bias, (std::vector<std::pair<std::int32_t, double>>{{100, -5.0}, {7, 2.5}}));
  EXPECT_TRUE(r->stream);
  EXPECT_TRUE(r->include_usage);
  EXPECT_EQ(r->user, "u-1");
}

TEST(CompletionRequest, prompt_may_be_token_ids) {
  const auto r = parse(R"({"prompt": [1, 2, 201087]})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(std::get<std::vector<std::int32_t>>(r->prompt), (std::vector<std::int32_t>{1, 2, 201087}));
}

TEST(CompletionRequest, a_batch_of_one_prompt_is_that_prompt) {
  const auto text = parse(R"({"prompt": ["just one"]})");
  ASSERT_TRUE(text.ok()) << text.error().message;
  EXPECT_EQ(std::get<std::string>(text->prompt), "just one");
  const auto ids = parse(R"({"prompt": [[5, 6]]})");
  ASSERT_TRUE(ids.ok()) << ids.error().message;
  EXPECT_EQ(std::get<std::vector<std::int32_t>>(ids->prompt), (std::vector<std::int32_t>{5, 6}));
}

TEST(CompletionRequest, null_fields_count_as_absent) {
  const auto r = parse(R"({"prompt": "hi", "model": null, "temperature": null, "stop": null, "seed": null,
                           "logprobs": null, "stream": null, "stream_options": null, "max_tokens": null})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->sampling.temperature, 1.0);
  EXPECT_FALSE(r->max_tokens.has_value());
}

TEST(CompletionRequest, integral_floats_are_accepted_for_integer_fields) {
  const auto r = parse(R"({"prompt": "hi", "max_tokens": 10.0, "seed": 1e3})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->max_tokens, 10);
  EXPECT_EQ(r->sampling.seed, 1000u);
}

TEST(CompletionRequest, a_single_stop_string_and_temperature_zero_for_greedy) {
  const auto r = parse(R"({"prompt": "hi", "stop": "###", "temperature": 0, "top_k": -1, "logprobs": 0})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->sampling.stop, (std::vector<std::string>{"###"}));
  EXPECT_TRUE(r->sampling.is_greedy());
  EXPECT_TRUE(r->sampling.logprobs);
  EXPECT_EQ(r->sampling.top_logprobs, 0);
}

// ---- the body itself ----

TEST(CompletionRequest, body_that_is_an_array_is_refused) {
  expect_bad_request(parse(R"([{"prompt": "hi"}])"), "", "must be a JSON object, got an array");
}
TEST(CompletionRequest, body_that_is_a_string_is_refused) { expect_bad_request(parse(R"("hi")"), "", "JSON object"); }
TEST(CompletionRequest, body_that_is_a_number_is_refused) { expect_bad_request(parse("42"), "", "JSON object"); }
TEST(CompletionRequest, body_that_is_null_is_refused) { expect_bad_request(parse("null"), "", "JSON object"); }
TEST(CompletionRequest, malformed_json_is_refused) { expect_bad_request(parse(R"({"prompt": )"), "prompt", "JSON"); }

TEST(CompletionRequest, unknown_field_is_refused_by_name) {
  expect_bad_request(with("frobnicate", "1"), "frobnicate", "Unrecognized request argument supplied: frobnicate");
}
TEST(CompletionRequest, unknown_field_in_stream_options_is_refused_by_path) {
  expect_bad_request(parse(R"({"prompt": "hi", "stream": true, "stream_options": {"continuous": true}})"),
                     "stream_options.continuous", "Unrecognized");
}

// ---- model ----

TEST(CompletionRequest, unknown_model_is_404_model_not_found) {
  const auto r = with("model", R"("gpt-5")");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().http_status, 404);
  EXPECT_EQ(r.error().type, "not_found_error");
  EXPECT_EQ(r.error().code, "model_not_found");
  EXPECT_EQ(r.error().param, "model");
  EXPECT_NE(r.error().message.find("gpt-5"), std::string::npos);
  serve_test::expect_error_schema(r.error());
}
TEST(CompletionRequest, model_of_the_wrong_type_is_refused) { expect_bad_request(with("model", "7"), "model", "string"); }

// ---- prompt ----

TEST(CompletionRequest, missing_prompt_is_refused) { expect_bad_request(parse(R"({"model": "gpt-oss-20b"})"), "prompt", "required"); }
TEST(CompletionRequest, empty_prompt_string_is_refused) { expect_bad_request(parse(R"({"prompt": ""})"), "prompt", "empty"); }
TEST(CompletionRequest, empty_prompt_array_is_refused) { expect_bad_request(parse(R"({"prompt": []})"), "prompt", "empty"); }
TEST(CompletionRequest, batch_of_one_empty_string_is_refused) { expect_bad_request(parse(R"({"prompt": [""]})"), "prompt[0]", "empty"); }
TEST(CompletionRequest, batch_of_one_empty_id_list_is_refused) { expect_bad_request(parse(R"({"prompt": [[]]})"), "prompt[0]", "empty"); }
TEST(CompletionRequest, several_prompts_are_refused) {
  expect_bad_request(parse(R"({"prompt": ["a", "b"]})"), "prompt", "one prompt per request");
}
TEST(CompletionRequest, several_token_id_prompts_are_refused) {
  expect_bad_request(parse(R"({"prompt": [[1], [2]]})"), "prompt", "one prompt per request");
}
TEST(CompletionRequest, prompt_of_the_wrong_type_is_refused) {
  expect_bad_request(parse(R"({"prompt": 5})"), "prompt", "a string or an array of token ids, got an integer");
}
TEST(CompletionRequest, prompt_object_is_refused) { expect_bad_request(parse(R"({"prompt": {"text": "hi"}})"), "prompt", "got an object"); }
TEST(CompletionRequest, negative_token_id_is_refused) { expect_bad_request(parse(R"({"prompt": [1, -1]})"), "prompt[1]", "[0, 201087]"); }
TEST(CompletionRequest, token_id_past_the_vocabulary_is_refused) {
  expect_bad_request(parse(R"({"prompt": [201088]})"), "prompt[0]", "[0, 201087], got 201088");
}
TEST(CompletionRequest, mixed_token_ids_and_strings_are_refused) { expect_bad_request(parse(R"({"prompt": [1, "a"]})"), "prompt[1]", "integer"); }
TEST(CompletionRequest, fractional_token_id_is_refused) { expect_bad_request(parse(R"({"prompt": [1.5]})"), "prompt[0]", "integer"); }

// ---- max_tokens ----

TEST(CompletionRequest, max_tokens_negative_is_refused) { expect_bad_request(with("max_tokens", "-1"), "max_tokens", "[1, 2147483647], got -1"); }
TEST(CompletionRequest, max_tokens_zero_is_refused) { expect_bad_request(with("max_tokens", "0"), "max_tokens", "got 0"); }
TEST(CompletionRequest, max_tokens_two_to_the_31_is_refused) {
  expect_bad_request(with("max_tokens", "2147483648"), "max_tokens", "got 2147483648");
}
TEST(CompletionRequest, max_tokens_as_a_string_is_refused) { expect_bad_request(with("max_tokens", R"("10")"), "max_tokens", "got a string"); }
TEST(CompletionRequest, max_tokens_fractional_is_refused) { expect_bad_request(with("max_tokens", "1.5"), "max_tokens", "must be an integer, got 1.5"); }
TEST(CompletionRequest, max_tokens_boolean_is_refused) { expect_bad_request(with("max_tokens", "true"), "max_tokens", "got a boolean"); }

// ---- sampling ranges ----

TEST(CompletionRequest, temperature_negative_is_refused) { expect_bad_request(with("temperature", "-1"), "temperature", "[0, 2], got -1"); }
TEST(CompletionRequest, temperature_huge_is_refused) { expect_bad_request(with("temperature", "1e9"), "temperature", "[0, 2], got 1e+09"); }
TEST(CompletionRequest, temperature_just_above_two_is_refused) { expect_bad_request(with("temperature", "2.0001"), "temperature", "[0, 2]"); }
TEST(CompletionRequest, temperature_largest_double_is_refused) { expect_bad_request(with("temperature", "1.7976931348623157e308"), "temperature", "[0, 2]"); }
TEST(CompletionRequest, temperature_as_a_string_is_refused) { expect_bad_request(with("temperature", R"("hot")"), "temperature", "must be a number, got a string"); }
TEST(CompletionRequest, temperature_nan_is_refused) { expect_bad_request(with("temperature", "NaN"), "temperature", "JSON"); }
TEST(CompletionRequest, top_p_zero_is_refused) { expect_bad_request(with("top_p", "0"), "top_p", "(0, 1], got 0"); }
TEST(CompletionRequest, top_p_above_one_is_refused) { expect_bad_request(with("top_p", "1.5"), "top_p", "(0, 1], got 1.5"); }
TEST(CompletionRequest, top_k_below_minus_one_is_refused) { expect_bad_request(with("top_k", "-5"), "top_k", "got -5"); }
TEST(CompletionRequest, top_k_fractional_is_refused) { expect_bad_request(with("top_k", "2.5"), "top_k", "integer"); }
TEST(CompletionRequest, min_p_above_one_is_refused) { expect_bad_request(with("min_p", "2"), "min_p", "[0, 1]"); }
TEST(CompletionRequest, presence_penalty_out_of_range_is_refused) { expect_bad_request(with("presence_penalty", "3"), "presence_penalty", "[-2, 2]"); }
TEST(CompletionRequest, frequency_penalty_out_of_range_is_refused) { expect_bad_request(with("frequency_penalty", "-2.5"), "frequency_penalty", "[-2, 2]"); }
TEST(CompletionRequest, repetition_penalty_zero_is_refused) { expect_bad_request(with("repetition_penalty", "0"), "repetition_penalty", "(0, 2]"); }

// ---- n, logprobs, seed ----

TEST(CompletionRequest, n_zero_is_refused) { expect_bad_request(with("n", "0"), "n", "n must be 1"); }
TEST(CompletionRequest, n_two_is_refused) { expect_bad_request(with("n", "2"), "n", "one choice per request"); }
TEST(CompletionRequest, n_a_million_is_refused) { expect_bad_request(with("n", "1000000"), "n", "got 1000000"); }
TEST(CompletionRequest, n_as_a_string_is_refused) { expect_bad_request(with("n", R"("1")"), "n", "integer"); }
TEST(CompletionRequest, logprobs_1000_is_refused) { expect_bad_request(with("logprobs", "1000"), "logprobs", "[0, 20], got 1000"); }
TEST(CompletionRequest, logprobs_negative_is_refused) { expect_bad_request(with("logprobs", "-1"), "logprobs", "[0, 20]"); }
TEST(CompletionRequest, logprobs_boolean_is_refused) { expect_bad_request(with("logprobs", "true"), "logprobs", "got a boolean"); }
TEST(CompletionRequest, seed_negative_is_refused) { expect_bad_request(with("seed", "-1"), "seed", "[0, 9223372036854775807], got -1"); }
TEST(CompletionRequest, seed_two_to_the_64_is_refused) { expect_bad_request(with("seed", "18446744073709551616"), "seed", "[0, 9223372036854775807]"); }
TEST(CompletionRequest, seed_two_to_the_64_minus_one_is_refused) {
  expect_bad_request(with("seed", "18446744073709551615"), "seed", "got 18446744073709551615");
}
TEST(CompletionRequest, seed_as_a_string_is_refused) { expect_bad_request(with("seed", R"("42")"), "seed", "got a string"); }

// ---- stop ----

TEST(CompletionRequest, a_thousand_stop_strings_are_refused) {
  std::string stops = "[";
  for (int i = 0; i < 1000; ++i) stops += (i ? ",\"s" : "\"s") + std::to_string(i) + "\"";
  expect_bad_request(with("stop", stops + "]"), "stop", "at most 16 strings, got 1000");
}
TEST(CompletionRequest, a_one_mebibyte_stop_string_is_refused) {
  expect_bad_request(with("stop", "\"" + std::string(1 << 20, 'x') + "\""), "stop", "at most 1024 bytes");
}
TEST(CompletionRequest, an_empty_stop_string_is_refused) { expect_bad_request(with("stop", R"([""])"), "stop", "empty"); }
TEST(CompletionRequest, stop_as_a_number_is_refused) { expect_bad_request(with("stop", "5"), "stop", "a string or an array of strings"); }
TEST(CompletionRequest, stop_array_holding_a_number_is_refused) { expect_bad_request(with("stop", R"(["a", 1])"), "stop[1]", "string"); }
TEST(CompletionRequest, stop_token_id_past_the_vocabulary_is_refused) {
  expect_bad_request(with("stop_token_ids", "[300000]"), "stop_token_ids[0]", "[0, 201087]");
}
TEST(CompletionRequest, stop_token_ids_not_an_array_is_refused) { expect_bad_request(with("stop_token_ids", "5"), "stop_token_ids", "array"); }

// ---- logit_bias ----

TEST(CompletionRequest, logit_bias_key_that_is_not_a_token_id_is_refused) {
  expect_bad_request(with("logit_bias", R"({"abc": 1})"), "logit_bias.abc", "token ids");
}
TEST(CompletionRequest, logit_bias_key_past_the_vocabulary_is_refused) {
  expect_bad_request(with("logit_bias", R"({"999999": 1})"), "logit_bias.999999", "[0, 201087]");
}
TEST(CompletionRequest, logit_bias_value_out_of_range_is_refused) {
  expect_bad_request(with("logit_bias", R"({"5": 200})"), "logit_bias.5", "[-100, 100], got 200");
}
TEST(CompletionRequest, logit_bias_value_of_the_wrong_type_is_refused) {
  expect_bad_request(with("logit_bias", R"({"5": "up"})"), "logit_bias.5", "number");
}
TEST(CompletionRequest, logit_bias_not_an_object_is_refused) { expect_bad_request(with("logit_bias", "[1]"), "logit_bias", "object"); }

// ---- stream, flags, unsupported features ----

TEST(CompletionRequest, stream_as_a_string_is_refused) { expect_bad_request(with("stream", R"("true")"), "stream", "boolean"); }
TEST(CompletionRequest, stream_options_without_stream_is_refused) {
  expect_bad_request(with("stream_options", R"({"include_usage": true})"), "stream_options", "only allowed when stream is true");
}
TEST(CompletionRequest, stream_options_not_an_object_is_refused) {
  expect_bad_request(parse(R"({"prompt": "hi", "stream": true, "stream_options": true})"), "stream_options", "JSON object");
}
TEST(CompletionRequest, include_usage_not_a_boolean_is_refused) {
  expect_bad_request(parse(R"({"prompt": "hi", "stream": true, "stream_options": {"include_usage": 1}})"),
                     "stream_options.include_usage", "boolean");
}
TEST(CompletionRequest, ignore_eos_not_a_boolean_is_refused) { expect_bad_request(with("ignore_eos", R"("yes")"), "ignore_eos", "boolean"); }
TEST(CompletionRequest, user_not_a_string_is_refused) { expect_bad_request(with("user", "5"), "user", "string"); }
TEST(CompletionRequest, echo_is_refused) { expect_bad_request(with("echo", "true"), "echo", "not supported"); }
TEST(CompletionRequest, suffix_is_refused) { expect_bad_request(with("suffix", R"("end")"), "suffix", "not supported"); }
TEST(CompletionRequest, best_of_above_one_is_refused) { expect_bad_request(with("best_of", "3"), "best_of", "best_of must be 1"); }
TEST(CompletionRequest, json_response_format_is_refused) {
  expect_bad_request(with("response_format", R"({"type": "json_object"})"), "response_format", "'json_object' is not supported");
}
TEST(CompletionRequest, response_format_without_type_is_refused) {
  expect_bad_request(with("response_format", "{}"), "response_format.type", "must be a string");
}

}  // namespace
}  // namespace day0
