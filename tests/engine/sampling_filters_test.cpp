// What the sampler's filters keep (top-k, top-p and min-p: ops/token_cutoff.h's rule, min-p a threshold on the
// weight), in vLLM's order; the rule itself is checked against a full sort in tests/ops/token_cutoff_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/sampling_params.h"
#include "ops/exp_nonpositive.h"
#include "ops/token_cutoff.h"
#include "ops/token_draw.h"

namespace day0 {
namespace {

std::vector<float> log_probs(std::vector<double> probs) {
  std::vector<float> out;
  for (const double p : probs) out.push_back(static_cast<float>(std::log(p)));
  return out;
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

// The ids the sampler may draw from: kept by the cutoff, not under min_p.
Ids kept_ids(const std::vector<float>& logits, const SamplingParams& p) {
  const float m = *std::max_element(logits.begin(), logits.end());
  const auto inv_t = static_cast<float>(1.0 / p.temperature);
  const auto V = static_cast<std::int64_t>(logits.size());
  const TokenCutoff cut = token_cutoff(logits.data(), V, m, inv_t, p.top_k, p.top_p);
  Ids ids;
  for (std::int64_t i = 0; i < V; ++i)
    if (cutoff_keeps(cut, logit_key(logits[i]), i) &&
        !(static_cast<double>(exp_nonpositive((logits[i] - m) * inv_t)) < p.min_p))
      ids.push_back(static_cast<std::int32_t>(i));
  return ids;
}

TEST(SamplingFilters, top_k_one_keeps_only_the_argmax_and_the_lowest_id_on_ties) {
  EXPECT_EQ(kept_ids(log_probs({0.1, 0.4, 0.1, 0.4}), params(1, 1.0, 0.0)), (Ids{1}));
}

TEST(SamplingFilters, top_k_keeps_the_k_largest_and_lower_ids_win_ties) {
  EXPECT_EQ(kept_ids(log_probs({0.1, 0.3, 0.05, 0.3, 0.25}), params(3, 1.0, 0.0)), (Ids{1, 3, 4}));
  EXPECT_EQ(kept_ids(log_probs({0.2, 0.1, 0.2, 0.2}), params(2, 1.0, 0.0)), (Ids{0, 2}));
  EXPECT_EQ(kept_ids(log_probs({0.1, 0.9}), params(5, 1.0, 0.0)), (Ids{0, 1}));  // k >= vocab: no filter
  EXPECT_EQ(kept_ids(log_probs({0.1, 0.9}), params(-1, 1.0, 0.0)), (Ids{0, 1}));
}

TEST(SamplingFilters, top_p_keeps_the_smallest_set_whose_mass_reaches_p) {
  const auto logits = log_probs({0.15, 0.5, 0.05, 0.3});
  EXPECT_EQ(kept_ids(logits, params(0, 0.49, 0.0)), (Ids{1}));
  EXPECT_EQ(kept_ids(logits, params(0, 0.51, 0.0)), (Ids{1, 3}));
  EXPECT_EQ(kept_ids(logits, params(0, 0.79, 0.0)), (Ids{1, 3}));
  EXPECT_EQ(kept_ids(logits, params(0, 0.81, 0.0)), (Ids{0, 1, 3}));
  EXPECT_EQ(kept_ids(logits, params(0, 0.96, 0.0)), (Ids{0, 1, 2, 3}));
  EXPECT_EQ(kept_ids(logits, params(0, 1e-9, 0.0)), (Ids{1}));  // always at least one token
}

TEST(SamplingFilters, top_p_applies_to_the_distribution_renormalised_after_top_k) {
  // After top_k = 2 the kept masses are 4/7 and 3/7: top_p = 0.55 keeps one token. Without top_k the
  // first token holds only 0.4 and top_p = 0.55 needs two.
  const auto logits = log_probs({0.4, 0.3, 0.2, 0.1});
  EXPECT_EQ(kept_ids(logits, params(2, 0.55, 0.0)), (Ids{0}));
  EXPECT_EQ(kept_ids(logits, params(0, 0.55, 0.0)), (Ids{0, 1}));
}

TEST(SamplingFilters, top_p_applies_after_temperature) {
  // At temperature 0.5 the probabilities {0.6, 0.4} become {9/13, 4/13}: top_p = 0.65 keeps one token.
  const auto logits = log_probs({0.6, 0.4});
  EXPECT_EQ(kept_ids(logits, params(0, 0.65, 0.0, 1.0)), (Ids{0, 1}));
  EXPECT_EQ(kept_ids(logits, params(0, 0.65, 0.0, 0.5)), (Ids{0}));
}

TEST(SamplingFilters, min_p_keeps_tokens_at_least_min_p_times_the_most_likely) {
  const auto logits = log_probs({0.15, 0.5, 0.05, 0.3});
  EXPECT_EQ(kept_ids(logits, params(0, 1.0, 0.25)), (Ids{0, 1, 3}));  // threshold 0.125
  EXPECT_EQ(kept_ids(logits, params(0, 1.0, 0.7)), (Ids{1}));
  EXPECT_EQ(kept_ids(logits, params(0, 1.0, 1.0)), (Ids{1}));
  EXPECT_EQ(kept_ids(logits, params(0, 0.9, 0.25)), (Ids{0, 1, 3}));
  EXPECT_EQ(kept_ids(logits, params(2, 1.0, 0.7)), (Ids{1}));
}

TEST(SamplingFilters, minus_infinity_logits_are_never_drawn) {
  const std::vector<float> logits = {-INFINITY, 0.f, -INFINITY};
  for (const double u : {0.0, 0.5, 0.999999})
    EXPECT_EQ(draw_token(logits.data(), 3, 0.f, 1.f, u, token_cutoff(logits.data(), 3, 0.f, 1.f, 0, 0.9), 0.0), 1);
}

TEST(SamplingFilters, the_vectorisable_exp_is_within_a_few_ulp_of_exp_and_zero_below_the_normal_range) {
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

}  // namespace
}  // namespace day0
