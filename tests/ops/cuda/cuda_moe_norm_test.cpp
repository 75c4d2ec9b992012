// The MoE's weighted expert sum folded into the next residual add + RMSNorm (rms_norm_moe_residual_cuda,
// moe_experts_add_rms_norm_cuda) against the two steps it replaces (moe_combine_cuda / moe_experts_cuda, then
// rms_norm_residual_cuda): the same bits, on the token path, the grouped kernel and the tiled GEMM, and on the
// vector and scalar norm kernels. Skipped visibly without a GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include "cuda_test_util.h"
#include "moe_test_util.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/moe_cuda.h"
#include "ops/cuda/moe_mxfp4_fused_cuda.h"
#include "ops/op_test_util.h"

namespace day0 {
namespace {

using cudatest::download;
using cudatest::make_context;
using cudatest::poisoned;
using cudatest::same_bits;
using cudatest::upload;
using moetest::encoded_experts;
using moetest::random_routing;
using moetest::upload_experts;

TEST(CudaMoeNorm, combine_inside_the_norm_gives_the_combine_then_norm_bits) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(4301);
  // H 2,880 / k 4: the vector kernel with the unrolled slot loads; k 6: its loop; H 90: the scalar kernel.
  struct Case {
    std::int64_t S, H;
    int k;
    DType w;
  };
  for (const Case& c : {Case{1, 2880, 4, DType::bf16}, Case{7, 2880, 4, DType::f32}, Case{3, 256, 6, DType::bf16},
                        Case{5, 90, 4, DType::f32}}) {
    SCOPED_TRACE(::testing::Message() << "S " << c.S << " H " << c.H << " k " << c.k);
    const Tensor x = optest::random_f32({c.S, c.H}, rng), y = optest::random_f32({c.S * c.k, c.H}, rng);
    Tensor indices, weights;
    random_routing(c.S, 32, c.k, rng, indices, weights);
    Tensor w = optest::random_f32({c.H}, rng, 0.5f, 1.5f);
    if (c.w == DType::bf16) w = optest::to_bf16(w);
    const Tensor d_y = upload(*ctx, y), d_idx = upload(*ctx, indices), d_wts = upload(*ctx, weights);
    const Tensor d_w = upload(*ctx, w);
    for (bool plus_one : {false, true}) {
      // Two steps: the combine into a tensor, then the residual add and norm.
      Tensor x2 = upload(*ctx, x), moe = poisoned(*ctx, {c.S, c.H}, DType::f32);
      Tensor out2 = poisoned(*ctx, {c.S, c.H}, DType::f32);
      D0_ASSERT_OK(moe_combine_cuda(d_y, d_idx, d_wts, moe, ctx->stream()));
      D0_ASSERT_OK(rms_norm_residual_cuda(x2, moe, d_w, 1e-5f, plus_one, out2, ctx->stream()));
      // One kernel, with the bf16 copy of its output (written as it goes, or converted after: the RNE of out).
      Tensor x1 = upload(*ctx, x), out1 = poisoned(*ctx, {c.S, c.H}, DType::f32);
      Tensor out1_bf16 = poisoned(*ctx, {c.S, c.H}, DType::bf16);
      D0_ASSERT_OK(rms_norm_moe_residual_cuda(x1, d_y, d_idx, d_wts, d_w, 1e-5f, plus_one, out1, ctx->stream(),
                                              &out1_bf16));
      EXPECT_TRUE(same_bits(download(*ctx, x1), download(*ctx, x2))) << "residual stream";
      const Tensor got = download(*ctx, out1);
      EXPECT_TRUE(same_bits(got, download(*ctx, out2))) << "normed";
      EXPECT_TRUE(same_bits(download(*ctx, out1_bf16), optest::to_bf16(got))) << "normed, bf16";
      EXPECT_EQ(cudatest::count_nan(got), 0);
      // The bf16 rows alone (an empty out): the same bf16 bits and residual stream where the vector kernel runs
      // (k <= 4, H a multiple of 4); elsewhere a clear error, nothing written.
      Tensor x3 = upload(*ctx, x), no_out, out3_bf16 = poisoned(*ctx, {c.S, c.H}, DType::bf16);
      const Status alone =
          rms_norm_moe_residual_cuda(x3, d_y, d_idx, d_wts, d_w, 1e-5f, plus_one, no_out, ctx->stream(), &out3_bf16);
      if (c.k <= 4 && c.H % 4 == 0) {
        D0_ASSERT_OK(alone);
        EXPECT_TRUE(same_bits(download(*ctx, out3_bf16), download(*ctx, out1_bf16))) << "bf16 rows alone";
        EXPECT_TRUE(same_bits(download(*ctx, x3), download(*ctx, x2))) << "residual stream, bf16 rows alone";
      } else {
        ASSERT_FALSE(alone.ok());
        EXPECT_NE(alone.error().message.find("bf16 rows alone"), std::string::npos) << alone.error().message;
        EXPECT_TRUE(same_bits(download(*ctx, x3), x)) << "x untouched on the error";
      }
      Tensor x4 = upload(*ctx, x);
      EXPECT_FALSE(rms_norm_moe_residual_cuda(x4, d_y, d_idx, d_wts, d_w, 1e-5f, plus_one, no_out, ctx->stream()).ok())
          << "neither out nor out_bf16";
    }
  }
}

TEST(CudaMoeNorm, moe_with_the_norm_gives_moe_then_norm_bits_on_every_fused_path) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context(std::size_t(1) << 30);
  ASSERT_TRUE(ctx);
  std::mt19937 rng(4302);
  const int E = 4, k = 2;
  const std::int64_t H = 128, I = 64;  // rows a multiple of 64: the tiled GEMM's
  const ExpertWeights gu = upload_experts(*ctx, encoded_experts(E, 2 * I, H, DType::bf16, rng));
  const ExpertWeights down = upload_experts(*ctx, encoded_experts(E, H, I, DType::bf16, rng));
  SwigluParams p;
  p.interleaved = true;
  // 1 token: the token kernels; 5: the grouped kernel; 80 (40 assignments an expert): the tiled GEMM.
  const std::int64_t max_tokens = 80;
  MoeWorkspaceShape shape{E, k, H, I, max_tokens};
  shape.fused_max_tokens = max_tokens;
  auto ws = MoeWorkspace::plan(ctx->arena(), shape);
  ASSERT_TRUE(ws.ok()) << ws.error().message;
  MoeGemms gemms(*ctx);
  const Tensor w = upload(*ctx, optest::to_bf16(optest::random_f32({H}, rng, 0.5f, 1.5f)));
  for (std::int64_t S : {1, 5, 80}) {
    SCOPED_TRACE(::testing::Message() << "S " << S);
    const Tensor h = upload(*ctx, optest::random_f32({S, H}, rng)), x = optest::random_f32({S, H}, rng);
    Tensor indices, weights;
    random_routing(S, E, k, rng, indices, weights);
    const Tensor d_idx = upload(*ctx, indices), d_wts = upload(*ctx, weights);
    ASSERT_TRUE(moe_takes_fused_path(*ws, S, d_idx, gu, p));

    Tensor x2 = upload(*ctx, x), moe = poisoned(*ctx, {S, H}, DType::f32);
    Tensor out2 = poisoned(*ctx, {S, H}, DType::f32);
    D0_ASSERT_OK(moe_experts_cuda(h, d_idx, d_wts, gu, down, p, *ws, gemms, moe, ctx->stream()));
    D0_ASSERT_OK(rms_norm_residual_cuda(x2, moe, w, 1e-5f, false, out2, ctx->stream()));

    Tensor x1 = upload(*ctx, x), out1 = poisoned(*ctx, {S, H}, DType::f32);
    const MoeNormAfter norm{&x1, w, 1e-5f, false, &out1};
    D0_ASSERT_OK(moe_experts_add_rms_norm_cuda(h, d_idx, d_wts, gu, down, p, *ws, gemms, norm, ctx->stream()));
    EXPECT_TRUE(same_bits(download(*ctx, x1), download(*ctx, x2))) << "residual stream";
    EXPECT_TRUE(same_bits(download(*ctx, out1), download(*ctx, out2))) << "normed";
  }
  // Off the fused path (routing on the host) the folded form is refused; CudaOps then runs the two steps.
  Tensor indices, weights;
  random_routing(1, E, k, rng, indices, weights);
  EXPECT_FALSE(moe_takes_fused_path(*ws, 1, indices, gu, p));
  Tensor x1 = upload(*ctx, Tensor::zeros({1, H}, DType::f32)), out1 = poisoned(*ctx, {1, H}, DType::f32);
  const MoeNormAfter norm{&x1, w, 1e-5f, false, &out1};
  const Status st = moe_experts_add_rms_norm_cuda(upload(*ctx, Tensor::zeros({1, H}, DType::f32)), indices, weights,
                                                  gu, down, p, *ws, gemms, norm, ctx->stream());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("fused MXFP4 path only"), std::string::npos) << st.error().message;
}

}  // namespace
}  // namespace day0
