// The shared draw (ops/token_draw.h): each id gets the share of [0, 1) its weight says; the id drawn for a u is the one
// an exact (long double) walk in the same order finds, away from boundaries rounding may move; masked ids are never
// drawn; check_token_draws' errors; CpuOps::draw_tokens after greedy_tokens.
#include "ops/token_draw.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "ops/cpu/cpu_ops.h"
#include "ops/exp_nonpositive.h"

namespace day0 {
namespace {

float max_of(const std::vector<float>& x) { return *std::max_element(x.begin(), x.end()); }
std::int32_t draw(const std::vector<float>& x, float m, float inv_t, double u) {
  return draw_token(x.data(), static_cast<std::int64_t>(x.size()), m, inv_t, u);
}

// The traversal order token_draw.h defines: blocks, in a block lane by lane, in a lane every 32nd id.
std::vector<std::int64_t> walk_order(std::int64_t V) {
  std::vector<std::int64_t> order;
  for (std::int64_t b = 0; b * kDrawBlock < V; ++b)
    for (int l = 0; l < kDrawLanes; ++l)
      for (int k = 0; k < kDrawBlock / kDrawLanes; ++k)
        if (const std::int64_t i = b * kDrawBlock + l + kDrawLanes * k; i < V) order.push_back(i);
  return order;
}

TEST(TokenDraw, each_id_takes_the_share_of_u_its_weight_says) {
  const std::vector<float> x = {0.f, std::log(2.f), -INFINITY, std::log(4.f), std::log(1.f / 8.f)};
  const double total = 1 + 2 + 4 + 0.125;
  std::vector<int> count(x.size(), 0);
  constexpr int kSteps = 100000;
  for (int s = 0; s < kSteps; ++s) ++count[draw(x, max_of(x), 1.f, (s + 0.5) / kSteps)];
  EXPECT_EQ(count[2], 0);  // -inf: weight 0
  const double want[] = {1 / total, 2 / total, 0, 4 / total, 0.125 / total};
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(count[i] / double(kSteps), want[i], 2.0 / kSteps) << i;
  // Temperature 2 flattens: weights sqrt(w).
  std::vector<int> flat(x.size(), 0);
  for (int s = 0; s < kSteps; ++s) ++flat[draw(x, max_of(x), 0.5f, (s + 0.5) / kSteps)];
  const double t2 = 1 + std::sqrt(2.0) + 2 + std::sqrt(0.125);
  EXPECT_NEAR(flat[3] / double(kSteps), 2 / t2, 1e-3);
}

TEST(TokenDraw, the_drawn_id_is_where_an_exact_walk_crosses_u_away_from_boundaries) {
  std::mt19937 rng(99);
  for (const std::int64_t V : {std::int64_t{1}, std::int64_t{31}, std::int64_t{2048}, std::int64_t{5000}}) {
    std::normal_distribution<float> n(0.f, 3.f);
    std::vector<float> x(static_cast<std::size_t>(V));
    for (float& v : x) v = n(rng);
    const float inv_t = 0.8f, m = max_of(x);
    const std::vector<std::int64_t> order = walk_order(V);
    std::vector<long double> edge;  // the running sum after each id in walk order
    long double sum = 0;
    for (std::int64_t i : order) edge.push_back(sum += exp_nonpositive((x[i] - m) * inv_t));
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    int checked = 0;
    for (int t = 0; t < 2000; ++t) {
      const double u = unit(rng);
      const long double target = u * sum;
      const auto at = std::upper_bound(edge.begin(), edge.end(), target) - edge.begin();
      const long double lo = at > 0 ? edge[at - 1] : 0, hi = edge[at];
      if (std::min(target - lo, hi - target) < 1e-9L * sum) continue;  // rounding may move it
      ++checked;
      ASSERT_EQ(draw(x, m, inv_t, u), order[at]) << "V " << V << " u " << u;
    }
    EXPECT_GT(checked, 1900);
  }
}

TEST(TokenDraw, masked_ids_are_never_drawn_and_u_zero_takes_the_first_positive_weight) {
  std::vector<float> x(5000, -INFINITY);
  x[4321] = -3.f;
  for (double u : {0.0, 0.3, std::nextafter(1.0, 0.0)}) EXPECT_EQ(draw(x, -3.f, 1.f, u), 4321);
  x[17] = -3.f;  // id 17 walks first (block 0, lane 17)
  EXPECT_EQ(draw(x, -3.f, 1.f, 0.0), 17);
  EXPECT_EQ(draw(x, -3.f, 1.f, 0.75), 4321);
  // A weight under 2^-126 of the best is zero: never drawn.
  std::vector<float> y = {0.f, -100.f};
  EXPECT_EQ(draw(y, 0.f, 1.f, std::nextafter(1.0, 0.0)), 0);
}

TEST(TokenDraw, bad_draws_are_refused_naming_the_row) {
  const std::vector<TokenDraw> ok = {{0, 1.f, 0.0}, {2, 0.5f, 0.99}};
  EXPECT_TRUE(check_token_draws(ok, 3, "t").ok());
  const auto message = [](std::vector<TokenDraw> d) { return check_token_draws(d, 3, "t").error().message; };
  EXPECT_NE(message({{3, 1.f, 0.5}}).find("draw row 3 outside the 3 logits rows"), std::string::npos);
  EXPECT_NE(message({{1, 1.f, 0.5}, {1, 1.f, 0.2}}).find("row 1 drawn twice"), std::string::npos);
  EXPECT_NE(message({{1, 0.f, 0.5}}).find("temperature"), std::string::npos);
  EXPECT_NE(message({{1, INFINITY, 0.5}}).find("temperature"), std::string::npos);
  EXPECT_NE(message({{1, 1.f, 1.0}}).find("[0, 1)"), std::string::npos);
  EXPECT_NE(message({{1, 1.f, -0.1}}).find("[0, 1)"), std::string::npos);
  EXPECT_NE(message({{1, 1.f, 0.5, 0, 0.0}}).find("top_p must lie in (0, 1]"), std::string::npos);
  EXPECT_NE(message({{1, 1.f, 0.5, 0, 1.5}}).find("top_p"), std::string::npos);
  EXPECT_NE(message({{1, 1.f, 0.5, 0, NAN}}).find("top_p"), std::string::npos);
  EXPECT_NE(message({{1, 1.f, 0.5, 0, 1.0, -0.1}}).find("min_p must lie in [0, 1]"), std::string::npos);
  EXPECT_NE(message({{1, 1.f, 0.5, 0, 1.0, 1.5}}).find("min_p"), std::string::npos);
  EXPECT_TRUE(check_token_draws({{1, 1.f, 0.5, -1, 1.0, 1.0}, {2, 1.f, 0.5, 7, 1e-9, 0.0}}, 3, "t").ok());
}

TEST(TokenDraw, cpu_ops_draw_after_the_greedy_picks_and_leave_unusable_rows) {
  CpuOps cpu;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> v(-4.f, 4.f);
  constexpr std::int64_t R = 4, V = 3000;
  Tensor x = Tensor::zeros({R, V}, DType::f32);
  for (std::int64_t i = 0; i < R * V; ++i) x.data<float>()[i] = v(rng);
  x.data<float>()[2 * V + 9] = NAN;  // row 2 unusable
  Tensor out = Tensor::zeros({R, 2}, DType::i32), tokens = Tensor::zeros({R}, DType::i32);
  ASSERT_TRUE(cpu.greedy_tokens(x, out, &tokens).ok());
  const Tensor argmax = out.clone();
  // Row 3 with top-k 5, top-p 0.5 and min-p 0.1 at temperature 2: a token among its 5 largest.
  const std::vector<TokenDraw> draws = {{0, 1.f, 0.61}, {2, 1.f, 0.5}, {3, 0.5f, 0.93, 5, 0.5, 0.1}};
  ASSERT_TRUE(cpu.draw_tokens(x, draws, out, &tokens).ok());
  for (const TokenDraw& d : draws) {
    const float* row = x.data<float>() + d.row * V;
    const std::int32_t* o = out.data<std::int32_t>() + 2 * d.row;
    if (d.row == 2) {  // unusable: the greedy report, untouched
      EXPECT_EQ(o[1], 9);
      EXPECT_EQ(o[0], argmax.data<std::int32_t>()[2 * d.row]);
      continue;
    }
    EXPECT_EQ(o[0], draw_token(row, V, row[argmax.data<std::int32_t>()[2 * d.row]], d));
    if (d.top_k == 5) {
      EXPECT_LT(std::count_if(row, row + V, [&](float x) { return x > row[o[0]]; }), 5);
    }
    EXPECT_EQ(tokens.data<std::int32_t>()[d.row], o[0]);
  }
  EXPECT_EQ(out.data<std::int32_t>()[2], argmax.data<std::int32_t>()[2]);  // row 1: not drawn
  EXPECT_FALSE(cpu.draw_tokens(x, std::vector<TokenDraw>{{4, 1.f, 0.5}}, out, nullptr).ok());
}

}  // namespace
}  // namespace day0
