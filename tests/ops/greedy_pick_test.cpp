// greedy_pick (ops/greedy_pick.h) on rows with known answers, within one 256-logit block and across several: the
// lowest id of the largest logit, the lowest NaN or +inf id, all -inf; and greedy_pick_status's errors.
#include "ops/greedy_pick.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace day0 {
namespace {

GreedyPick pick_of(const std::vector<float>& row) { return greedy_pick(row); }

TEST(GreedyPick, takes_the_lowest_id_of_the_largest_logit_in_and_across_blocks) {
  EXPECT_EQ(pick_of({1.f, 3.f, -2.f, 3.f, 0.f}).token, 1);
  EXPECT_EQ(pick_of({-0.f, 0.f, -1.f}).token, 0);  // -0 == +0: the lowest
  EXPECT_EQ(pick_of({-INFINITY, -7.f, -INFINITY}).token, 1);
  std::vector<float> row(1000, -1.f);
  row[700] = 5.f;
  row[999] = 5.f;  // a tie in the same later block
  row[300] = 4.f;
  GreedyPick p = pick_of(row);
  EXPECT_EQ(p.token, 700);
  EXPECT_EQ(p.unusable, -1);
  row[260] = 5.f;  // the same maximum in an earlier block wins
  EXPECT_EQ(pick_of(row).token, 260);
}

TEST(GreedyPick, flags_the_lowest_nan_or_inf_and_rows_of_only_minus_inf) {
  std::vector<float> row(1000, 0.f);
  row[900] = NAN;
  row[600] = INFINITY;
  row[601] = NAN;
  EXPECT_EQ(pick_of(row).unusable, 600);
  row[5] = NAN;
  EXPECT_EQ(pick_of(row).unusable, 5);
  EXPECT_EQ(pick_of(std::vector<float>(513, -INFINITY)).unusable, -2);
  EXPECT_EQ(pick_of({}).unusable, -2);
}

TEST(GreedyPick, status_names_what_is_unusable) {
  EXPECT_TRUE(greedy_pick_status({3, -1}, "x").ok());
  const Status nan = greedy_pick_status({0, 17}, "sampler");
  ASSERT_FALSE(nan.ok());
  EXPECT_EQ(nan.error().message, "sampler: logit of token 17 is NaN or +inf");
  const Status inf = greedy_pick_status({0, -2}, "greedy_generate: step 4");
  ASSERT_FALSE(inf.ok());
  EXPECT_EQ(inf.error().message, "greedy_generate: step 4: every logit is -inf");
}

}  // namespace
}  // namespace day0
