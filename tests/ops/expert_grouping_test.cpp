// group_by_expert (CPU reference): counts, offsets and routed experts of a hand-made routing, stable order within
// each expert, and bad input as errors.
#include "ops/expert_grouping.h"

#include <gtest/gtest.h>

namespace day0 {
namespace {

TEST(ExpertGrouping, groups_assignments_by_expert_keeping_their_order) {
  // 3 tokens, top-2 over 5 experts: token 0 -> {3, 1}, token 1 -> {1, 4}, token 2 -> {3, 0}.
  const std::vector<std::int32_t> idx = {3, 1, 1, 4, 3, 0};
  auto g = group_by_expert(idx, 2, 5);
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g->counts, (std::vector<std::int32_t>{1, 2, 0, 2, 1}));
  EXPECT_EQ(g->offsets, (std::vector<std::int32_t>{0, 1, 3, 3, 5, 6}));
  EXPECT_EQ(g->experts, (std::vector<std::int32_t>{0, 1, 3, 4}));
  // Expert 0: assignment 5 (token 2); expert 1: assignments 1, 2 (tokens 0, 1); expert 3: 0, 4; expert 4: 3.
  EXPECT_EQ(g->assignments, (std::vector<std::int32_t>{5, 1, 2, 0, 4, 3}));
  EXPECT_EQ(g->rows, (std::vector<std::int32_t>{2, 0, 1, 0, 2, 1}));
}

TEST(ExpertGrouping, an_id_outside_the_experts_or_a_ragged_shape_is_an_error) {
  auto bad = group_by_expert(std::vector<std::int32_t>{0, 5}, 2, 5);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("expert id 5 at assignment 1"), std::string::npos) << bad.error().message;
  EXPECT_FALSE(group_by_expert(std::vector<std::int32_t>{0, 1, 2}, 2, 5).ok());
  EXPECT_FALSE(group_by_expert(std::vector<std::int32_t>{0}, 0, 5).ok());
}

}  // namespace
}  // namespace day0
