// The CUDA backend end to end on the tiny gpt_oss fixture against transformers' fp32 dumps: weights uploaded,
// bf16 matmuls with f32 accumulation, f32 activations. Every tap within 2e-2 relative (the bound for a
// bf16 path; bf16 keeps 8 mantissa bits, 2^-9 = 2e-3 per rounding, compounded over 2 layers and a few GEMMs),
// and the 32-token greedy continuation identical — or, where it differs, the reference's own logit gap at that
// step is a near-tie (within the same 2e-2 of its largest logit), which bf16 may flip. The same bound holds with
// the bf16 KV cache (K and V rounded once more, 2^-9).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

#include "model/load.h"
#include "model/reference_compare.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/cuda_test_util.h"
#include "quant/mxfp4.h"

namespace day0 {
namespace {

const std::string kModel = std::string(D0_TEST_DATA) + "/gpt_oss_tiny";
constexpr double kTolerance = 2e-2;

// max_step_tokens 0: LoadOptions' default.
Result<LoadedModel> load_cuda(std::int64_t max_tokens, DType kv_cache = DType::f32, std::int64_t max_step_tokens = 0,
                              Mxfp4Order order = Mxfp4Order::automatic,
                              ExpertCompute compute = ExpertCompute::bf16) {
  LoadOptions o;
  o.backend = "cuda";
  o.max_tokens = max_tokens;
  if (max_step_tokens > 0) o.max_step_tokens = max_step_tokens;
  o.backend_options.kv_cache_dtype = kv_cache;
  o.backend_options.mxfp4_order = order;
  o.backend_options.expert_compute = compute;
  o.backend_options.memory_fraction = 0.2;  // tiny model; leave the GPU to others
  return load_model(kModel, o);
}

// (prompt, KV cache dtype)
class CudaGptOssFixture : public ::testing::TestWithParam<std::tuple<int, DType>> {};

TEST_P(CudaGptOssFixture, every_tap_within_2e2_and_greedy_identical_or_a_near_tie) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  const auto [prompt, kv_cache] = GetParam();
  auto model = load_cuda(256, kv_cache);
  ASSERT_TRUE(model.ok()) << model.error().message;
  const std::string dump = kModel + "/reference/prompt" + std::to_string(prompt) + ".safetensors";
  auto cmp = compare_with_reference(*model->executor, dump, kTolerance);
  ASSERT_TRUE(cmp.ok()) << cmp.error().message;
  EXPECT_TRUE(cmp->missing.empty());
  EXPECT_EQ(cmp->taps.size(), 1u + 2 * 5 + 2);
  for (const auto& t : cmp->taps) {
    if (t.integer) {
      std::printf("  %-28s %lld mismatches\n", t.name.c_str(), static_cast<long long>(t.mismatches));
      EXPECT_EQ(t.mismatches, 0) << t.name;
    } else {
      std::printf("  %-28s rel %.3e  max abs %.3e\n", t.name.c_str(), t.rel, t.max_abs);
      EXPECT_LE(t.rel, kTolerance) << t.name;
    }
  }
  std::printf("  greedy: first mismatch %d, worst step logits rel %.3e\n", cmp->greedy_first_mismatch,
              cmp->greedy_logits_rel);
  EXPECT_EQ(cmp->greedy_steps, 32);
  EXPECT_LE(cmp->greedy_logits_rel, kTolerance);
  if (cmp->greedy_first_mismatch >= 0) {
    std::printf("  mismatch at step %d: reference gap %.3e of scale %.3f\n", cmp->greedy_first_mismatch,
                cmp->greedy_mismatch_ref_gap, cmp->greedy_mismatch_logit_scale);
    EXPECT_LE(cmp->greedy_mismatch_ref_gap, kTolerance * cmp->greedy_mismatch_logit_scale)
        << "greedy differs at step " << cmp->greedy_first_mismatch << " where the reference is not a near-tie";
  }
}

INSTANTIATE_TEST_SUITE_P(Prompts, CudaGptOssFixture,
                         ::testing::Combine(::testing::Values(0, 1, 2), ::testing::Values(DType::f32, DType::bf16)),
                         [](const auto& info) {
                           return "prompt" + std::to_string(std::get<0>(info.param)) + "_kv_" +
                                  std::string(dtype_name(std::get<1>(info.param)));
                         });

TEST(CudaGptOssFixtureDecode, decode_over_the_device_kv_cache_equals_a_chunked_prefill_of_the_same_tokens) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  // Sequence a: prefill 20, decode 12 one at a time. Sequence b: the same 32 tokens prefilled in chunks of 7
  // (max_step_tokens), so the chunked prefill and the decode path both attend over the device KV cache.
  std::vector<std::int32_t> tokens(32);
  for (int i = 0; i < 32; ++i) tokens[i] = (i * 37 + 11) % 256;
  auto a = load_cuda(64);
  ASSERT_TRUE(a.ok()) << a.error().message;
  Tensor last_a;
  auto first = a->executor->forward(std::span(tokens).subspan(0, 20));
  ASSERT_TRUE(first.ok()) << first.error().message;
  for (int i = 20; i < 32; ++i) {
    auto l = a->executor->forward(std::span(tokens).subspan(i, 1));
    ASSERT_TRUE(l.ok()) << l.error().message;
    last_a = *l;
  }
  auto b = load_cuda(64, DType::f32, 7);
  ASSERT_TRUE(b.ok()) << b.error().message;
  auto all = b->executor->forward(tokens, /*all_logits=*/true);
  ASSERT_TRUE(all.ok()) << all.error().message;
  ASSERT_EQ(all->size(0), 32);
  const Tensor last_b = all->slice_rows(31, 32);
  // Same kernels, different row batching in the GEMMs (cuBLASLt may pick other algorithms per M): ~1e-6.
  EXPECT_LE(cudatest::relative_norm_error(last_a, last_b), 1e-3);
}

// A prompt past the small-M kernel's rows: each MoE block's next norm hands the next layer's q/k/v GEMMs its bf16
// rows (Ops::linear_inputs_bf16). The same prompt in chunks of 100 rows (no hand-over) gives its logits within the
// GEMMs' row batching (~1e-6; a stale or wrong layer's rows would be off by O(1)).
TEST(CudaGptOssFixtureDecode, a_long_prompt_whose_norms_hand_over_bf16_rows_equals_it_in_small_chunks) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  std::vector<std::int32_t> tokens(200);
  for (int i = 0; i < 200; ++i) tokens[i] = (i * 53 + 7) % 256;
  auto logits_of = [&](std::int64_t max_step_tokens) -> Tensor {
    auto m = load_cuda(256, DType::bf16, max_step_tokens);
    EXPECT_TRUE(m.ok()) << m.error().message;
    if (!m.ok()) return Tensor();
    // A step's rows: the whole prompt, or a chunk.
    EXPECT_EQ(m->ops->linear_inputs_bf16(std::min<std::int64_t>(200, max_step_tokens)), max_step_tokens >= 200);
    auto all = m->executor->forward(tokens, /*all_logits=*/true);
    EXPECT_TRUE(all.ok()) << all.error().message;
    return all.ok() ? all->slice_rows(199, 200).clone() : Tensor();
  };
  const Tensor whole = logits_of(256), chunked = logits_of(100);
  ASSERT_TRUE(whole.defined() && chunked.defined());
  EXPECT_LE(cudatest::relative_norm_error(whole, chunked), 1e-3);
}

// Experts placed in the tiled MXFP4 order (BackendOptions::mxfp4_order: the device repack at placement, every MoE
// kernel reading it; the default where the rows fit, as here) give the row-major placement's logits bit for bit: a
// 200-token prefill (the grouped GEMMs) and 4 decode steps (the token kernels), in both expert computes. The memory
// report names the placed order.
TEST(CudaGptOssFixtureDecode, experts_placed_tile_by_tile_give_the_same_logits) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  std::vector<std::int32_t> tokens(204);
  for (int i = 0; i < 204; ++i) tokens[i] = (i * 41 + 3) % 256;
  for (ExpertCompute compute : {ExpertCompute::bf16, ExpertCompute::fp8}) {
    auto logits_of = [&](bool tiles) -> std::vector<Tensor> {
      auto m = load_cuda(256, DType::bf16, 0, tiles ? Mxfp4Order::automatic : Mxfp4Order::rows, compute);
      EXPECT_TRUE(m.ok()) << m.error().message;
      if (!m.ok()) return {};
      EXPECT_EQ(m->ops->placed_expert_storage(ExpertStorage::mxfp4),
                tiles ? ExpertStorage::mxfp4_tiled : ExpertStorage::mxfp4);
      bool reported = false;
      for (const MemoryUse& u : m->ops->memory_report())
        reported |= u.what == std::string("weights: experts (as stored: ") + (tiles ? "mxfp4_tiled)" : "mxfp4)");
      EXPECT_TRUE(reported);
      std::vector<Tensor> out;
      auto prefill = m->executor->forward(std::span(tokens).subspan(0, 200), /*all_logits=*/true);
      EXPECT_TRUE(prefill.ok()) << prefill.error().message;
      if (!prefill.ok()) return {};
      out.push_back(prefill->clone());
      for (int i = 200; i < 204; ++i) {
        auto l = m->executor->forward(std::span(tokens).subspan(i, 1));
        EXPECT_TRUE(l.ok()) << l.error().message;
        if (l.ok()) out.push_back(l->clone());
      }
      return out;
    };
    SCOPED_TRACE(std::string("compute ") + std::string(expert_compute_name(compute)));
    const std::vector<Tensor> rows = logits_of(false), tiles = logits_of(true);
    ASSERT_EQ(rows.size(), 5u);
    ASSERT_EQ(tiles.size(), 5u);
    for (std::size_t i = 0; i < rows.size(); ++i) EXPECT_TRUE(cudatest::same_bits(rows[i], tiles[i])) << "step " << i;
  }
}

TEST(CudaGptOssFixtureDecode, an_out_of_vocabulary_token_is_an_error_and_the_sequence_is_unchanged) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto m = load_cuda(64);
  ASSERT_TRUE(m.ok()) << m.error().message;
  const std::int32_t good[] = {1, 2, 3};
  ASSERT_TRUE(m->executor->forward(good).ok());
  const std::int32_t bad[] = {4, 1 << 30};
  auto r = m->executor->forward(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("outside the vocabulary"), std::string::npos) << r.error().message;
  EXPECT_EQ(m->executor->length(), 3);
  EXPECT_TRUE(m->executor->forward(good).ok());
}

}  // namespace
}  // namespace day0
