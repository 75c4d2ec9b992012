// The tensor-core GQA-group decode kernel (attention_group_tc_cuda.h: what bf16 KV pools decode with) against the
// CPU reference over the same bf16 keys and values, on fresh random scenarios: decode batches and short prefill
// chunks, block sizes 1/7/16, head_dim 64 and 128, windows, sinks, splits (chosen, forced, fixed-length), and a
// table reaching outside the pool.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "cuda_test_util.h"
#include "ops/cuda/attention_cuda.h"
#include "ops/op_test_util.h"
#include "ops/paged_kv_scenario.h"
#include "paged_attention_run.h"

namespace day0 {
namespace {

using cudatest::count_nan;
using cudatest::make_context;
using cudatest::poisoned;
using cudatest::relative_norm_error;

// q and P enter the MMAs as a bf16 high part plus a bf16 remainder (~16 significant bits, 2^-17 relative per
// term), K and V exactly, all sums in f32: ~1e-5 of relative norm error on these scenarios. A q or P rounded to
// plain bf16 would give ~3e-3.
constexpr double kTolerance = 4e-5;

// The scenario's pools as bf16 (they hold bf16 values already: make_paged_scenario's bf16_kv).
Tensor run_bf16(CudaContext& ctx, optest::PagedScenario sc, bool sinks, const AttentionSplit& split) {
  sc.k_pool = optest::to_bf16(sc.k_pool);
  sc.v_pool = optest::to_bf16(sc.v_pool);
  return cudatest::run_paged_attention(ctx, sc, sinks, split);
}

TEST(CudaAttentionGroupTc, matches_the_cpu_reference_over_bf16_keys_for_batches_windows_sinks_and_splits) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(41);
  const std::vector<cudatest::PagedCase> cases = {
      // gpt-oss decode (64 heads over 8, d 64): a batch of 9, one long context, a window of 128.
      {{64, 8, 64, 0, 0.125f}, 16, {300, 17, 64, 5, 90, 33, 200, 7, 1000}, {1, 1, 1, 1, 1, 1, 1, 1, 1}},
      {{64, 8, 64, 0, 0.125f}, 16, {2000}, {1}},
      {{64, 8, 64, 128, 0.125f}, 16, {2000, 3, 129}, {1, 1, 1}},
      // Short prefill chunks (query rows below the tensor-core prefill's 64), block sizes 1 and 7.
      {{64, 8, 64, 0, 0.125f}, 1, {40, 23}, {7, 23}},
      {{16, 2, 64, 5, 0.3f}, 7, {50, 8, 14}, {3, 8, 1}},
      // head_dim 128.
      {{32, 4, 128, 0, 0.09f}, 16, {700, 1, 77}, {1, 1, 2}},
      {{8, 1, 128, 100, 0.09f}, 16, {1500, 300}, {1, 1}},
  };
  double worst = 0;
  for (const cudatest::PagedCase& c : cases)
    for (bool sinks : {false, true})
      for (int forced : {1, 0, 3, 16}) {
        auto sc = optest::make_paged_scenario(rng, c.p, c.block_size, c.lengths, c.queries, sinks, /*bf16_kv=*/true);
        AttentionSplit split;
        split.splits = forced > 0 ? forced : attention_splits(sc.q.size(0), c.p, sc.tables.size(1) * c.block_size, 132);
        SCOPED_TRACE(::testing::Message()
                     << "heads " << c.p.n_heads << " d " << c.p.head_dim << " block " << c.block_size << " window "
                     << c.p.sliding_window << " sinks " << sinks << " splits " << split.splits);
        if (split.splits > 1)
          split.partials = poisoned(*ctx, {attention_partials_floats(sc.q.size(0), c.p, split.splits)}, DType::f32);
        const Tensor got = run_bf16(*ctx, sc, sinks, split);
        EXPECT_EQ(count_nan(got), 0);
        const double err = relative_norm_error(got, sc.want);
        EXPECT_LE(err, kTolerance);
        worst = std::max(worst, err);
      }
  std::printf("[ attention tc decode ] worst relative norm error against the CPU over bf16 keys: %.3g\n", worst);
}

// Batch-invariant mode's fixed-length splits: a query's bits do not depend on how many splits the step has.
TEST(CudaAttentionGroupTc, fixed_length_splits_give_each_query_the_same_bits_whatever_the_split_count) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(42);
  const AttentionParams p{64, 8, 64, 0, 0.125f};
  const auto sc = optest::make_paged_scenario(rng, p, 16, {2000, 300, 5, 90, 33, 700, 7, 1000, 64},
                                              {1, 1, 1, 1, 1, 1, 1, 1, 1}, true, /*bf16_kv=*/true);
  std::vector<Tensor> outs;
  for (int splits : {8, 16, 40}) {
    AttentionSplit split;
    split.splits = splits;
    split.keys_per_split = 256;
    split.partials = poisoned(*ctx, {attention_partials_floats(sc.q.size(0), p, splits)}, DType::f32);
    outs.push_back(run_bf16(*ctx, sc, true, split));
    EXPECT_LE(relative_norm_error(outs.back(), sc.want), kTolerance) << splits << " splits";
  }
  for (size_t i = 1; i < outs.size(); ++i) EXPECT_TRUE(cudatest::same_bits(outs[i], outs[0])) << "split count " << i;
}

TEST(CudaAttentionGroupTc, a_table_reaching_outside_the_pool_gives_nan_rows_only_for_its_queries) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(43);
  const AttentionParams p{64, 8, 64, 0, 0.125f};
  for (int splits : {1, 2}) {
    auto sc = optest::make_paged_scenario(rng, p, 16, {60, 50}, {1, 1}, false, /*bf16_kv=*/true);
    sc.tables.data<std::int32_t>()[0] = 1 << 20;  // sequence 0's first block is far outside the pool
    AttentionSplit split;
    split.splits = splits;
    if (splits > 1) split.partials = poisoned(*ctx, {attention_partials_floats(2, p, splits)}, DType::f32);
    const Tensor got = run_bf16(*ctx, sc, false, split);
    const std::int64_t w = p.n_heads * p.head_dim;
    for (std::int64_t i = 0; i < w; ++i) EXPECT_TRUE(std::isnan(got.data<float>()[i])) << "splits " << splits;
    const Tensor second = got.slice_rows(1, 2).clone(), want = sc.want.slice_rows(1, 2).clone();
    EXPECT_EQ(count_nan(second), 0);
    EXPECT_LE(relative_norm_error(second, want), kTolerance) << "splits " << splits;
  }
}

}  // namespace
}  // namespace day0
