// The CPU reference path against transformers 5.17 (fp32) on the tiny gpt_oss fixture: every tap of the
// prefill within 1e-4 relative, and the 32-token greedy continuation identical, for all three prompts.
#include <gtest/gtest.h>

#include <string>

#include "model/load.h"
#include "model/reference_compare.h"

namespace day0 {
namespace {

const std::string kModel = std::string(D0_TEST_DATA) + "/gpt_oss_tiny";
// fp32 against fp32: only summation order differs, measured ~1e-6; 1e-4 is the bound.
constexpr double kTolerance = 1e-4;

class GptOssFixture : public ::testing::TestWithParam<int> {};

TEST_P(GptOssFixture, every_tap_within_1e4_and_greedy_continuation_identical_to_transformers) {
  auto model = load_model(kModel, "cpu", 256);
  ASSERT_TRUE(model.ok()) << model.error().message;
  const std::string dump = kModel + "/reference/prompt" + std::to_string(GetParam()) + ".safetensors";
  auto cmp = compare_with_reference(*model->executor, dump, kTolerance);
  ASSERT_TRUE(cmp.ok()) << cmp.error().message;
  EXPECT_TRUE(cmp->missing.empty()) << "reference tap not produced: " << cmp->missing.front();
  // embed, then per layer attn/router_indices/router_weights/moe/out, then final_norm and logits.
  EXPECT_EQ(cmp->taps.size(), 1u + 2 * 5 + 2);
  for (const auto& t : cmp->taps) {
    if (t.integer) {
      EXPECT_EQ(t.mismatches, 0) << t.name;
    } else {
      EXPECT_LE(t.rel, kTolerance) << t.name << " max abs " << t.max_abs;
    }
  }
  EXPECT_EQ(cmp->greedy_steps, 32);
  EXPECT_EQ(cmp->greedy_first_mismatch, -1);
  EXPECT_LE(cmp->greedy_logits_rel, kTolerance);
  EXPECT_TRUE(cmp->ok());
}

INSTANTIATE_TEST_SUITE_P(Prompts, GptOssFixture, ::testing::Values(0, 1, 2));

TEST(GptOssFixtureDecode, decode_over_the_kv_cache_equals_a_full_prefill_of_the_same_tokens) {
  // Prefill 20 tokens, decode 12 more one at a time; then prefill all 32 at once in a fresh sequence.
  auto a = load_model(kModel, "cpu", 64);
  auto b = load_model(kModel, "cpu", 64);
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<std::int32_t> ids;
  for (int i = 0; i < 32; ++i) ids.push_back((i * 37 + 11) % 250);
  auto logits = a->executor->forward(std::span(ids).first(20));
  ASSERT_TRUE(logits.ok());
  for (int i = 20; i < 32; ++i) {
    logits = a->executor->forward(std::span(ids).subspan(i, 1));
    ASSERT_TRUE(logits.ok()) << logits.error().message;
  }
  auto full = b->executor->forward(ids, /*all_logits=*/true);
  ASSERT_TRUE(full.ok());
  const Tensor last = full->slice_rows(31, 32);
  for (std::int64_t v = 0; v < last.numel(); ++v)
    EXPECT_NEAR(logits->data<float>()[v], last.data<float>()[v], 1e-5) << v;  // f32 order differences only
}

TEST(GptOssFixtureDecode, a_sequence_past_its_reserved_length_is_an_error_and_leaves_the_cache_unchanged) {
  auto m = load_model(kModel, "cpu", 8);
  ASSERT_TRUE(m.ok());
  std::vector<std::int32_t> ids(6, 5);
  ASSERT_TRUE(m->executor->forward(ids).ok());
  auto over = m->executor->forward(ids);
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.error().message.find("exceed"), std::string::npos) << over.error().message;
  EXPECT_EQ(m->executor->length(), 6);
}

}  // namespace
}  // namespace day0
