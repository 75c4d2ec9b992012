// Penalties, numerically: repetition divides positive and multiplies negative logits once per distinct
// token of prompt and output; frequency counts output occurrences; presence is subtracted once.
#include "engine/penalties.h"

#include <gtest/gtest.h>

#include <random>
#include <tuple>
#include <vector>

namespace day0 {
namespace {

TEST(Penalties, repetition_divides_positive_and_multiplies_negative_logits_of_prompt_and_output_tokens) {
  SamplingParams p;
  p.repetition_penalty = 2.0;
  TokenHistory h(std::vector<std::int32_t>{0, 1, 1, 1}, true);
  h.add_output(2);
  h.add_output(1);  // in both: penalised once
  std::vector<float> logits = {4.f, -3.f, 1.f, 5.f};
  ASSERT_TRUE(penalties_apply(p, h));
  ASSERT_TRUE(apply_penalties(logits, p, h).ok());
  EXPECT_EQ(logits, (std::vector<float>{2.f, -6.f, 0.5f, 5.f}));
}

TEST(Penalties, frequency_scales_with_output_count_and_presence_counts_once_and_the_prompt_is_exempt) {
  SamplingParams p;
  p.frequency_penalty = 0.5;
  p.presence_penalty = 0.25;
  TokenHistory h(std::vector<std::int32_t>{3, 3}, false);
  for (const std::int32_t t : {0, 0, 0, 1}) h.add_output(t);
  std::vector<float> logits = {1.f, 1.f, 1.f, 1.f};
  ASSERT_TRUE(apply_penalties(logits, p, h).ok());
  EXPECT_FLOAT_EQ(logits[0], 1.f - 3 * 0.5f - 0.25f);
  EXPECT_FLOAT_EQ(logits[1], 1.f - 0.5f - 0.25f);
  EXPECT_EQ(logits[2], 1.f);
  EXPECT_EQ(logits[3], 1.f);
}

TEST(Penalties, negative_frequency_and_presence_penalties_encourage_repeats) {
  SamplingParams p;
  p.frequency_penalty = -1.0;
  p.presence_penalty = -0.5;
  TokenHistory h({}, false);
  h.add_output(1);
  h.add_output(1);
  std::vector<float> logits = {0.f, 0.f};
  ASSERT_TRUE(apply_penalties(logits, p, h).ok());
  EXPECT_FLOAT_EQ(logits[1], 2.5f);
}

TEST(Penalties, logit_bias_is_added_before_the_repetition_penalty) {
  SamplingParams p;
  p.logit_bias = {{0, 3.0}, {1, -100.0}};
  p.repetition_penalty = 2.0;
  TokenHistory h(std::vector<std::int32_t>{0}, true);
  std::vector<float> logits = {-1.f, 0.f};
  ASSERT_TRUE(apply_penalties(logits, p, h).ok());
  EXPECT_FLOAT_EQ(logits[0], 1.f);  // (-1 + 3) / 2
  EXPECT_FLOAT_EQ(logits[1], -100.f);
}

TEST(Penalties, order_is_repetition_then_frequency_and_presence) {
  SamplingParams p;
  p.repetition_penalty = 2.0;
  p.frequency_penalty = 1.0;
  TokenHistory h({}, true);
  h.add_output(0);
  std::vector<float> logits = {4.f};
  ASSERT_TRUE(apply_penalties(logits, p, h).ok());
  EXPECT_FLOAT_EQ(logits[0], 1.f);  // 4 / 2 - 1, not (4 - 1) / 2
}

TEST(Penalties, neutral_settings_or_an_empty_history_change_nothing) {
  SamplingParams p;
  TokenHistory h(std::vector<std::int32_t>{1, 2}, false);
  h.add_output(1);
  EXPECT_FALSE(penalties_apply(p, h));
  p.presence_penalty = 1.0;
  EXPECT_FALSE(penalties_apply(p, TokenHistory({}, false)));
  p.presence_penalty = 0.0;
  p.repetition_penalty = 1.5;
  EXPECT_FALSE(penalties_apply(p, TokenHistory({}, true)));
  EXPECT_TRUE(penalties_apply(p, TokenHistory(std::vector<std::int32_t>{0}, true)));
}

TEST(Penalties, a_token_id_outside_the_logits_is_an_error_naming_it) {
  SamplingParams p;
  p.repetition_penalty = 1.5;
  TokenHistory h(std::vector<std::int32_t>{7}, true);
  std::vector<float> logits = {0.f, 0.f};
  const Status s = apply_penalties(logits, p, h);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("token id 7"), std::string::npos) << s.error().message;
  SamplingParams b;
  b.logit_bias = {{2, 1.0}};
  EXPECT_FALSE(apply_penalties(logits, b, TokenHistory({}, false)).ok());
}

// The edits come by id (what Ops::edit_logits takes), an id's in the host's order: its biases as given, then the
// repetition penalty once (prompt or output), then frequency x count + presence (output only).
TEST(Penalties, edits_come_by_id_each_ids_in_the_order_the_host_applies_them) {
  SamplingParams p;
  p.repetition_penalty = 1.5;
  p.frequency_penalty = 0.5;
  p.presence_penalty = 0.25;
  p.logit_bias = {{9, 1.0}, {2, 3.0}, {9, -2.0}};
  TokenHistory h(std::vector<std::int32_t>{7, 2, 7, 4}, true);
  for (const std::int32_t t : {4, 8, 8}) h.add_output(t);
  std::vector<LogitEdit> e;
  ASSERT_TRUE(penalty_edits(p, h, 10, e).ok());
  using K = LogitEditKind;
  const std::vector<std::tuple<std::int32_t, LogitEditKind, float>> want = {
      {2, K::add, 3.f},        {2, K::repetition, 1.5f}, {4, K::repetition, 1.5f},
      {4, K::subtract, 0.75f}, {7, K::repetition, 1.5f}, {8, K::repetition, 1.5f},
      {8, K::subtract, 1.25f}, {9, K::add, 1.f},         {9, K::add, -2.f}};
  ASSERT_EQ(e.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(e[i].id, std::get<0>(want[i])) << i;
    EXPECT_EQ(e[i].kind, std::get<1>(want[i])) << i;
    EXPECT_EQ(e[i].value, std::get<2>(want[i])) << i;
  }
  EXPECT_FALSE(penalty_edits(p, h, 9, e).ok());  // bias id 9 outside 9 logits
}

bool same_edits(const std::vector<LogitEdit>& a, const std::vector<LogitEdit>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].id != b[i].id || a[i].kind != b[i].kind || a[i].value != b[i].value || a[i].next != b[i].next)
      return false;
  return true;
}

// Kept edits against penalty_edits of the same history after every output, for each mix of penalties, built at the
// first output or part way (a sequence's first penalised pick may come late), on ids seen in the prompt, the bias and
// neither.
TEST(SequencePenaltyEdits, follow_penalty_edits_output_by_output) {
  std::mt19937 rng(20261207);
  const std::size_t V = 64;
  for (int mix = 0; mix < 8; ++mix) {
    for (int trial = 0; trial < 6; ++trial) {
      SamplingParams p;
      p.repetition_penalty = mix & 1 ? 1.3 : 1.0;
      p.frequency_penalty = mix & 2 ? 0.4 : 0.0;
      p.presence_penalty = mix & 4 ? -0.7 : 0.0;
      std::uniform_int_distribution<std::int32_t> id(0, static_cast<std::int32_t>(V) - 1);
      for (int b = 0; b < trial; ++b) p.logit_bias.push_back({id(rng), b - 2.5});
      std::vector<std::int32_t> prompt(static_cast<std::size_t>(3 * trial));
      for (auto& t : prompt) t = id(rng);
      TokenHistory h(prompt, p.repetition_penalty != 1.0);
      SequencePenaltyEdits kept;
      const int build_at = trial % 3 == 0 ? 0 : 5 * trial;
      std::vector<LogitEdit> want;
      for (int step = 0; step < 60; ++step) {
        if (step >= build_at) {
          const auto got = kept.get(p, h, V);
          ASSERT_TRUE(got.ok()) << got.error().message;
          ASSERT_TRUE(penalty_edits(p, h, V, want).ok());
          ASSERT_TRUE(same_edits(**got, want)) << "mix " << mix << ", trial " << trial << ", step " << step;
        }
        const std::int32_t t = id(rng) % (step % 4 == 0 ? 64 : 12);  // repeats of a few ids, and fresh ones
        h.add_output(t);
        kept.add_output(p, h, t);
      }
    }
  }
}

TEST(SequencePenaltyEdits, an_output_outside_the_vocabulary_fails_the_next_get_naming_it) {
  SamplingParams p;
  p.presence_penalty = 0.5;
  TokenHistory h({}, false);
  SequencePenaltyEdits kept;
  ASSERT_TRUE(kept.get(p, h, 10).ok());
  h.add_output(12);
  kept.add_output(p, h, 12);
  const auto got = kept.get(p, h, 10);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.error().message.find("12"), std::string::npos) << got.error().message;
  EXPECT_TRUE(kept.get(p, h, 13).ok());  // and a vocabulary holding it builds again
}

}  // namespace
}  // namespace day0
