// norm_router_cuda (the MoE block's residual add, norm, router linear and top-k in one cluster launch a two rows,
// decode steps) against the two launches it replaces, rms_norm_residual_cuda and linear_small_router_cuda, bit for bit:
// the residual, the normalised row, the logits, the picks and their weights. Those two are compared with the CPU
// reference in their own tests. Shapes: gpt-oss-20b's (32 experts: a cluster of 2) and 120b's (128: 8), experts
// not a multiple of 16, the smallest and largest hidden sizes, every bias and norm-weight dtype, plus-one norms;
// 1 to 128 rows (an odd count leaves a cluster's second row empty; past 16 the router takes slices of 16).
// The declines run everywhere; the kernels are skipped visibly without a GPU.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "cuda_test_util.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/linear_small_cuda.h"
#include "ops/cuda/norm_router_cuda.h"
#include "ops/op_test_util.h"

namespace day0 {
namespace {

using cudatest::download;
using cudatest::make_context;
using cudatest::poisoned;
using cudatest::same_bits;
using cudatest::upload;
using cudatest::zeroed;
using optest::random_f32;

struct Case {
  std::int64_t H, E;
  int k;
};

TEST(CudaNormRouter, gives_the_bits_of_the_norm_and_the_router_kernels) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(2111);
  Tensor counters = zeroed(*ctx, {kLinearSmallRouterSlices}, DType::u32);
  const Case cases[] = {{2880, 32, 4}, {2880, 128, 4}, {64, 20, 3}, {4096, 48, 8}, {8, 1, 1}, {2880, 112, 2}};
  for (const Case& c : cases)
    for (const std::int64_t M : {1, 2, 3, 17, 64, 128})
      for (const char* bias_kind : {"f32", "bf16", "none"})
        for (bool bf16_norm : {true, false})
          for (bool plus_one : {false, true}) {
            if (M > 1 && (bf16_norm || plus_one)) continue;  // the row count meets every shape and bias once
            SCOPED_TRACE(::testing::Message() << "H " << c.H << " E " << c.E << " k " << c.k << " M " << M << " bias "
                                              << bias_kind << " bf16 norm " << bf16_norm << " plus_one " << plus_one);
            const auto mark = ctx->arena().mark();
            const Tensor x = random_f32({M, c.H}, rng, -3.f, 3.f), y = random_f32({M, c.H}, rng);
            Tensor norm_w = random_f32({c.H}, rng, 0.5f, 1.5f);
            if (bf16_norm) norm_w = optest::to_bf16(norm_w);
            const Tensor d_norm_w = upload(*ctx, norm_w), d_y = upload(*ctx, y);
            const Tensor w = upload(*ctx, optest::to_bf16(random_f32({c.E, c.H}, rng, -0.05f, 0.05f)));
            Tensor bias;
            if (bias_kind[0] == 'f') bias = upload(*ctx, random_f32({c.E}, rng, -0.5f, 0.5f));
            if (bias_kind[0] == 'b') bias = upload(*ctx, optest::to_bf16(random_f32({c.E}, rng, -0.5f, 0.5f)));

            Tensor x1 = upload(*ctx, x), out1 = poisoned(*ctx, {M, c.H}, DType::f32);
            Tensor logits1 = poisoned(*ctx, {M, c.E}, DType::f32), idx1 = poisoned(*ctx, {M, c.k}, DType::i32);
            Tensor wts1 = poisoned(*ctx, {M, c.k}, DType::f32);
            D0_ASSERT_OK(rms_norm_residual_cuda(x1, d_y, d_norm_w, 1e-5f, plus_one, out1, ctx->stream()));
            D0_ASSERT_OK(linear_small_router_cuda(out1, {w, bias, logits1}, c.k, idx1, wts1, counters, ctx->sm_count(),
                                                  ctx->stream()));

            Tensor x2 = upload(*ctx, x), out2 = poisoned(*ctx, {M, c.H}, DType::f32);
            Tensor logits2 = poisoned(*ctx, {M, c.E}, DType::f32), idx2 = poisoned(*ctx, {M, c.k}, DType::i32);
            Tensor wts2 = poisoned(*ctx, {M, c.k}, DType::f32);
            const LinearTarget router{w, bias, logits2};
            ASSERT_TRUE(norm_router_fits(x2, d_y, d_norm_w, out2, router, c.k));
            D0_ASSERT_OK(
                norm_router_cuda(x2, d_y, d_norm_w, 1e-5f, plus_one, out2, router, c.k, idx2, wts2, ctx->stream()));
            EXPECT_TRUE(same_bits(download(*ctx, x2), download(*ctx, x1))) << "residual";
            EXPECT_TRUE(same_bits(download(*ctx, out2), download(*ctx, out1))) << "normalised rows";
            EXPECT_TRUE(same_bits(download(*ctx, logits2), download(*ctx, logits1))) << "logits";
            EXPECT_TRUE(same_bits(download(*ctx, idx2), download(*ctx, idx1))) << "picks";
            EXPECT_TRUE(same_bits(download(*ctx, wts2), download(*ctx, wts1))) << "weights";
            D0_ASSERT_OK(ctx->arena().release(mark));
          }
}

// A device-tagged tensor over a host buffer (16-byte aligned): validation reads only shape, dtype, device and
// address.
Tensor fake_cuda(const Shape& shape, DType dtype) {
  alignas(16) static float buffer[1 << 16];
  return Tensor::borrow(buffer, shape, dtype, nullptr, Device::cuda);
}

TEST(CudaNormRouter, declines_what_it_does_not_take_and_names_it) {
  // Validation only: no device needed, nothing is launched.
  const Tensor y = fake_cuda({1, 64}, DType::f32), norm_w = fake_cuda({64}, DType::bf16);
  Tensor x = fake_cuda({1, 64}, DType::f32), out = fake_cuda({1, 64}, DType::f32);
  Tensor logits = fake_cuda({1, 32}, DType::f32), idx = fake_cuda({1, 4}, DType::i32);
  Tensor wts = fake_cuda({1, 4}, DType::f32);
  const LinearTarget router{fake_cuda({32, 64}, DType::bf16), Tensor(), logits};
  EXPECT_TRUE(norm_router_fits(x, y, norm_w, out, router, 4));
  Tensor many_rows = fake_cuda({kNormRouterMaxRows + 1, 64}, DType::f32);
  EXPECT_FALSE(norm_router_fits(many_rows, y, norm_w, out, router, 4));  // decode steps only
  const LinearTarget wide{fake_cuda({kNormRouterMaxExperts + 1, 64}, DType::bf16), Tensor(), logits};
  EXPECT_FALSE(norm_router_fits(x, y, norm_w, out, wide, 4));  // more CTAs than a portable cluster
  EXPECT_FALSE(norm_router_fits(x, y, norm_w, out, router, kRouterMaxK + 1));
  Tensor x_big = fake_cuda({1, kNormRouterMaxHidden + 8}, DType::f32);
  EXPECT_FALSE(norm_router_fits(x_big, y, norm_w, out, router, 4));
  const Status s = norm_router_cuda(many_rows, y, norm_w, 1e-5f, false, out, router, 4, idx, wts, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(optest::contains(s.error().message, "x f32 [M <= 128, H")) << s.error().message;
  EXPECT_TRUE(optest::contains(s.error().message, "got x [129, 64]")) << s.error().message;
}

}  // namespace
}  // namespace day0
