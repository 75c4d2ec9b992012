// linear_small_moe_norm_cuda (one token's MoE combine, residual add and norm inside the q/k/v linear) against the
// two launches it replaces, rms_norm_moe_residual_cuda then linear_small_cuda: the same bits in the residual
// stream, the normed row and every output, over repeated calls on one counter (left zero). Skipped visibly
// without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "moe_test_util.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/linear_small_cuda.h"
#include "ops/op_test_util.h"

namespace day0 {
namespace {

using cudatest::download;
using cudatest::make_context;
using cudatest::poisoned;
using cudatest::same_bits;
using cudatest::upload;
using cudatest::zeroed;

struct Case {
  std::int64_t H;
  int k;
  DType norm_w;
  bool plus_one;
  std::vector<std::int64_t> outs;  // rows of each target (one launch)
};

TEST(CudaLinearSmallMoeNorm, gives_the_norm_then_linear_bits_and_leaves_the_counter_zero) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(7107);
  Tensor counter = zeroed(*ctx, {1}, DType::u32);
  // gpt-oss-20b's q/k/v (320 row tiles, 3 an SM on 132 SMs) with k = 4 and 1; small and ragged shapes: K not a
  // multiple of 32, N not of 16, a few row tiles.
  for (const Case& c : {Case{2880, 4, DType::bf16, false, {4096, 512, 512}}, Case{2880, 1, DType::f32, true, {4096}},
                        Case{200, 3, DType::bf16, true, {33, 70}}, Case{64, 2, DType::f32, false, {8, 8, 8, 8}}}) {
    SCOPED_TRACE(::testing::Message() << "H " << c.H << " k " << c.k << " targets " << c.outs.size());
    const auto mark = ctx->arena().mark();
    const Tensor x = optest::random_f32({1, c.H}, rng), y = optest::random_f32({c.k, c.H}, rng);
    Tensor indices, weights;
    moetest::random_routing(1, 32, c.k, rng, indices, weights);
    Tensor w = optest::random_f32({c.H}, rng, 0.5f, 1.5f);
    if (c.norm_w == DType::bf16) w = optest::to_bf16(w);
    const Tensor d_y = upload(*ctx, y), d_idx = upload(*ctx, indices), d_wts = upload(*ctx, weights);
    const Tensor d_w = upload(*ctx, w);
    std::vector<LinearTarget> two, one;
    for (std::int64_t n : c.outs) {
      const Tensor wt = upload(*ctx, optest::to_bf16(optest::random_f32({n, c.H}, rng)));
      const Tensor bias = upload(*ctx, optest::to_bf16(optest::random_f32({n}, rng)));
      two.push_back({wt, bias, poisoned(*ctx, {1, n}, DType::f32)});
      one.push_back({wt, bias, poisoned(*ctx, {1, n}, DType::f32)});
    }
    // Two launches.
    Tensor x2 = upload(*ctx, x), normed2 = poisoned(*ctx, {1, c.H}, DType::f32);
    D0_ASSERT_OK(rms_norm_moe_residual_cuda(x2, d_y, d_idx, d_wts, d_w, 1e-5f, c.plus_one, normed2, ctx->stream()));
    D0_ASSERT_OK(linear_small_cuda(normed2, two, ctx->sm_count(), ctx->stream()));
    // One, twice on the same counter: the second call starts from the first's residual.
    Tensor x1 = upload(*ctx, x), normed1 = poisoned(*ctx, {1, c.H}, DType::f32);
    ASSERT_TRUE(linear_small_moe_norm_fits(x1, d_idx, one));
    D0_ASSERT_OK(linear_small_moe_norm_cuda(x1, d_y, d_idx, d_wts, d_w, 1e-5f, c.plus_one, normed1, one, counter,
                                            ctx->stream()));
    EXPECT_TRUE(same_bits(download(*ctx, x1), download(*ctx, x2))) << "residual stream";
    EXPECT_TRUE(same_bits(download(*ctx, normed1), download(*ctx, normed2))) << "normed";
    for (size_t i = 0; i < one.size(); ++i)
      EXPECT_TRUE(same_bits(download(*ctx, one[i].out), download(*ctx, two[i].out))) << "target " << i;
    EXPECT_EQ(download(*ctx, counter).data<std::uint32_t>()[0], 0u);

    D0_ASSERT_OK(rms_norm_moe_residual_cuda(x2, d_y, d_idx, d_wts, d_w, 1e-5f, c.plus_one, normed2, ctx->stream()));
    D0_ASSERT_OK(linear_small_cuda(normed2, two, ctx->sm_count(), ctx->stream()));
    Tensor skipped;  // the normed row not written
    D0_ASSERT_OK(linear_small_moe_norm_cuda(x1, d_y, d_idx, d_wts, d_w, 1e-5f, c.plus_one, skipped, one, counter,
                                            ctx->stream()));
    EXPECT_TRUE(same_bits(download(*ctx, x1), download(*ctx, x2))) << "residual stream, second call";
    for (size_t i = 0; i < one.size(); ++i)
      EXPECT_TRUE(same_bits(download(*ctx, one[i].out), download(*ctx, two[i].out))) << "target " << i << ", second";
    EXPECT_EQ(download(*ctx, counter).data<std::uint32_t>()[0], 0u);
    ASSERT_TRUE(ctx->arena().release(mark).ok());
  }
}

TEST(CudaLinearSmallMoeNorm, declines_more_than_one_token_or_four_experts_naming_the_reason) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(7108);
  Tensor counter = zeroed(*ctx, {1}, DType::u32);
  const Tensor w = upload(*ctx, optest::to_bf16(optest::random_f32({64}, rng)));
  const Tensor norm_w = upload(*ctx, optest::random_f32({64}, rng));
  for (auto [S, k] : {std::pair<std::int64_t, int>{2, 4}, {1, 5}}) {
    Tensor x = upload(*ctx, optest::random_f32({S, 64}, rng)), y = upload(*ctx, optest::random_f32({S * k, 64}, rng));
    Tensor indices, weights;
    moetest::random_routing(S, 32, k, rng, indices, weights);
    const Tensor d_idx = upload(*ctx, indices), d_wts = upload(*ctx, weights);
    const std::vector<LinearTarget> targets{{w, Tensor(), poisoned(*ctx, {S, 64}, DType::f32)}};
    EXPECT_FALSE(linear_small_moe_norm_fits(x, d_idx, targets));
    Tensor normed;
    const Status st =
        linear_small_moe_norm_cuda(x, y, d_idx, d_wts, norm_w, 1e-5f, false, normed, targets, counter, ctx->stream());
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message.find("one token"), std::string::npos) << st.error().message;
  }
}

}  // namespace
}  // namespace day0
