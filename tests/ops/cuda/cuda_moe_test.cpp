// CUDA routed-expert MoE (online MXFP4 -> BF16 of the routed experts into one reused workspace) against
// CpuOps::moe_experts on fresh random inputs. Skipped visibly without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "moe_test_util.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cuda/gemm_bf16.h"
#include "ops/cuda/moe_cuda.h"
#include "ops/op_test_util.h"
#include "quant/mxfp4.h"

namespace day0 {
namespace {

using cudatest::download;
using cudatest::make_context;
using cudatest::poisoned;
using cudatest::relative_norm_error;
using cudatest::upload;
using moetest::encoded_experts;
using moetest::random_routing;
using moetest::upload_experts;

// x rounded to bf16 on the CPU side, as the GPU path converts it before the gate_up GEMM.
Tensor bf16_rounded(const Tensor& x) { return optest::to_bf16(x).to_f32(); }

void run_case(CudaContext& ctx, int E, int k, std::int64_t H, std::int64_t I, const std::vector<std::int64_t>& batches,
              DType bias_dtype, bool interleaved, std::mt19937& rng, std::int64_t fused_max_tokens = 0) {
  SCOPED_TRACE("E " + std::to_string(E) + " k " + std::to_string(k) + " H " + std::to_string(H) + " I " +
               std::to_string(I));
  CpuOps cpu;
  const ExpertWeights gu_host = encoded_experts(E, int(2 * I), int(H), bias_dtype, rng);
  const ExpertWeights down_host = encoded_experts(E, int(H), int(I), bias_dtype, rng);
  const ExpertWeights gu_dev = upload_experts(ctx, gu_host), down_dev = upload_experts(ctx, down_host);
  SwigluParams p;
  p.interleaved = interleaved;
  const std::int64_t max_tokens = *std::max_element(batches.begin(), batches.end());
  MoeWorkspaceShape shape{E, k, H, I, max_tokens};
  shape.fused_max_tokens = fused_max_tokens;
  auto ws = MoeWorkspace::plan(ctx.arena(), shape);
  ASSERT_TRUE(ws.ok()) << ws.error().message;
  EXPECT_EQ(ws->max_routed, std::min<std::int64_t>(E, max_tokens * k));
  GemmBf16 gemm(ctx);
  for (std::int64_t S : batches) {
    SCOPED_TRACE("S " + std::to_string(S));
    const Tensor x = optest::random_f32({S, H}, rng);
    Tensor indices, weights;
    random_routing(S, E, k, rng, indices, weights);
    Tensor want = Tensor::zeros({S, H}, DType::f32);
    D0_ASSERT_OK(cpu.moe_experts(bf16_rounded(x), indices, weights, gu_host, down_host, p, want));
    const Tensor d_x = upload(ctx, x);
    // Host indices/weights for odd S, device copies otherwise: both inputs are supported.
    const bool on_device = S % 2 == 0;
    const Tensor idx = on_device ? upload(ctx, indices) : indices, wts = on_device ? upload(ctx, weights) : weights;
    Tensor d_out = poisoned(ctx, {S, H}, DType::f32);
    // Workspace reuse: after plan (and this batch's test uploads) a call takes nothing from the arena.
    const std::size_t used = ctx.arena().used_bytes();
    for (int call = 0; call < 2; ++call) {
      D0_ASSERT_OK(moe_experts_cuda(d_x, idx, wts, gu_dev, down_dev, p, *ws, gemm, d_out, ctx.stream()));
      EXPECT_EQ(ctx.arena().used_bytes(), used) << "call " << call;
    }
    const Tensor got = download(ctx, d_out);
    EXPECT_EQ(cudatest::count_nan(got), 0);
    EXPECT_EQ(download(ctx, ws->error_flag).data<std::int32_t>()[0], 0);
    // 1e-2: the GPU rounds the SwiGLU output to bf16 before the down GEMM (CPU keeps f32; rel. 2^-9 per
    // element) and both GEMMs accumulate in a different order; weights and x are exactly equal on both sides.
    EXPECT_LT(relative_norm_error(got, want), 1e-2);
  }
}

TEST(CudaMoe, routed_experts_match_the_cpu_reference_small_shapes) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(3001);
  for (int E : {4, 32})
    for (int k : {1, 2, 4})
      run_case(*ctx, E, k, 64, 96, {1, 5, 64}, E == 4 ? DType::f32 : DType::bf16, k != 2, rng);
}

TEST(CudaMoe, routed_experts_match_the_cpu_reference_at_the_gpt_oss_20b_shape) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  // 32 experts of 5760x2880 + 2880x2880 MXFP4 (~0.43 GB) plus a workspace of min(32, 4*4) = 16 bf16 experts (~0.8 GB).
  auto ctx = make_context(std::size_t(3) << 30);
  ASSERT_TRUE(ctx);
  std::mt19937 rng(3002);
  run_case(*ctx, 32, 4, 2880, 2880, {4}, DType::bf16, true, rng);
}

// The fused MXFP4 path (device routing, S <= fused_max_tokens; host routing and interleaved == false fall back to
// the GEMM path) against the same reference and tolerance: it makes the same roundings.
TEST(CudaMoe, fused_mxfp4_path_matches_the_cpu_reference) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(3004);
  for (int E : {4, 32})
    for (int k : {1, 2, 4})
      run_case(*ctx, E, k, 64, 96, {1, 2, 5, 8, 40, 64}, E == 4 ? DType::f32 : DType::bf16, k != 2, rng, 64);
  // 160 rows fit no grouped GEMM (64-row tiles): a prefill-sized step (50 assignments an expert) stays on the fused
  // kernel instead of failing.
  run_case(*ctx, 4, 2, 160, 96, {100}, DType::f32, true, rng, 128);
}

TEST(CudaMoe, fused_mxfp4_path_matches_the_cpu_reference_at_the_gpt_oss_20b_shape) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context(std::size_t(3) << 30);
  ASSERT_TRUE(ctx);
  std::mt19937 rng(3005);
  run_case(*ctx, 32, 4, 2880, 2880, {2, 8}, DType::bf16, true, rng, 8);
}

TEST(CudaMoe, rejects_more_tokens_than_planned) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(3003);
  const ExpertWeights gu = upload_experts(*ctx, encoded_experts(4, 64, 32, DType::f32, rng));
  const ExpertWeights down = upload_experts(*ctx, encoded_experts(4, 32, 32, DType::f32, rng));
  auto ws = MoeWorkspace::plan(ctx->arena(), MoeWorkspaceShape{4, 2, 32, 32, 2});
  ASSERT_TRUE(ws.ok()) << ws.error().message;
  GemmBf16 gemm(*ctx);
  Tensor indices, weights;
  random_routing(3, 4, 2, rng, indices, weights);
  Tensor out = poisoned(*ctx, {3, 32}, DType::f32);
  const Status st = moe_experts_cuda(upload(*ctx, optest::random_f32({3, 32}, rng)), indices, weights, gu, down,
                                     SwigluParams{}, *ws, gemm, out, ctx->stream());
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(optest::contains(st.error().message, "max_tokens")) << st.error().message;
}

}  // namespace
}  // namespace day0
