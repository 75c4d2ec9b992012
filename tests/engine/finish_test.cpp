// Token-level finish: EOS and stop token ids give "stop" (EOS unless ignore_eos), max_tokens "length",
// and a stop token on the last allowed position is still a "stop".
#include "engine/finish.h"

#include <gtest/gtest.h>

namespace day0 {
namespace {

const std::vector<std::int32_t> kEos = {199999, 200002};

TEST(Finish, reason_names_match_the_openai_strings) {
  EXPECT_EQ(finish_reason_name(FinishReason::stop), "stop");
  EXPECT_EQ(finish_reason_name(FinishReason::length), "length");
  EXPECT_TRUE(finish_reason_name(FinishReason::none).empty());
}

TEST(Finish, eos_stops_unless_ignore_eos_and_stop_token_ids_always_stop) {
  SamplingParams p;
  p.stop_token_ids = {42};
  EXPECT_TRUE(is_stop_token(200002, p, kEos));
  EXPECT_TRUE(is_stop_token(42, p, kEos));
  EXPECT_FALSE(is_stop_token(7, p, kEos));
  p.ignore_eos = true;
  EXPECT_FALSE(is_stop_token(200002, p, kEos));
  EXPECT_TRUE(is_stop_token(42, p, kEos));
}

TEST(Finish, max_tokens_gives_length_and_a_stop_token_on_the_last_position_gives_stop) {
  SamplingParams p;
  p.max_tokens = 3;
  EXPECT_EQ(finish_after_token(5, 1, p, kEos), FinishReason::none);
  EXPECT_EQ(finish_after_token(5, 3, p, kEos), FinishReason::length);
  EXPECT_EQ(finish_after_token(199999, 3, p, kEos), FinishReason::stop);
  EXPECT_EQ(finish_after_token(199999, 1, p, kEos), FinishReason::stop);
}

}  // namespace
}  // namespace day0
