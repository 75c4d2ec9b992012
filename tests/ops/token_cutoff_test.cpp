// token_cutoff against its definition computed the plain way: sort every id by rank, take top-k's prefix, then the
// prefix of integer masses that reaches trunc(Q * p). Random rows with ties, -inf, signed zeros, one id, and a
// 201,088-id row; top-k / top-p alone and together.
#include "ops/token_cutoff.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "ops/exp_nonpositive.h"
#include "ops/token_draw.h"

namespace day0 {
namespace {

// The last kept id's place in rank order, by sorting.
TokenCutoff reference_cutoff(const std::vector<float>& x, float inv_t, std::int64_t top_k, double top_p) {
  const auto V = static_cast<std::int64_t>(x.size());
  std::vector<std::int64_t> order(x.size());
  for (std::int64_t i = 0; i < V; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    const std::uint32_t ka = logit_key(x[a]), kb = logit_key(x[b]);
    return ka > kb || (ka == kb && a < b);
  });
  std::int64_t kept = V;
  if (top_k > 0 && top_k < V) kept = top_k;
  if (top_p < 1.0) {
    const float m = *std::max_element(x.begin(), x.end());
    std::vector<std::uint64_t> mass;
    std::uint64_t total = 0;
    for (std::int64_t r = 0; r < kept; ++r)
      total += mass.emplace_back(top_p_mass(exp_nonpositive((x[order[r]] - m) * inv_t)));
    const auto target = static_cast<std::uint64_t>(static_cast<double>(total) * top_p);
    std::uint64_t sum = 0;
    std::int64_t r = 0;
    for (; r < kept; ++r)
      if ((sum += mass[r]) >= target) break;
    kept = r + 1;
  }
  if (kept == V) return TokenCutoff{};
  const std::int64_t last = order[kept - 1];
  return {logit_key(x[last]), static_cast<std::int32_t>(last)};
}

std::int64_t kept_count(const std::vector<float>& x, const TokenCutoff& c) {
  std::int64_t n = 0;
  for (std::size_t i = 0; i < x.size(); ++i) n += cutoff_keeps(c, logit_key(x[i]), static_cast<std::int64_t>(i));
  return n;
}

void expect_cutoff(const std::vector<float>& x, float inv_t, std::int64_t top_k, double top_p) {
  SCOPED_TRACE(::testing::Message() << "V " << x.size() << " inv_t " << inv_t << " top_k " << top_k << " top_p "
                                    << top_p);
  const float m = *std::max_element(x.begin(), x.end());
  const TokenCutoff got = token_cutoff(x.data(), static_cast<std::int64_t>(x.size()), m, inv_t, top_k, top_p);
  const TokenCutoff want = reference_cutoff(x, inv_t, top_k, top_p);
  const std::int64_t n = kept_count(x, want);
  EXPECT_EQ(kept_count(x, got), n);
  if (n < static_cast<std::int64_t>(x.size())) {
    EXPECT_EQ(got.key, want.key);
    EXPECT_EQ(got.id, want.id);
  }
  EXPECT_GE(n, 1);
}

TEST(TokenCutoff, the_radix_descent_finds_the_sorted_definitions_cutoff) {
  std::mt19937 rng(7);
  for (const std::int64_t V : {std::int64_t{1}, std::int64_t{7}, std::int64_t{300}, std::int64_t{5000}})
    for (const bool ties : {false, true}) {
      std::vector<float> x(static_cast<std::size_t>(V));
      std::normal_distribution<float> n(0.f, 3.f);
      for (float& v : x) v = ties ? std::round(n(rng)) : n(rng);  // rounded: many equal logits
      if (V > 10) {
        x[3] = -INFINITY;
        x[4] = 0.f;
        x[5] = -0.f;  // ranks below +0, whatever the ids
      }
      for (const float inv_t : {0.3f, 1.f, 2.5f})
        for (const std::int64_t k : {std::int64_t{0}, std::int64_t{1}, std::int64_t{5}, V - 1, V})
          for (const double p : {1.0, 0.95, 0.5, 0.1, 1e-12}) expect_cutoff(x, inv_t, k, p);
    }
}

TEST(TokenCutoff, a_full_vocabulary_row_and_a_flat_one_agree_with_the_definition) {
  std::mt19937 rng(11);
  std::vector<float> x(201088);
  std::normal_distribution<float> n(0.f, 2.f);
  for (float& v : x) v = n(rng);
  for (const double p : {0.9, 0.5}) expect_cutoff(x, 1.f, 0, p);
  expect_cutoff(x, 1.f, 50, 0.95);
  std::vector<float> flat(4096, 1.5f);  // every logit equal: the cut falls among ties, in id order
  expect_cutoff(flat, 1.f, 0, 0.5);
  expect_cutoff(flat, 1.f, 100, 1.0);
  const float m = 1.5f;
  const TokenCutoff half = token_cutoff(flat.data(), 4096, m, 1.f, 0, 0.5);
  EXPECT_EQ(half.id, 2047);  // 2,048 equal masses reach half of 4,096
}

TEST(TokenCutoff, no_filter_keeps_every_id_and_top_p_keeps_at_least_one) {
  const std::vector<float> x = {0.f, -1.f, -INFINITY, 3.f, 3.f};
  const TokenCutoff all = token_cutoff(x.data(), 5, 3.f, 1.f, 0, 1.0);
  EXPECT_EQ(kept_count(x, all), 5);
  EXPECT_EQ(kept_count(x, token_cutoff(x.data(), 5, 3.f, 1.f, 5, 1.0)), 5);  // k = vocab: no cut
  const TokenCutoff one = token_cutoff(x.data(), 5, 3.f, 1.f, 0, 1e-30);
  EXPECT_EQ(kept_count(x, one), 1);
  EXPECT_EQ(one.id, 3);  // the tie at 3 goes to the lower id
  const TokenCutoff two = token_cutoff(x.data(), 5, 3.f, 1.f, 2, 1.0);
  EXPECT_EQ(two.id, 4);
}

// The draw with a cutoff and min_p: nothing outside the kept set is drawn, and the kept ids keep their proportions.
TEST(TokenCutoff, a_masked_draw_takes_the_kept_ids_in_proportion_and_no_other) {
  const std::vector<float> x = {std::log(4.f), 0.f, std::log(2.f), std::log(0.5f), -INFINITY, std::log(3.f)};
  const float m = std::log(4.f);
  // top-p 0.6 of masses 1, 1/4, 1/2, 1/8, 0, 3/4 (rank: 0, 5, 2, 1, 3): 1 + 3/4 = 1.75 >= 0.6 x 2.625 keeps ids 0, 5.
  const TokenCutoff cut = token_cutoff(x.data(), 6, m, 1.f, 0, 0.6);
  EXPECT_EQ(cut.id, 5);
  std::vector<int> count(x.size(), 0);
  constexpr int kSteps = 70000;
  for (int s = 0; s < kSteps; ++s) ++count[draw_token(x.data(), 6, m, 1.f, (s + 0.5) / kSteps, cut, 0.0)];
  EXPECT_EQ(count[1] + count[2] + count[3] + count[4], 0);
  EXPECT_NEAR(count[0] / double(kSteps), 1 / 1.75, 1e-3);
  // min_p 0.4 of the best: weights 1, 1/4, 1/2, 1/8, 0, 3/4 keep ids 0, 2, 5.
  std::fill(count.begin(), count.end(), 0);
  for (int s = 0; s < kSteps; ++s) ++count[draw_token(x.data(), 6, m, 1.f, (s + 0.5) / kSteps, TokenCutoff{}, 0.4)];
  EXPECT_EQ(count[1] + count[3] + count[4], 0);
  EXPECT_NEAR(count[2] / double(kSteps), 0.5 / 2.25, 1e-3);
  // No cutoff, no min_p: the unmasked draw's ids.
  for (int s = 0; s < 100; ++s) {
    const double u = (s + 0.5) / 100;
    EXPECT_EQ(draw_token(x.data(), 6, m, 1.f, u, TokenCutoff{}, 0.0), draw_token(x.data(), 6, m, 1.f, u));
  }
}

}  // namespace
}  // namespace day0
