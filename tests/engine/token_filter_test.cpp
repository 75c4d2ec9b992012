// top-k, top-p and min-p on hand-made distributions: which tokens each keeps, in which order, and the
// draw from the kept set. Logits are log-probabilities so that the kept masses are readable.
#include "engine/token_filter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

namespace day0 {
namespace {

std::vector<float> log_probs(std::vector<double> probs) {
  std::vector<float> out;
  for (const double p : probs) out.push_back(static_cast<float>(std::log(p)));
  return out;
}

std::vector<std::int32_t> kept_ids(std::span<const float> logits, const SamplingParams& p) {
  std::vector<Candidate> out;
  keep_candidates(logits, p, out);
  std::vector<std::int32_t> ids;
  for (const Candidate& c : out) ids.push_back(c.id);
  return ids;
}

SamplingParams params(std::int32_t top_k, double top_p, double min_p, double temperature = 1.0) {
  SamplingParams p;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.temperature = temperature;
  return p;
}

using Ids = std::vector<std::int32_t>;

TEST(TokenFilter, no_filter_keeps_every_token_in_id_order_with_weights_relative_to_the_max) {
  const auto logits = log_probs({0.1, 0.5, 0.4});
  std::vector<Candidate> out;
  keep_candidates(logits, params(0, 1.0, 0.0), out);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].id, 0);
  EXPECT_NEAR(out[0].weight, 0.2, 1e-6);
  EXPECT_NEAR(out[1].weight, 1.0, 1e-6);
  EXPECT_NEAR(out[2].weight, 0.8, 1e-6);
}

TEST(TokenFilter, temperature_sharpens_or_flattens_the_weights) {
  const auto logits = log_probs({0.2, 0.8});
  std::vector<Candidate> out;
  keep_candidates(logits, params(0, 1.0, 0.0, 0.5), out);
  EXPECT_NEAR(out[0].weight, 0.0625, 1e-6);  // (0.2 / 0.8)^(1 / 0.5)
  keep_candidates(logits, params(0, 1.0, 0.0, 2.0), out);
  EXPECT_NEAR(out[0].weight, 0.5, 1e-6);  // (0.25)^(1 / 2)
}

TEST(TokenFilter, top_k_one_keeps_only_the_argmax_and_the_lowest_id_on_ties) {
  EXPECT_EQ(kept_ids(log_probs({0.1, 0.4, 0.1, 0.4}), params(1, 1.0, 0.0)), (Ids{1}));
}

TEST(TokenFilter, top_k_keeps_the_k_largest_in_id_order_and_lower_ids_win_ties) {
  EXPECT_EQ(kept_ids(log_probs({0.1, 0.3, 0.05, 0.3, 0.25}), params(3, 1.0, 0.0)), (Ids{1, 3, 4}));
  EXPECT_EQ(kept_ids(log_probs({0.2, 0.1, 0.2, 0.2}), params(2, 1.0, 0.0)), (Ids{0, 2}));
  EXPECT_EQ(kept_ids(log_probs({0.1, 0.9}), params(5, 1.0, 0.0)), (Ids{0, 1}));  // k >= vocab: no filter
  EXPECT_EQ(kept_ids(log_probs({0.1, 0.9}), params(-1, 1.0, 0.0)), (Ids{0, 1}));
}

TEST(TokenFilter, top_p_keeps_the_smallest_set_whose_mass_reaches_p) {
  const auto logits = log_probs({0.15, 0.5, 0.05, 0.3});
  EXPECT_EQ(kept_ids(logits, params(0, 0.49, 0.0)), (Ids{1}));
  EXPECT_EQ(kept_ids(logits, params(0, 0.51, 0.0)), (Ids{1, 3}));
  EXPECT_EQ(kept_ids(logits, params(0, 0.79, 0.0)), (Ids{1, 3}));
  EXPECT_EQ(kept_ids(logits, params(0, 0.81, 0.0)), (Ids{0, 1, 3}));
  EXPECT_EQ(kept_ids(logits, params(0, 0.96, 0.0)), (Ids{0, 1, 2, 3}));
  EXPECT_EQ(kept_ids(logits, params(0, 1e-9, 0.0)), (Ids{1}));  // always at least one token
}

TEST(TokenFilter, top_p_applies_to_the_distribution_renormalised_after_top_k) {
  // After top_k = 2 the kept masses are 4/7 and 3/7: top_p = 0.55 keeps one token. Without top_k the
  // first token holds only 0.4 and top_p = 0.55 needs two.
  const auto logits = log_probs({0.4, 0.3, 0.2, 0.1});
  EXPECT_EQ(kept_ids(logits, params(2, 0.55, 0.0)), (Ids{0}));
  EXPECT_EQ(kept_ids(logits, params(0, 0.55, 0.0)), (Ids{0, 1}));
}

TEST(TokenFilter, top_p_applies_after_temperature) {
  // At temperature 0.5 the probabilities {0.6, 0.4} become {9/13, 4/13}: top_p = 0.65 keeps one token.
  const auto logits = log_probs({0.6, 0.4});
  EXPECT_EQ(kept_ids(logits, params(0, 0.65, 0.0, 1.0)), (Ids{0, 1}));
  EXPECT_EQ(kept_ids(logits, params(0, 0.65, 0.0, 0.5)), (Ids{0}));
}

TEST(TokenFilter, min_p_keeps_tokens_at_least_min_p_times_the_most_likely) {
  const auto logits = log_probs({0.15, 0.5, 0.05, 0.3});
  EXPECT_EQ(kept_ids(logits, params(0, 1.0, 0.25)), (Ids{0, 1, 3}));  // threshold 0.125, id order
  EXPECT_EQ(kept_ids(logits, params(0, 1.0, 0.7)), (Ids{1}));
  EXPECT_EQ(kept_ids(logits, params(0, 1.0, 1.0)), (Ids{1}));
  EXPECT_EQ(kept_ids(logits, params(0, 0.9, 0.25)), (Ids{0, 1, 3}));
  EXPECT_EQ(kept_ids(logits, params(2, 1.0, 0.7)), (Ids{1}));
}

TEST(TokenFilter, minus_infinity_logits_are_never_kept_with_weight) {
  std::vector<float> logits = {-INFINITY, 0.f, -INFINITY};
  std::vector<Candidate> out;
  keep_candidates(logits, params(0, 1.0, 0.0), out);
  EXPECT_EQ(out[0].weight, 0.f);
  EXPECT_EQ(out[2].weight, 0.f);
  EXPECT_EQ(draw_candidate(out, 0.999999), 1);
  EXPECT_EQ(draw_candidate(out, 0.0), 1);
}

TEST(TokenFilter, top_p_over_a_large_vocabulary_matches_a_full_sort) {
  // 50k tokens with a long tail: the mass crosses p inside a histogram bucket of many tokens.
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.f, 1.f);  // the top 64 hold about 2% of the mass
  std::vector<float> logits(50000);
  logits[123] = logits[456] = 0.25f;  // ties
  for (float& x : logits) x = normal(rng);
  for (const double top_p : {0.1, 0.5, 0.9, 0.99}) {
    std::vector<std::int32_t> order(logits.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    const float m = logits[order[0]];
    double total = 0.0;
    for (const float x : logits) total += static_cast<float>(std::exp(static_cast<double>(x) - m));
    Ids expected;
    double mass = 0.0;
    for (const std::int32_t id : order) {
      if (!expected.empty() && mass >= top_p * total) break;
      expected.push_back(id);
      mass += static_cast<float>(std::exp(static_cast<double>(logits[id]) - m));
    }
    std::sort(expected.begin(), expected.end());
    const Ids kept = kept_ids(logits, params(0, top_p, 0.0));
    EXPECT_EQ(kept, expected) << "top_p " << top_p;
    // Top-p after top-k takes the same path over the k candidates.
    const Ids kept_after_k = kept_ids(logits, params(40000, top_p, 0.0));
    EXPECT_TRUE(std::includes(kept.begin(), kept.end(), kept_after_k.begin(), kept_after_k.end()));
  }
}

TEST(TokenFilter, draw_maps_the_uniform_onto_cumulative_weights_in_candidate_order) {
  const std::vector<Candidate> c = {{0.f, 5, 1.0f}, {0.f, 2, 0.5f}, {0.f, 9, 0.5f}};  // masses 0.5 0.25 0.25
  EXPECT_EQ(draw_candidate(c, 0.0), 5);
  EXPECT_EQ(draw_candidate(c, 0.49), 5);
  EXPECT_EQ(draw_candidate(c, 0.51), 2);
  EXPECT_EQ(draw_candidate(c, 0.74), 2);
  EXPECT_EQ(draw_candidate(c, 0.76), 9);
  EXPECT_EQ(draw_candidate(c, 0.9999999999), 9);
}

TEST(TokenFilter, the_vectorisable_exp_is_within_a_few_ulp_of_exp_and_zero_below_the_normal_range) {
  // Every weight comes from exp_nonpositive, so its error is the sampling distribution's. Bound: ~2 ulp of the
  // polynomial and scaling, plus the rounding of y = z log2(e) to float (up to |y| 2^-24 absolute, so the relative
  // error grows with |z|: a few 1e-6 near z = -87, where the weight is ~1e-38 of the best token's).
  double worst = 0.0;
  for (int i = 0; i <= 1000000; ++i) {
    const float z = -87.f * static_cast<float>(i) / 1000000.f;
    const double want = std::exp(static_cast<double>(z));
    const double bound = 2.5e-7 + 1e-7 * std::abs(z);
    worst = std::max(worst, std::abs(exp_nonpositive(z) - want) / want / bound);
  }
  EXPECT_LT(worst, 1.0);
  EXPECT_EQ(exp_nonpositive(0.f), 1.f);
  EXPECT_EQ(exp_nonpositive(-0.f), 1.f);
  EXPECT_EQ(exp_nonpositive(-88.f), 0.f);  // below 2^-126
  EXPECT_EQ(exp_nonpositive(-1e30f), 0.f);
  EXPECT_EQ(exp_nonpositive(-INFINITY), 0.f);
}

// Temperature-only rows skip the candidate list (the draw of ops/token_draw.h, tested there): keeps_every_token says
// which rows those are.
TEST(TokenFilter, keeps_every_token_only_where_no_filter_cuts_the_vocabulary) {
  const std::vector<float> logits(5000, 0.f);
  // Whatever filters something is not "unfiltered": top_k below the vocabulary, top_p < 1, min_p > 0.
  EXPECT_FALSE(keeps_every_token(params(10, 1.0, 0.0), logits.size()));
  EXPECT_TRUE(keeps_every_token(params(5000, 1.0, 0.0), logits.size()));
  EXPECT_FALSE(keeps_every_token(params(0, 0.9, 0.0), logits.size()));
  EXPECT_FALSE(keeps_every_token(params(0, 1.0, 0.05), logits.size()));
}

}  // namespace
}  // namespace day0
