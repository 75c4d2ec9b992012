// SamplingParams validation: defaults pass; each out-of-range value is refused with an error that
// names the parameter and its allowed range.
#include "engine/sampling_params.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

namespace day0 {
namespace {

struct BadCase {
  const char* param;
  std::function<void(SamplingParams&)> set;
  const char* range_text;  // must appear in the message
};

TEST(SamplingParams, defaults_follow_openai_and_pass_validation) {
  const SamplingParams p;
  EXPECT_EQ(p.temperature, 1.0);
  EXPECT_EQ(p.top_p, 1.0);
  EXPECT_EQ(p.top_k, 0);
  EXPECT_EQ(p.min_p, 0.0);
  EXPECT_EQ(p.repetition_penalty, 1.0);
  EXPECT_EQ(p.max_tokens, 16);
  EXPECT_FALSE(p.seed.has_value());
  EXPECT_FALSE(p.is_greedy());
  EXPECT_TRUE(validate_sampling_params(p, {}).ok());
  EXPECT_FALSE(find_invalid_param(p, SamplingLimits{.vocab_size = 100, .max_tokens = 16}).has_value());
}

TEST(SamplingParams, temperature_zero_is_greedy) {
  SamplingParams p;
  p.temperature = 0.0;
  EXPECT_TRUE(p.is_greedy());
  EXPECT_TRUE(validate_sampling_params(p, {}).ok());
}

TEST(SamplingParams, each_out_of_range_value_is_an_error_naming_the_parameter_and_range) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<BadCase> cases = {
      {"temperature", [](SamplingParams& p) { p.temperature = -1; }, "[0, 2]"},
      {"temperature", [](SamplingParams& p) { p.temperature = 1e9; }, "[0, 2]"},
      {"temperature", [nan](SamplingParams& p) { p.temperature = nan; }, "NaN"},
      {"top_p", [](SamplingParams& p) { p.top_p = 0; }, "(0, 1]"},
      {"top_p", [](SamplingParams& p) { p.top_p = 1.5; }, "(0, 1]"},
      {"top_k", [](SamplingParams& p) { p.top_k = -5; }, "-5"},
      {"min_p", [](SamplingParams& p) { p.min_p = -0.1; }, "[0, 1]"},
      {"min_p", [](SamplingParams& p) { p.min_p = 1.1; }, "[0, 1]"},
      {"presence_penalty", [](SamplingParams& p) { p.presence_penalty = 2.5; }, "[-2, 2]"},
      {"frequency_penalty", [](SamplingParams& p) { p.frequency_penalty = -3; }, "[-2, 2]"},
      {"repetition_penalty", [](SamplingParams& p) { p.repetition_penalty = 0; }, "(0, 2]"},
      {"logit_bias", [](SamplingParams& p) { p.logit_bias = {{3, 101.0}}; }, "[-100, 100]"},
      {"logit_bias", [](SamplingParams& p) { p.logit_bias = {{1000, 1.0}}; }, "[0, 99]"},
      {"seed", [](SamplingParams& p) { p.seed = ~0ull; }, "9223372036854775807"},
      {"max_tokens", [](SamplingParams& p) { p.max_tokens = 0; }, "[1, 64]"},
      {"max_tokens", [](SamplingParams& p) { p.max_tokens = 65; }, "[1, 64]"},
      {"stop", [](SamplingParams& p) { p.stop = std::vector<std::string>(17, "x"); }, "16"},
      {"stop", [](SamplingParams& p) { p.stop = {std::string(1025, 'x')}; }, "1024"},
      {"stop", [](SamplingParams& p) { p.stop = {""}; }, "empty"},
      {"stop_token_ids", [](SamplingParams& p) { p.stop_token_ids = {100}; }, "[0, 99]"},
      {"stop_token_ids", [](SamplingParams& p) { p.stop_token_ids = {-1}; }, "[0, 99]"},
      {"top_logprobs", [](SamplingParams& p) { p.logprobs = true; p.top_logprobs = 21; }, "[0, 20]"},
      {"top_logprobs", [](SamplingParams& p) { p.top_logprobs = 2; }, "logprobs"},
  };
  const SamplingLimits limits{.vocab_size = 100, .max_tokens = 64};
  for (const BadCase& c : cases) {
    SamplingParams p;
    c.set(p);
    const auto bad = find_invalid_param(p, limits);
    ASSERT_TRUE(bad.has_value()) << c.param;
    EXPECT_EQ(bad->param, c.param);
    EXPECT_EQ(bad->message.rfind(c.param, 0), 0u) << bad->message;  // starts with the name
    EXPECT_NE(bad->message.find(c.range_text), std::string::npos) << bad->message;
    const Status s = validate_sampling_params(p, limits);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().message, bad->message);
  }
}

TEST(SamplingParams, boundaries_of_each_range_are_accepted) {
  SamplingParams p;
  p.temperature = 2;
  p.top_p = 1;
  p.top_k = -1;
  p.min_p = 1;
  p.presence_penalty = -2;
  p.frequency_penalty = 2;
  p.repetition_penalty = 2;
  p.logit_bias = {{0, -100}, {99, 100}};
  p.seed = sampling_range::kMaxSeed;
  p.max_tokens = 64;
  p.stop = std::vector<std::string>(16, std::string(1024, 'x'));
  p.stop_token_ids = {0, 99};
  p.logprobs = true;
  p.top_logprobs = 20;
  EXPECT_FALSE(find_invalid_param(p, SamplingLimits{.vocab_size = 100, .max_tokens = 64}).has_value());
}

TEST(ParamRange, describes_open_and_closed_ends_and_rejects_nan) {
  EXPECT_EQ((ParamRange{0, 1, true, false}.describe()), "(0, 1]");
  EXPECT_EQ((ParamRange{-2, 2}.describe()), "[-2, 2]");
  EXPECT_EQ((ParamRange{0, 0.5, false, true}.describe()), "[0, 0.5)");
  EXPECT_FALSE((ParamRange{0, 1}.contains(std::nan(""))));
  EXPECT_FALSE((ParamRange{0, 1, true, false}.contains(0)));
  EXPECT_TRUE((ParamRange{0, 1, true, false}.contains(1)));
  EXPECT_EQ(range_message("top_p", sampling_range::kTopP, std::numeric_limits<double>::infinity()),
            "top_p must be in (0, 1], got Infinity");
}

}  // namespace
}  // namespace day0
