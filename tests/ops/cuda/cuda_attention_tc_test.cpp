// The tensor-core prefill attention (attention_tc_cuda.h, reached through paged_attention_cuda and
// attention_cuda with AttentionSplit::tensor_cores) against the CPU reference: mixed batches whose 128-row tiles
// straddle sequences, prompts continued at an offset, block sizes 16 and 7, GQA 64/8 and 8/1, windows, sinks;
// a bad block table gives NaN rows for its sequence only (f16 and bf16 operands); bf16 operands over a bf16 pool,
// NaN in the pool rows no key uses kept out. Skipped visibly without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "cuda_test_util.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cuda/attention_cuda.h"
#include "ops/cuda/attention_tc_cuda.h"
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

// Q, K, V and P rounded to 11 significant bits (relative 2^-11 each), f32 sums: ~5e-4 relative on random data;
// 2e-3 bounds it while a wrong mask, key or scale is off by O(1).
constexpr double kTolerance = 2e-3;

TEST(CudaAttentionTc, serves_prefill_shapes_only) {
  const AttentionParams gpt_oss{64, 8, 64, 0, 0.125f};
  EXPECT_FALSE(attention_tc_fits(63, gpt_oss));
  EXPECT_TRUE(attention_tc_fits(64, gpt_oss));
  EXPECT_FALSE(attention_tc_fits(4096, AttentionParams{4, 2, 16, 0, 1.f}));  // head_dim 16: the f32 kernel
}

TEST(CudaAttentionTc, paged_prefill_matches_the_cpu_reference_for_mixed_batches_windows_and_sinks) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(7301);
  const std::vector<cudatest::PagedCase> cases = {
      {{64, 8, 64, 0, 0.125f}, 16, {300}, {300}},                         // one whole prompt
      {{64, 8, 64, 0, 0.125f}, 16, {400, 129, 33, 1}, {150, 70, 33, 1}},  // tiles straddle sequences; a decode row
      {{64, 8, 64, 128, 0.125f}, 16, {700, 90}, {260, 90}},               // sliding window, chunk at an offset
      {{8, 1, 64, 0, 0.125f}, 7, {200, 64}, {130, 64}},                   // block size 7, one kv head
      {{8, 1, 64, 5, 0.3f}, 7, {100}, {64}},                              // a window shorter than a key tile
  };
  for (const cudatest::PagedCase& c : cases)
    for (bool sinks : {false, true}) {
      auto sc = optest::make_paged_scenario(rng, c.p, c.block_size, c.lengths, c.queries, sinks);
      ASSERT_TRUE(attention_tc_fits(sc.q.size(0), c.p));
      SCOPED_TRACE(::testing::Message() << "heads " << c.p.n_heads << " block " << c.block_size << " window "
                                        << c.p.sliding_window << " sinks " << sinks << " rows " << sc.q.size(0));
      AttentionSplit split;
      split.tensor_cores = true;
      const Tensor got = cudatest::run_paged_attention(*ctx, sc, sinks, split);
      EXPECT_EQ(count_nan(got), 0);
      const double err = relative_norm_error(got, sc.want);
      EXPECT_LE(err, kTolerance);
      EXPECT_GT(err, 0.0) << "11-bit rounding leaves a trace: an exact match means the f32 kernel ran";
    }
}

// The scenario's pools of bf16 values held as f32 (make_paged_scenario's bf16_kv) as bf16 bits: the same values
// exactly.
void use_bf16_pools(optest::PagedScenario& sc) {
  for (Tensor* pool : {&sc.k_pool, &sc.v_pool}) {
    Tensor out = Tensor::zeros(pool->shape(), DType::bf16);
    for (std::int64_t i = 0; i < pool->numel(); ++i)
      out.data<std::uint16_t>()[i] = f32_to_bf16(pool->data<float>()[i]);
    *pool = out;
  }
}

// bf16 operands over a bf16 pool: K and V exact (the pool's own values), Q and P rounded to 8 significant bits
// (relative 2^-9 each), f32 sums: 1.2e-3 to 1.6e-3 relative on the H200 (f16: 1.5e-4 to 1.9e-4); 1e-2 bounds it while
// a wrong mask, key, buffer or scale is off by O(1). The f16 form on the same pool keeps 11 bits: it must come
// closer, or the bf16 kernel did not run.
TEST(CudaAttentionTc, bf16_operands_over_a_bf16_pool_match_the_cpu_reference) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(7305);
  const std::vector<cudatest::PagedCase> cases = {
      {{64, 8, 64, 0, 0.125f}, 16, {300}, {300}},                         // one prompt: tiles in flight back to back
      {{64, 8, 64, 0, 0.125f}, 16, {400, 129, 33, 1}, {150, 70, 33, 1}},  // tiles straddle sequences; a decode row
      {{64, 8, 64, 128, 0.125f}, 16, {700, 90}, {260, 90}},               // sliding window, chunk at an offset
      {{8, 1, 64, 5, 0.3f}, 7, {100}, {64}},                              // block size 7, a window under a tile
  };
  for (const cudatest::PagedCase& c : cases)
    for (bool sinks : {false, true}) {
      auto sc = optest::make_paged_scenario(rng, c.p, c.block_size, c.lengths, c.queries, sinks, /*bf16_kv=*/true);
      use_bf16_pools(sc);
      SCOPED_TRACE(::testing::Message() << "heads " << c.p.n_heads << " block " << c.block_size << " window "
                                        << c.p.sliding_window << " sinks " << sinks << " rows " << sc.q.size(0));
      AttentionSplit split;
      split.tensor_cores = true;
      const double err_f16 = relative_norm_error(cudatest::run_paged_attention(*ctx, sc, sinks, split), sc.want);
      split.bf16_operands = true;
      const Tensor got = cudatest::run_paged_attention(*ctx, sc, sinks, split);
      EXPECT_EQ(count_nan(got), 0);
      const double err = relative_norm_error(got, sc.want);
      std::printf("[ attention bf16 operands ] rel. error %.3g (f16 operands %.3g)\n", err, err_f16);
      EXPECT_LE(err, 1e-2);
      EXPECT_GT(err, err_f16) << "8-bit Q and P leave more than 11-bit ones: the f16 kernel ran";
    }
}

// The pool rows no key uses (past a sequence's last key in its last block, blocks nobody holds) may hold anything:
// NaN there must not reach the output (P = 0 times NaN is NaN; a copy of a whole block would bring them in).
TEST(CudaAttentionTc, bf16_operands_keep_nan_in_unused_pool_rows_out_of_the_output) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(7307);
  const std::vector<cudatest::PagedCase> cases = {
      {{64, 8, 64, 0, 0.125f}, 16, {300, 129, 33}, {300, 70, 33}},  // last blocks part full, tiles straddle sequences
      {{64, 8, 64, 128, 0.125f}, 16, {700, 90}, {260, 90}},         // sliding window: a first tile before its keys
      {{8, 1, 64, 5, 0.3f}, 7, {100}, {64}},                        // block size 7: blocks straddle tiles
  };
  for (const cudatest::PagedCase& c : cases) {
    auto sc = optest::make_paged_scenario(rng, c.p, c.block_size, c.lengths, c.queries, false, /*bf16_kv=*/true);
    const std::int64_t rows = sc.k_pool.size(0), width = sc.k_pool.size(1), max_blocks = sc.tables.size(1);
    std::vector<bool> used(static_cast<std::size_t>(rows), false);
    const std::int32_t* tables = sc.tables.data<std::int32_t>();
    for (std::size_t b = 0; b < c.lengths.size(); ++b)
      for (std::int64_t t = 0; t < c.lengths[b]; ++t) {
        const std::int64_t block = tables[static_cast<std::int64_t>(b) * max_blocks + t / c.block_size];
        used[static_cast<std::size_t>(block * c.block_size + t % c.block_size)] = true;
      }
    for (std::int64_t r = 0; r < rows; ++r)
      if (!used[static_cast<std::size_t>(r)])
        for (Tensor* pool : {&sc.k_pool, &sc.v_pool})
          std::fill_n(pool->data<float>() + r * width, width, std::numeric_limits<float>::quiet_NaN());
    use_bf16_pools(sc);
    SCOPED_TRACE(::testing::Message() << "heads " << c.p.n_heads << " block " << c.block_size << " window "
                                      << c.p.sliding_window << " rows " << sc.q.size(0));
    AttentionSplit split;
    split.tensor_cores = split.bf16_operands = true;
    const Tensor got = cudatest::run_paged_attention(*ctx, sc, false, split);
    EXPECT_EQ(count_nan(got), 0);
    EXPECT_LE(relative_norm_error(got, sc.want), 1e-2);
  }
}

// The output's bf16 copy (AttentionSplit::out_bf16, the o projection's GEMM input) is its rounding to nearest even,
// bit for bit, from every kernel that writes the rows (tensor-core, group, the splits' merge: written as they go)
// and from the per-head kernel without splits (converted after); the f32 output is the same either way. With
// bf16_only, a kernel that writes the copy itself leaves out as it was (poisoned).
TEST(CudaAttentionTc, the_bf16_copy_of_the_output_is_its_rounding_on_every_kernel) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(7306);
  struct Form {
    const char* name;
    AttentionParams p;  // 8 query heads a KV head: the group kernel; 4: the per-head kernel
    bool tensor_cores;
    int splits;
    bool writes_copy;  // the kernel writing the rows writes the copy (else converted after)
  };
  const AttentionParams group{64, 8, 64, 0, 0.125f}, per_head{16, 4, 64, 0, 0.125f};
  for (const Form& f :
       {Form{"tensor cores", group, true, 1, true}, Form{"group", group, false, 1, true},
        Form{"group, 3 splits and the merge", group, false, 3, true}, Form{"per head", per_head, false, 1, false},
        Form{"per head, 2 splits and the merge", per_head, false, 2, true}}) {
    SCOPED_TRACE(f.name);
    auto sc = optest::make_paged_scenario(rng, f.p, 16, {400, 129, 33, 1}, {150, 70, 33, 1}, true, /*bf16_kv=*/true);
    use_bf16_pools(sc);
    AttentionSplit split;
    split.tensor_cores = split.bf16_operands = f.tensor_cores;
    split.splits = f.splits;
    if (f.splits > 1)
      split.partials = poisoned(*ctx, {attention_partials_floats(sc.q.size(0), f.p, f.splits)}, DType::f32);
    const Tensor alone = cudatest::run_paged_attention(*ctx, sc, true, split);
    split.out_bf16 = poisoned(*ctx, sc.want.shape(), DType::bf16);
    const Tensor with_copy = cudatest::run_paged_attention(*ctx, sc, true, split);
    EXPECT_TRUE(cudatest::same_bits(alone, with_copy));
    EXPECT_TRUE(cudatest::same_bits(download(*ctx, split.out_bf16), optest::to_bf16(with_copy)));
    EXPECT_EQ(count_nan(with_copy), 0);
    EXPECT_LE(relative_norm_error(with_copy, sc.want), 1e-2);
    split.bf16_only = true;
    split.out_bf16 = poisoned(*ctx, sc.want.shape(), DType::bf16);
    const Tensor copy_only = cudatest::run_paged_attention(*ctx, sc, true, split);
    EXPECT_TRUE(cudatest::same_bits(download(*ctx, split.out_bf16), optest::to_bf16(with_copy)));
    EXPECT_EQ(count_nan(copy_only), f.writes_copy ? copy_only.numel() : 0);
  }
}

TEST(CudaAttentionTc, contiguous_prefill_matches_the_cpu_attention) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(7302);
  const AttentionParams p{16, 2, 64, 0, 0.125f};
  const std::int64_t T = 333, S = 200;  // the queries are the last S of T positions
  const Tensor q = optest::random_f32({S, 16 * 64}, rng), k = optest::random_f32({T, 2 * 64}, rng),
               v = optest::random_f32({T, 2 * 64}, rng), sinks = optest::random_f32({16}, rng);
  std::vector<std::int32_t> pos(S);
  for (std::int64_t i = 0; i < S; ++i) pos[i] = static_cast<std::int32_t>(T - S + i);
  const Tensor q_pos = optest::i32_tensor(pos);
  CpuOps cpu;
  Tensor want = Tensor::zeros({S, 16 * 64}, DType::f32);
  D0_ASSERT_OK(cpu.attention(q, k, v, q_pos, sinks, p, want));
  AttentionSplit split;
  split.tensor_cores = true;
  Tensor out = poisoned(*ctx, {S, 16 * 64}, DType::f32);
  D0_ASSERT_OK(attention_cuda(upload(*ctx, q), upload(*ctx, k), upload(*ctx, v), upload(*ctx, q_pos),
                              upload(*ctx, sinks), p, out, ctx->stream(), split));
  const Tensor got = download(*ctx, out);
  EXPECT_EQ(count_nan(got), 0);
  EXPECT_LE(relative_norm_error(got, want), kTolerance);
}

TEST(CudaAttentionTc, keeps_its_precision_for_values_far_outside_the_f16_range) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(7304);
  const AttentionParams p{8, 2, 64, 0, 0.125f};
  const std::int64_t T = 150, S = 150;
  const Tensor q0 = optest::random_f32({S, 8 * 64}, rng), k0 = optest::random_f32({T, 2 * 64}, rng),
               v0 = optest::random_f32({T, 2 * 64}, rng);
  std::vector<std::int32_t> pos(S);
  for (std::int64_t i = 0; i < S; ++i) pos[i] = static_cast<std::int32_t>(i);
  const Tensor q_pos = optest::i32_tensor(pos);
  auto scaled = [](const Tensor& t, float f) {
    Tensor r = t.clone();
    for (std::int64_t i = 0; i < r.numel(); ++i) r.data<float>()[i] *= f;
    return r;
  };
  // Q up and K down by the same power of two leave the scores as they were; V moves the output with it. Either
  // way f16 alone overflows (2^20 > 65504) or loses the values to subnormals (2^-24 * 1 ~ its smallest step).
  for (auto [fq, fv] : {std::pair{0x1p20f, 0x1p30f}, std::pair{0x1p-24f, 0x1p-30f}}) {
    SCOPED_TRACE(::testing::Message() << "q x " << fq << ", v x " << fv);
    const Tensor q = scaled(q0, fq), k = scaled(k0, 1.f / fq), v = scaled(v0, fv);
    CpuOps cpu;
    Tensor want = Tensor::zeros({S, 8 * 64}, DType::f32);
    D0_ASSERT_OK(cpu.attention(q, k, v, q_pos, Tensor(), p, want));
    AttentionSplit split;
    split.tensor_cores = true;
    Tensor out = poisoned(*ctx, {S, 8 * 64}, DType::f32);
    D0_ASSERT_OK(attention_cuda(upload(*ctx, q), upload(*ctx, k), upload(*ctx, v), upload(*ctx, q_pos), Tensor(), p,
                                out, ctx->stream(), split));
    const Tensor got = download(*ctx, out);
    EXPECT_EQ(count_nan(got), 0);
    EXPECT_LE(relative_norm_error(got, want), kTolerance);
  }
}

TEST(CudaAttentionTc, a_table_reaching_outside_the_pool_gives_nan_rows_only_for_its_sequence) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(7303);
  const AttentionParams p{8, 1, 64, 0, 0.125f};
  for (bool bf16 : {false, true}) {  // f16 operands over an f32 pool; bf16 operands over a bf16 pool
    SCOPED_TRACE(::testing::Message() << "bf16 operands " << bf16);
    auto sc = optest::make_paged_scenario(rng, p, 16, {40, 60}, {40, 60}, false, bf16);
    if (bf16) use_bf16_pools(sc);
    sc.tables.data<std::int32_t>()[1] = 1 << 20;  // sequence 0's second block (positions 16..31) is outside the pool
    AttentionSplit split;
    split.tensor_cores = true;
    split.bf16_operands = bf16;
    const Tensor got = cudatest::run_paged_attention(*ctx, sc, false, split);
    const std::int64_t w = p.n_heads * p.head_dim;
    for (std::int64_t row = 0; row < 100; ++row) {
      // Sequence 0's rows at positions 16+ need the bad block; rows 0..15 do not; sequence 1 is untouched.
      const bool want_nan = row >= 16 && row < 40;
      for (std::int64_t i = 0; i < w; i += 17)
        EXPECT_EQ(std::isnan(got.data<float>()[row * w + i]), want_nan) << "row " << row;
    }
  }
}

}  // namespace
}  // namespace day0
