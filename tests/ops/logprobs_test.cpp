// Raw logprobs: log_softmax of the logits, the top n sorted with ties broken by id.
#include "ops/logprobs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace day0 {
namespace {

TEST(Logprobs, log_sum_exp_is_stable_for_large_logits_and_minus_infinity_for_an_empty_mass) {
  const std::vector<float> big = {1000.f, 1000.f};
  EXPECT_NEAR(log_sum_exp(big), 1000.0 + std::log(2.0), 1e-9);
  const std::vector<float> none = {-INFINITY, -INFINITY};
  EXPECT_EQ(log_sum_exp(none), -INFINITY);
}

TEST(Logprobs, top_n_are_sorted_descending_with_lower_ids_first_on_ties) {
  const std::vector<float> logits = {std::log(0.1f), std::log(0.3f), std::log(0.1f), std::log(0.5f)};
  const auto top = top_logprobs(logits, 3, log_sum_exp(logits));
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].token, 3);
  EXPECT_NEAR(top[0].logprob, std::log(0.5), 1e-6);
  EXPECT_EQ(top[1].token, 1);
  EXPECT_EQ(top[2].token, 0);
  EXPECT_NEAR(top[2].logprob, std::log(0.1), 1e-6);
  EXPECT_TRUE(top_logprobs(logits, 0, 0.0).empty());
  EXPECT_EQ(top_logprobs(logits, 20, log_sum_exp(logits)).size(), 4u);
}

TEST(Logprobs, top_n_of_a_large_vocabulary_matches_a_full_sort) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> bucket(0, 999);  // many ties
  std::vector<float> logits(100000);
  for (float& x : logits) x = static_cast<float>(bucket(rng)) / 100.f;
  const double lse = log_sum_exp(logits);
  const auto top = top_logprobs(logits, 20, lse);
  std::vector<TokenLogprob> all;
  for (std::size_t i = 0; i < logits.size(); ++i)
    all.push_back({static_cast<std::int32_t>(i), static_cast<float>(logits[i] - lse)});
  std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.logprob > b.logprob; });
  all.resize(20);
  EXPECT_EQ(top, all);
}

}  // namespace
}  // namespace day0
