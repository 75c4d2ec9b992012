// CUDA routed-expert MoE over experts stored already converted (`day0 convert`: bf16, or fp8 with row scales)
// against the online path over the MXFP4 originals: the GEMMs read the same bytes (the conversion kernels are
// bit-exact with the CPU codecs), so the outputs must be bit-identical. Also CudaOps::expert_matmul per storage,
// and the workspace a stored plan carves (bookkeeping only: runs anywhere).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "moe_test_util.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/moe_cuda.h"
#include "ops/op_test_util.h"
#include "quant/mxfp4.h"

namespace day0 {
namespace {

using cudatest::download;
using cudatest::make_context;
using cudatest::poisoned;
using cudatest::upload;
using moetest::encoded_experts;
using moetest::random_routing;
using moetest::stored_experts;
using moetest::upload_experts;

std::int64_t differing_words(const Tensor& a, const Tensor& b) {
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i) n += std::memcmp(a.data<float>() + i, b.data<float>() + i, 4) != 0;
  return n;
}

// Online (MXFP4 experts, a converting workspace) vs stored (converted experts, a workspace without conversion
// buffers, and also the converting workspace, whose buffers then go unused): bit-identical outputs.
void run_stored_case(CudaContext& ctx, ExpertCompute compute, int E, int k, std::int64_t H, std::int64_t I,
                     const std::vector<std::int64_t>& batches, DType bias_dtype, bool interleaved, std::mt19937& rng) {
  const ExpertStorage storage = compute == ExpertCompute::bf16 ? ExpertStorage::bf16 : ExpertStorage::fp8_rowwise;
  SCOPED_TRACE(std::string(expert_storage_name(storage)) + " E " + std::to_string(E) + " k " + std::to_string(k) +
               " H " + std::to_string(H) + " I " + std::to_string(I));
  const ExpertWeights gu_mx = encoded_experts(E, int(2 * I), int(H), bias_dtype, rng);
  const ExpertWeights down_mx = encoded_experts(E, int(H), int(I), bias_dtype, rng);
  const ExpertWeights gu_online = upload_experts(ctx, gu_mx), down_online = upload_experts(ctx, down_mx);
  const ExpertWeights gu_stored = upload_experts(ctx, stored_experts(gu_mx, storage));
  const ExpertWeights down_stored = upload_experts(ctx, stored_experts(down_mx, storage));
  SwigluParams p;
  p.interleaved = interleaved;
  const std::int64_t T = *std::max_element(batches.begin(), batches.end());
  auto online_ws = MoeWorkspace::plan(ctx.arena(), MoeWorkspaceShape{E, k, H, I, T, compute});
  auto stored_ws = MoeWorkspace::plan(ctx.arena(), MoeWorkspaceShape{E, k, H, I, T, compute, storage});
  ASSERT_TRUE(online_ws.ok() && stored_ws.ok());
  EXPECT_LT(stored_ws->device_bytes, online_ws->device_bytes);
  MoeGemms gemms(ctx);
  for (std::int64_t S : batches) {
    SCOPED_TRACE("S " + std::to_string(S));
    const Tensor x = upload(ctx, optest::random_f32({S, H}, rng));
    Tensor indices, weights;
    random_routing(S, E, k, rng, indices, weights);
    Tensor online = poisoned(ctx, {S, H}, DType::f32), stored = poisoned(ctx, {S, H}, DType::f32);
    Tensor stored_in_online_ws = poisoned(ctx, {S, H}, DType::f32);
    D0_ASSERT_OK(moe_experts_cuda(x, indices, weights, gu_online, down_online, p, *online_ws, gemms, online,
                                  ctx.stream()));
    D0_ASSERT_OK(moe_experts_cuda(x, indices, weights, gu_stored, down_stored, p, *stored_ws, gemms, stored,
                                  ctx.stream()));
    D0_ASSERT_OK(moe_experts_cuda(x, indices, weights, gu_stored, down_stored, p, *online_ws, gemms,
                                  stored_in_online_ws, ctx.stream()));
    const Tensor a = download(ctx, online), b = download(ctx, stored), c = download(ctx, stored_in_online_ws);
    EXPECT_EQ(cudatest::count_nan(a), 0);
    EXPECT_EQ(differing_words(a, b), 0) << "stored experts differ from online conversion";
    EXPECT_EQ(differing_words(a, c), 0) << "stored experts in a converting workspace differ";
    EXPECT_EQ(download(ctx, stored_ws->error_flag).data<std::int32_t>()[0], 0);
  }
}

TEST(CudaMoeStored, stored_bf16_experts_give_bit_identical_output_to_online_bf16_conversion) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(7001);
  run_stored_case(*ctx, ExpertCompute::bf16, 5, 3, 96, 160, {1, 7, 64}, DType::f32, false, rng);
  run_stored_case(*ctx, ExpertCompute::bf16, 32, 4, 64, 96, {1, 5, 64}, DType::bf16, true, rng);
}

TEST(CudaMoeStored, stored_fp8_experts_give_bit_identical_output_to_online_fp8_conversion) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(7002);
  run_stored_case(*ctx, ExpertCompute::fp8, 5, 3, 96, 160, {1, 7, 64}, DType::f32, false, rng);
  run_stored_case(*ctx, ExpertCompute::fp8, 32, 4, 64, 96, {1, 5, 64}, DType::bf16, true, rng);
}

TEST(CudaMoeStored, mismatched_storage_and_compute_and_mxfp4_in_a_stored_plan_are_errors) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(7003);
  const ExpertWeights gu_mx = encoded_experts(4, 64, 32, DType::f32, rng);
  const ExpertWeights down_mx = encoded_experts(4, 32, 32, DType::f32, rng);
  const ExpertWeights gu_bf16 = upload_experts(*ctx, stored_experts(gu_mx, ExpertStorage::bf16));
  const ExpertWeights down_bf16 = upload_experts(*ctx, stored_experts(down_mx, ExpertStorage::bf16));
  auto fp8_ws = MoeWorkspace::plan(ctx->arena(), MoeWorkspaceShape{4, 2, 32, 32, 2, ExpertCompute::fp8});
  auto bf16_stored_ws =
      MoeWorkspace::plan(ctx->arena(), MoeWorkspaceShape{4, 2, 32, 32, 2, ExpertCompute::bf16, ExpertStorage::bf16});
  ASSERT_TRUE(fp8_ws.ok() && bf16_stored_ws.ok());
  MoeGemms gemms(*ctx);
  Tensor indices, weights;
  random_routing(2, 4, 2, rng, indices, weights);
  const Tensor x = upload(*ctx, optest::random_f32({2, 32}, rng));
  Tensor out = poisoned(*ctx, {2, 32}, DType::f32);
  Status st = moe_experts_cuda(x, indices, weights, gu_bf16, down_bf16, SwigluParams{}, *fp8_ws, gemms, out,
                               ctx->stream());
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(optest::contains(st.error().message, "--expert-compute bf16")) << st.error().message;
  st = moe_experts_cuda(x, indices, weights, upload_experts(*ctx, gu_mx), upload_experts(*ctx, down_mx),
                        SwigluParams{}, *bf16_stored_ws, gemms, out, ctx->stream());
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(optest::contains(st.error().message, "MXFP4 experts need a workspace")) << st.error().message;
}

// CudaOps::expert_matmul: stored bf16 equals the MXFP4 path bit for bit (same bf16 GEMM on the same values);
// stored fp8 runs the fp8 GEMM (x quantised per token) and stays within E4M3's rounding of the f32 reference.
TEST(CudaExpertMatmulStored, bf16_equals_the_mxfp4_path_and_fp8_stays_near_f32) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  const std::unique_ptr<CudaOps> ops = cudatest::make_cuda_ops();
  ASSERT_TRUE(ops);
  CudaOps& cuda = *ops;
  std::mt19937 rng(7004);
  const int E = 3, out = 96, in = 64, n = 5;
  const ExpertWeights mx = encoded_experts(E, out, in, DType::f32, rng);
  auto place = [&](const ExpertWeights& host) {
    ExpertWeights d = host;
    for (auto [src, dst] : {std::pair{&host.blocks, &d.blocks}, std::pair{&host.scales, &d.scales},
                            std::pair{&host.values, &d.values}, std::pair{&host.row_scales, &d.row_scales},
                            std::pair{&host.bias, &d.bias}}) {
      if (src->raw() == nullptr) continue;
      auto t = cuda.allocate(src->shape(), src->dtype(), "test experts");
      EXPECT_TRUE(t.ok());
      EXPECT_TRUE(cuda.copy_from_host(*src, *t).ok());
      *dst = *t;
    }
    return d;
  };
  const ExpertWeights d_mx = place(mx), d_bf16 = place(stored_experts(mx, ExpertStorage::bf16));
  const ExpertWeights d_fp8 = place(stored_experts(mx, ExpertStorage::fp8_rowwise));
  const Tensor x_host = optest::random_f32({n, in}, rng);
  CpuOps cpu;
  for (int e = 0; e < E; ++e) {
    Tensor want = Tensor::zeros({n, out}, DType::f32);
    D0_ASSERT_OK(cpu.expert_matmul(x_host, mx, e, want));
    const ScratchMark mark = cuda.scratch_mark();
    auto x = cuda.upload(x_host, "x");
    ASSERT_TRUE(x.ok());
    Tensor y_mx = *cuda.scratch({n, out}, DType::f32, "y"), y_bf16 = *cuda.scratch({n, out}, DType::f32, "y");
    Tensor y_fp8 = *cuda.scratch({n, out}, DType::f32, "y");
    D0_ASSERT_OK(cuda.expert_matmul(*x, d_mx, e, y_mx));
    D0_ASSERT_OK(cuda.expert_matmul(*x, d_bf16, e, y_bf16));
    D0_ASSERT_OK(cuda.expert_matmul(*x, d_fp8, e, y_fp8));
    const Tensor a = *cuda.download(y_mx), b = *cuda.download(y_bf16), c = *cuda.download(y_fp8);
    D0_ASSERT_OK(cuda.synchronize());
    EXPECT_EQ(differing_words(a, b), 0) << "expert " << e;
    // bf16 x: 2^-9 relative per element; E4M3 x: up to 2^-4 (about 2.4% rms over a row).
    EXPECT_LT(cudatest::relative_norm_error(a, want), 1e-2) << "expert " << e;
    EXPECT_LT(cudatest::relative_norm_error(c, want), 6e-2) << "expert " << e;
    D0_ASSERT_OK(cuda.scratch_release(mark));
  }
}

TEST(CudaMoeWorkspace, a_plan_for_stored_experts_carves_no_conversion_buffers_and_refuses_another_compute) {
  // Bookkeeping only: an arena over host memory (plan() launches nothing), so this runs anywhere.
  std::vector<char> host(std::size_t(8) << 20);
  auto arena = DeviceArena::over(host.data(), host.size());
  for (auto [compute, storage] : {std::pair{ExpertCompute::bf16, ExpertStorage::bf16},
                                  std::pair{ExpertCompute::fp8, ExpertStorage::fp8_rowwise}}) {
    auto ws = MoeWorkspace::plan(*arena, MoeWorkspaceShape{32, 4, 128, 96, 8, compute, storage});
    ASSERT_TRUE(ws.ok()) << ws.error().message;
    EXPECT_EQ(ws->gate_up_w.raw(), nullptr);
    EXPECT_EQ(ws->down_w.raw(), nullptr);
    EXPECT_EQ(ws->gate_up_w8.raw(), nullptr);
    EXPECT_EQ(ws->down_scales.raw(), nullptr);
    EXPECT_NE(ws->gu.raw(), nullptr);  // the per-token buffers are still there
    auto online = moe_workspace_bytes(MoeWorkspaceShape{32, 4, 128, 96, 8, compute});
    ASSERT_TRUE(online.ok());
    EXPECT_LT(ws->device_bytes, *online / 4) << "the converted experts were most of the workspace";
  }
  auto mismatch = MoeWorkspace::plan(*arena, MoeWorkspaceShape{32, 4, 128, 96, 8, ExpertCompute::fp8,
                                                                ExpertStorage::bf16});
  ASSERT_FALSE(mismatch.ok());
  EXPECT_TRUE(optest::contains(mismatch.error().message, "experts stored as bf16 (a day0 convert checkpoint) run "
                                                         "with --expert-compute bf16, not fp8"))
      << mismatch.error().message;
  EXPECT_TRUE(check_expert_compute(ExpertStorage::mxfp4, ExpertCompute::fp8).ok());
}

}  // namespace
}  // namespace day0
