// CUDA attention against CpuOps::attention on fresh seeded random inputs: GQA 4/2, 8/1 and 64/8 (gpt-oss),
// head_dim 16/64/128 (plus 72 and 256 at the edges of the lane split), prefill and decode, full causal and
// sliding windows, with and without f32/bf16/f16 sinks; queries sit at the last S of T positions. Outputs are
// NaN-poisoned before each launch. Argument errors are checked without a device where they can be.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cuda/attention_cuda.h"
#include "ops/op_test_util.h"

namespace day0 {
namespace {

using cudatest::count_nan;
using cudatest::download;
using cudatest::make_context;
using cudatest::poisoned;
using cudatest::relative_norm_error;
using cudatest::upload;
using optest::random_f32;
using optest::to_bf16;

enum class Sinks { none, f32, bf16 };

const char* sinks_name(Sinks s) { return s == Sinks::none ? "none" : s == Sinks::f32 ? "f32" : "bf16"; }

// Queries at positions T-S .. T-1 (the new tokens after T-S cached ones).
Tensor last_positions(std::int64_t S, std::int64_t T) {
  std::vector<std::int32_t> pos(static_cast<std::size_t>(S));
  for (std::int64_t s = 0; s < S; ++s) pos[s] = static_cast<std::int32_t>(T - S + s);
  return optest::i32_tensor(pos);
}

// One case: the kernel against the CPU reference on fresh inputs; failures carry the case in their trace.
void check_case(CudaContext& ctx, std::mt19937& rng, int n_heads, int n_kv_heads, int d, std::int64_t S,
                std::int64_t T, int window, Sinks sink_kind) {
  SCOPED_TRACE(::testing::Message() << "heads " << n_heads << "/" << n_kv_heads << " d " << d << " S " << S << " T "
                                    << T << " window " << window << " sinks " << sinks_name(sink_kind));
  CpuOps cpu;
  AttentionParams p;
  p.n_heads = n_heads;
  p.n_kv_heads = n_kv_heads;
  p.head_dim = d;
  p.sliding_window = window;
  p.scale = 1.f / std::sqrt(static_cast<float>(d));
  // q spread wider than k so the scaled logits span several units and the softmax is far from uniform.
  const Tensor q = random_f32({S, std::int64_t(n_heads) * d}, rng, -4.f, 4.f);
  const Tensor k = random_f32({T, std::int64_t(n_kv_heads) * d}, rng, -1.f, 1.f);
  const Tensor v = random_f32({T, std::int64_t(n_kv_heads) * d}, rng, -1.f, 1.f);
  const Tensor pos = last_positions(S, T);
  Tensor sinks;
  if (sink_kind != Sinks::none) {
    // Sinks from well below to well above the logits: some heads barely notice theirs, some are dominated.
    sinks = random_f32({n_heads}, rng, -3.f, 6.f);
    if (sink_kind == Sinks::bf16) sinks = to_bf16(sinks);
  }
  Tensor want = Tensor::zeros({S, std::int64_t(n_heads) * d}, DType::f32);
  D0_ASSERT_OK(cpu.attention(q, k, v, pos, sinks, p, want));

  Tensor d_out = poisoned(ctx, want.shape(), DType::f32);
  const Tensor d_sinks = sinks.defined() ? upload(ctx, sinks) : Tensor();
  D0_ASSERT_OK(attention_cuda(upload(ctx, q), upload(ctx, k), upload(ctx, v), upload(ctx, pos), d_sinks, p, d_out,
                              ctx.stream()));
  const Tensor got = download(ctx, d_out);
  EXPECT_EQ(count_nan(got), 0);
  // Both sides are f32; the kernel sums in another order (warp-tree dot products, online rescaling, one division
  // at the end instead of per-probability), so a few ulps per element: 1e-5 in relative norm is ~100 ulps.
  EXPECT_LT(relative_norm_error(got, want), 1e-5);
}

// Every (S, T, window, sinks) combination for one head layout and head_dim set.
void check_layout(int n_heads, int n_kv_heads, std::initializer_list<int> head_dims, unsigned seed) {
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(seed);
  for (int d : head_dims)
    for (std::int64_t S : {1, 7, 130})
      // T = S: prefill from an empty cache (decode of the very first token when S = 1); the larger T puts the
      // queries behind a cache, up to 300 keys = 3 chunks of 128.
      for (std::int64_t T : {S, std::min<std::int64_t>(300, S + 170)})
        for (int window : {0, 8, 128})
          for (Sinks sk : {Sinks::none, Sinks::f32, Sinks::bf16}) {
            const auto mark = ctx->arena().mark();
            check_case(*ctx, rng, n_heads, n_kv_heads, d, S, T, window, sk);
            D0_ASSERT_OK(ctx->arena().release(mark));
            if (::testing::Test::HasFatalFailure()) return;
          }
}

TEST(CudaAttention, matches_cpu_for_gqa_4_over_2_across_head_dims_lengths_windows_and_sinks) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  check_layout(4, 2, {16, 64, 128}, 2001);
}

TEST(CudaAttention, matches_cpu_for_gqa_8_over_1_across_head_dims_lengths_windows_and_sinks) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  check_layout(8, 1, {16, 64, 128}, 2002);
}

TEST(CudaAttention, matches_cpu_for_gpt_oss_64_over_8_heads_across_head_dims_lengths_windows_and_sinks) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  check_layout(64, 8, {16, 64, 128}, 2003);
}

TEST(CudaAttention, matches_cpu_at_odd_and_maximal_head_dims_and_with_f16_sinks) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(2004);
  // 72: lanes not a multiple of 32; 256: every thread owns two output lanes.
  for (int d : {72, 256})
    for (int window : {0, 8}) check_case(*ctx, rng, 4, 2, d, 7, 200, window, Sinks::f32);

  // f16 sinks (the CPU reference reads them too): same check, converted by hand.
  CpuOps cpu;
  AttentionParams p{8, 2, 64, 0, 0.125f};
  const std::int64_t S = 5, T = 150;
  const Tensor q = random_f32({S, 8 * 64}, rng, -4.f, 4.f), k = random_f32({T, 2 * 64}, rng),
               v = random_f32({T, 2 * 64}, rng), pos = last_positions(S, T);
  const std::vector<std::uint16_t> f16_bits = {0x3C00, 0xC000, 0x4400, 0x0000, 0xBC00, 0x4200, 0x3800, 0x4500};
  Tensor sinks = Tensor::zeros({8}, DType::f16);  // 1, -2, 4, 0, -1, 3, 0.5, 5
  for (int i = 0; i < 8; ++i) sinks.data<std::uint16_t>()[i] = f16_bits[i];
  Tensor want = Tensor::zeros({S, 8 * 64}, DType::f32);
  D0_ASSERT_OK(cpu.attention(q, k, v, pos, sinks, p, want));
  Tensor d_out = poisoned(*ctx, want.shape(), DType::f32);
  D0_ASSERT_OK(attention_cuda(upload(*ctx, q), upload(*ctx, k), upload(*ctx, v), upload(*ctx, pos),
                              upload(*ctx, sinks), p, d_out, ctx->stream()));
  const Tensor got = download(*ctx, d_out);
  EXPECT_EQ(count_nan(got), 0);
  // As above: f32 on both sides, another summation order.
  EXPECT_LT(relative_norm_error(got, want), 1e-5);
}

TEST(CudaAttention, a_query_position_outside_the_keys_gets_a_nan_row_and_the_others_are_still_right) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(2005);
  AttentionParams p{4, 2, 16, 0, 0.25f};
  const std::int64_t T = 10;
  const Tensor q = random_f32({3, 64}, rng), k = random_f32({T, 32}, rng), v = random_f32({T, 32}, rng);
  Tensor d_out = poisoned(*ctx, {3, 64}, DType::f32);
  D0_ASSERT_OK(attention_cuda(upload(*ctx, q), upload(*ctx, k), upload(*ctx, v),
                              upload(*ctx, optest::i32_tensor({9, 10, -1})), Tensor(), p, d_out, ctx->stream()));
  const Tensor got = download(*ctx, d_out);
  for (std::int64_t i = 0; i < 64; ++i) EXPECT_FALSE(std::isnan(got.data<float>()[i])) << i;
  for (std::int64_t i = 64; i < 3 * 64; ++i) EXPECT_TRUE(std::isnan(got.data<float>()[i])) << i;
  // Row 0 (position 9) against the reference alone.
  CpuOps cpu;
  Tensor want = Tensor::zeros({1, 64}, DType::f32), got0 = Tensor::zeros({1, 64}, DType::f32);
  Tensor q0 = Tensor::zeros({1, 64}, DType::f32);
  for (int i = 0; i < 64; ++i) q0.data<float>()[i] = q.data<float>()[i], got0.data<float>()[i] = got.data<float>()[i];
  D0_ASSERT_OK(cpu.attention(q0, k, v, optest::i32_tensor({9}), Tensor(), p, want));
  // f32, another summation order.
  EXPECT_LT(relative_norm_error(got0, want), 1e-5);
}

// Host tensors with valid shapes, for the checks that come before any device access.
struct HostArgs {
  Tensor q = Tensor::zeros({2, 4 * 16}, DType::f32), k = Tensor::zeros({5, 2 * 16}, DType::f32),
         v = Tensor::zeros({5, 2 * 16}, DType::f32), pos = optest::i32_tensor({3, 4}),
         out = Tensor::zeros({2, 4 * 16}, DType::f32);
};

::testing::AssertionResult fails_with(const Status& st, const std::string& part) {
  if (st.ok()) return ::testing::AssertionFailure() << "succeeded, expected an error mentioning '" << part << "'";
  if (!optest::contains(st.error().message, part))
    return ::testing::AssertionFailure() << "'" << st.error().message << "' does not mention '" << part << "'";
  return ::testing::AssertionSuccess();
}

TEST(CudaAttention, rejects_bad_head_layouts_and_host_tensors_without_a_device) {
  // No device needed: validation happens before any CUDA call.
  HostArgs a;
  const auto call = [&](AttentionParams p) { return attention_cuda(a.q, a.k, a.v, a.pos, Tensor(), p, a.out, nullptr); };
  EXPECT_TRUE(fails_with(call({4, 3, 16, 0, 1.f}), "multiple of n_kv_heads"));
  EXPECT_TRUE(fails_with(call({0, 0, 16, 0, 1.f}), "multiple of n_kv_heads"));
  EXPECT_TRUE(fails_with(call({4, 2, 0, 0, 1.f}), "head_dim"));
  EXPECT_TRUE(fails_with(call({4, 2, 272, 0, 1.f}), "head_dim"));
  EXPECT_TRUE(fails_with(call({4, 2, 16, -1, 1.f}), "sliding_window"));
  EXPECT_TRUE(fails_with(call({4, 2, 16, 0, NAN}), "scale"));
  const Status st = call({4, 2, 16, 0, 0.25f});
  EXPECT_TRUE(fails_with(st, "q must be"));
  EXPECT_TRUE(fails_with(st, "on cpu"));
}

TEST(CudaAttention, rejects_mismatched_shapes_dtypes_and_sinks_naming_the_argument) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  HostArgs h;
  const Tensor q = upload(*ctx, h.q), k = upload(*ctx, h.k), v = upload(*ctx, h.v), pos = upload(*ctx, h.pos);
  Tensor out = poisoned(*ctx, {2, 64}, DType::f32);
  const AttentionParams p{4, 2, 16, 0, 0.25f};
  const cudaStream_t s = ctx->stream();
  // The baseline succeeds; each mutation below breaks exactly one argument.
  D0_ASSERT_OK(attention_cuda(q, k, v, pos, Tensor(), p, out, s));
  const Tensor v_short = poisoned(*ctx, {4, 32}, DType::f32);
  EXPECT_TRUE(fails_with(attention_cuda(q, k, v_short, pos, Tensor(), p, out, s), "v must be"));
  const Tensor k_wide = poisoned(*ctx, {5, 64}, DType::f32);
  EXPECT_TRUE(fails_with(attention_cuda(q, k_wide, v, pos, Tensor(), p, out, s), "k must be"));
  const Tensor k_f16 = poisoned(*ctx, {5, 32}, DType::f16);
  EXPECT_TRUE(fails_with(attention_cuda(q, k_f16, v, pos, Tensor(), p, out, s), "k must be"));
  const Tensor k_bf16 = poisoned(*ctx, {5, 32}, DType::bf16);  // bf16 keys take bf16 values (a bf16 KV cache)
  EXPECT_TRUE(fails_with(attention_cuda(q, k_bf16, v, pos, Tensor(), p, out, s), "v must be"));
  const Tensor pos3 = upload(*ctx, optest::i32_tensor({1, 2, 3}));
  EXPECT_TRUE(fails_with(attention_cuda(q, k, v, pos3, Tensor(), p, out, s), "q_pos must be"));
  Tensor out_bad = poisoned(*ctx, {2, 32}, DType::f32);
  EXPECT_TRUE(fails_with(attention_cuda(q, k, v, pos, Tensor(), p, out_bad, s), "out must be"));
  const Tensor sinks_short = poisoned(*ctx, {3}, DType::f32);
  EXPECT_TRUE(fails_with(attention_cuda(q, k, v, pos, sinks_short, p, out, s), "sinks must be"));
  const Tensor sinks_i32 = poisoned(*ctx, {4}, DType::i32);
  EXPECT_TRUE(fails_with(attention_cuda(q, k, v, pos, sinks_i32, p, out, s), "sinks must be"));
  const Tensor sinks_host = Tensor::zeros({4}, DType::f32);
  EXPECT_TRUE(fails_with(attention_cuda(q, k, v, pos, sinks_host, p, out, s), "sinks must be"));
  EXPECT_TRUE(fails_with(attention_cuda(q, k, v, pos, sinks_host, p, out, s), "on cpu"));
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
}

}  // namespace
}  // namespace day0
