// CUDA paged attention and KV slot writes against the CPU reference on fresh random scenarios: batches of
// sequences of different lengths (decode rows, prefill chunks at an offset, whole prompts), shuffled block
// tables with padding, block sizes 1/16/7, GQA 64/8 at d=64 (gpt-oss) and small odd shapes, windows, sinks;
// decode batches of 8+ rows run one block per (query, KV head) for the whole group.
#include <gtest/gtest.h>

#include <climits>
#include <cstring>
#include <random>

#include "cuda_test_util.h"
#include "ops/cuda/attention_cuda.h"
#include "ops/cuda/attention_keys.cuh"
#include "ops/op_test_util.h"
#include "ops/paged_kv_scenario.h"
#include "paged_attention_run.h"

namespace day0 {
namespace {

using cudatest::count_nan;
using cudatest::download;
using cudatest::make_context;
using cudatest::poisoned;
using cudatest::relative_norm_error;
using cudatest::upload;

// f32 throughout, only the order of the softmax sums differs from the CPU (online vs two-pass): ~1e-7.
constexpr double kTolerance = 1e-5;

TEST(CudaPagedAttention, matches_the_cpu_reference_for_mixed_batches_block_sizes_windows_and_sinks) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(21);
  const std::vector<cudatest::PagedCase> cases = {
      {{4, 2, 16, 0, 0.25f}, 1, {5, 3, 9}, {1, 3, 2}},
      {{64, 8, 64, 0, 0.125f}, 16, {300, 17, 1, 64}, {1, 17, 1, 40}},
      {{64, 8, 64, 128, 0.125f}, 16, {400, 129, 33}, {1, 70, 33}},
      {{6, 3, 24, 5, 0.2f}, 7, {50, 8, 14}, {3, 8, 1}},
      {{64, 8, 64, 0, 0.125f}, 16, {2000}, {1}},  // decode at a long context: the split-K case
      {{8, 1, 64, 0, 0.125f}, 16, {1500, 700, 3}, {1, 1, 1}},
      // A decode batch of 9 with 8 query heads per KV head: blocks per (query, KV head) (attention_reads_kv_once).
      {{64, 8, 64, 0, 0.125f}, 16, {300, 17, 64, 5, 90, 33, 200, 7, 1000}, {1, 1, 1, 1, 1, 1, 1, 1, 1}},
      {{16, 2, 64, 128, 0.125f}, 16, {300, 17, 64, 5, 90, 33, 200, 7, 1000}, {1, 1, 1, 1, 1, 1, 1, 2, 1}},
  };
  // splits 0: what attention_splits picks for an H200 (132 SMs); others forced, more than some rows have keys.
  for (const cudatest::PagedCase& c : cases)
    for (bool sinks : {false, true})
      for (int forced : {1, 0, 3, 16}) {
        auto sc = optest::make_paged_scenario(rng, c.p, c.block_size, c.lengths, c.queries, sinks);
        AttentionSplit split;
        split.splits = forced > 0 ? forced : attention_splits(sc.q.size(0), c.p, sc.tables.size(1) * c.block_size, 132);
        SCOPED_TRACE(::testing::Message()
                     << "heads " << c.p.n_heads << " d " << c.p.head_dim << " block " << c.block_size << " window "
                     << c.p.sliding_window << " sinks " << sinks << " splits " << split.splits);
        if (split.splits > 1)
          split.partials = poisoned(*ctx, {attention_partials_floats(sc.q.size(0), c.p, split.splits)}, DType::f32);
        const Tensor got = cudatest::run_paged_attention(*ctx, sc, sinks, split);
        EXPECT_EQ(count_nan(got), 0);
        EXPECT_LE(relative_norm_error(got, sc.want), kTolerance);
      }
}

TEST(CudaPagedAttention, decode_splits_spread_long_contexts_over_the_sms) {
  const AttentionParams p{64, 8, 64, 0, 0.125f};
  EXPECT_EQ(attention_splits(1, p, 8192, 132), 64);    // 8 KV-head blocks: ~4 per SM wants 66, 128 keys each
  EXPECT_EQ(attention_splits(1, p, 200, 132), 1);      // one chunk of keys: nothing to split
  EXPECT_EQ(attention_splits(4096, p, 8192, 132), 1);  // prefill fills the GPU already
  AttentionParams windowed = p;
  windowed.sliding_window = 128;
  EXPECT_EQ(attention_splits(1, windowed, 8192, 132), 1);  // the window bounds the keys
}

// The splits a decode step launches are sized for the block tables' capacity; a query takes those its keys fill,
// one a 128-key chunk (the merge reads only those), and a bad position still names at least one.
TEST(CudaPagedAttention, a_query_uses_the_splits_its_keys_fill) {
  EXPECT_EQ(live_splits(1023, 0, 64, 0), 8);   // 1,024 keys in tables sized for 8,192: 8 splits, not 64
  EXPECT_EQ(live_splits(8191, 0, 64, 0), 64);  // the longest context fills them all
  EXPECT_EQ(live_splits(999, 0, 64, 0), 8);    // a part chunk takes a split
  EXPECT_EQ(live_splits(128, 0, 64, 0), 2);
  EXPECT_EQ(live_splits(0, 0, 64, 0), 1);
  EXPECT_EQ(live_splits(1023, 0, 4, 0), 4);        // never more than launched
  EXPECT_EQ(live_splits(5000, 128, 64, 0), 1);     // a sliding window's 128 keys
  EXPECT_EQ(live_splits(5000, 0, 16, 2048), 3);    // fixed-length splits: those holding keys
  EXPECT_EQ(live_splits(-1, 0, 64, 0), 1);         // bad positions: the merge still reads split 0's NaN
  EXPECT_EQ(live_splits(INT_MIN, 128, 64, 0), 1);  // no overflow in pos - window + 1
  EXPECT_EQ(live_splits(INT_MAX, 0, 64, 0), 64);
}

// Batch-invariant mode: splits of a fixed length (at least 2, so every query merges), bounded by the window.
TEST(CudaPagedAttention, invariant_splits_have_a_fixed_length_and_always_merge) {
  const AttentionParams p{64, 8, 64, 0, 0.125f};
  EXPECT_EQ(attention_invariant_splits(p, 100), 2);
  EXPECT_EQ(attention_invariant_splits(p, 8192), 8192 / kAttentionInvariantKeysPerSplit);
  EXPECT_EQ(attention_invariant_splits(p, 131072), 131072 / kAttentionInvariantKeysPerSplit);
  AttentionParams windowed = p;
  windowed.sliding_window = 128;
  EXPECT_EQ(attention_invariant_splits(windowed, 131072), 2);
}

// Fixed-length splits: a query's output is the same to the bit however many splits the step has (the extra ones
// are empty) and matches the CPU, on the GQA-group kernel (9 decode rows); a fixed length without 2+ splits is
// refused.
TEST(CudaPagedAttention, fixed_length_splits_give_each_query_the_same_bits_whatever_the_split_count) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(25);
  const AttentionParams p{64, 8, 64, 0, 0.125f};
  auto sc = optest::make_paged_scenario(rng, p, 16, {2000, 300, 5, 90, 33, 700, 7, 1000, 64},
                                        {1, 1, 1, 1, 1, 1, 1, 1, 1}, true);
  std::vector<Tensor> outs;
  for (int splits : {8, 16, 40}) {
    AttentionSplit split;
    split.splits = splits;
    split.keys_per_split = 256;
    split.partials = poisoned(*ctx, {attention_partials_floats(sc.q.size(0), p, splits)}, DType::f32);
    outs.push_back(cudatest::run_paged_attention(*ctx, sc, true, split));
    EXPECT_LE(relative_norm_error(outs.back(), sc.want), kTolerance) << splits << " splits";
  }
  for (size_t i = 1; i < outs.size(); ++i)
    EXPECT_EQ(std::memcmp(outs[i].raw(), outs[0].raw(), outs[0].nbytes()), 0) << "split count " << i;
  AttentionSplit bad;
  bad.keys_per_split = 256;  // one split: nothing to merge
  Tensor out = poisoned(*ctx, sc.want.shape(), DType::f32);
  PagedKv kv{upload(*ctx, sc.tables), upload(*ctx, sc.q_seq), sc.block_size};
  const Status st =
      paged_attention_cuda(upload(*ctx, sc.q), upload(*ctx, sc.k_pool), upload(*ctx, sc.v_pool), upload(*ctx, sc.q_pos),
                           kv, upload(*ctx, sc.sinks), p, out, ctx->stream(), bad);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("keys_per_split"), std::string::npos) << st.error().message;
}

TEST(CudaPagedAttention, batched_decode_serves_a_whole_gqa_group_per_block_and_splits_by_those_blocks) {
  const AttentionParams gpt_oss{64, 8, 64, 0, 0.125f};
  EXPECT_TRUE(attention_reads_kv_once(1, gpt_oss));  // the group kernel: splits keep the SMs busy
  EXPECT_TRUE(attention_reads_kv_once(7, gpt_oss));
  EXPECT_FALSE(attention_reads_kv_once(1, AttentionParams{64, 8, 32, 0, 1.f}));  // head_dim 32: per head below 8
  EXPECT_TRUE(attention_reads_kv_once(8, AttentionParams{64, 8, 32, 0, 1.f}));
  EXPECT_TRUE(attention_reads_kv_once(8, gpt_oss));
  EXPECT_TRUE(attention_reads_kv_once(64, gpt_oss));
  EXPECT_FALSE(attention_reads_kv_once(64, AttentionParams{4, 2, 16, 0, 1.f}));  // groups of 2: per head
  // 64 queries x 8 KV heads = 512 blocks, ~3.9 per SM already: no split (and no merge kernel).
  EXPECT_EQ(attention_splits(64, gpt_oss, 1024, 132), 1);
  EXPECT_EQ(attention_splits(48, gpt_oss, 1024, 132), 2);  // 384 blocks: under 3 per SM, split in 2
  EXPECT_EQ(attention_splits(4, gpt_oss, 1024, 132), 8);  // 32 blocks want 17 splits; 1,024 keys make 8 chunks
}

TEST(CudaPagedAttention, a_table_reaching_outside_the_pool_gives_nan_rows_only_for_its_queries) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(22);
  const AttentionParams p{2, 1, 8, 0, 0.3f};
  for (int splits : {1, 2}) {
    auto sc = optest::make_paged_scenario(rng, p, 4, {6, 5}, {1, 1}, false);
    sc.tables.data<std::int32_t>()[0] = 1 << 20;  // sequence 0's first block is far outside the pool
    AttentionSplit split;
    split.splits = splits;
    if (splits > 1) split.partials = poisoned(*ctx, {attention_partials_floats(2, p, splits)}, DType::f32);
    const Tensor got = cudatest::run_paged_attention(*ctx, sc, false, split);
    const std::int64_t w = p.n_heads * p.head_dim;
    for (std::int64_t i = 0; i < w; ++i) EXPECT_TRUE(std::isnan(got.data<float>()[i])) << "splits " << splits;
    for (std::int64_t i = w; i < 2 * w; ++i) EXPECT_EQ(got.data<float>()[i], got.data<float>()[i]);  // not NaN
  }
}

TEST(CudaKvWrite, rows_land_in_their_slots_and_a_bad_slot_raises_the_flag_without_writing) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(23);
  const Tensor k = optest::random_f32({3, 5}, rng), v = optest::random_f32({3, 5}, rng);
  Tensor kp = cudatest::zeroed(*ctx, {8, 5}, DType::f32), vp = cudatest::zeroed(*ctx, {8, 5}, DType::f32);
  Tensor flag = cudatest::zeroed(*ctx, {1}, DType::i32);
  D0_ASSERT_OK(kv_write_cuda(upload(*ctx, k), upload(*ctx, v), upload(*ctx, optest::i32_tensor({5, 0, 7})), kp, vp,
                             flag, ctx->stream()));
  const Tensor hk = download(*ctx, kp), hv = download(*ctx, vp);
  for (int c = 0; c < 5; ++c) {
    EXPECT_EQ(hk.data<float>()[5 * 5 + c], k.data<float>()[c]);
    EXPECT_EQ(hv.data<float>()[7 * 5 + c], v.data<float>()[2 * 5 + c]);
  }
  EXPECT_EQ(cudatest::download_flag(*ctx, flag), 0);
  D0_ASSERT_OK(kv_write_cuda(upload(*ctx, k), upload(*ctx, v), upload(*ctx, optest::i32_tensor({1, 9, 2})), kp, vp,
                             flag, ctx->stream()));
  EXPECT_EQ(cudatest::download_flag(*ctx, flag), 1);
}

}  // namespace
}  // namespace day0
