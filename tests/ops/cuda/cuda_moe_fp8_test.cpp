// CUDA routed-expert MoE in ExpertCompute::fp8 (online MXFP4 -> E4M3 of the routed experts, per-token E4M3
// activations, GemmFp8) against two CPU references on fresh random inputs: an emulation of the FP8 path built from
// quant/fp8_experts.h (checks the implementation tightly) and CpuOps::moe_experts in f32 (measures what FP8
// costs; printed). Also the plan's byte count (runs anywhere) and bf16-vs-fp8 timings at the gpt-oss-20b shape.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "moe_test_util.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cuda/moe_cuda.h"
#include "ops/cuda/moe_mxfp4_wgmma_fp8_cuda.h"
#include "ops/op_test_util.h"
#include "quant/fp8_experts.h"
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

// ---- the FP8 path on the CPU, from the reference codecs ----

// Expert e's rows converted to E4M3 + row scale and decoded back (exact products of power-of-two scales).
std::vector<float> fp8_expert_weights(const ExpertWeights& w, int e, std::int64_t& inexact) {
  const std::int64_t groups = w.in / kMxfp4GroupSize;
  std::vector<float> out(std::int64_t(w.out) * w.in);
  std::vector<std::uint8_t> q(w.in);
  for (std::int64_t r = 0; r < w.out; ++r) {
    const std::int64_t row = std::int64_t(e) * w.out + r;
    const Fp8Row info = mxfp4_row_to_fp8(w.blocks.data<std::uint8_t>() + row * groups * kMxfp4GroupBytes,
                                         w.scales.data<std::uint8_t>() + row * groups, w.in, q.data());
    inexact += info.inexact;
    fp8_decode_row(q.data(), info.scale, w.in, out.data() + r * w.in);
  }
  return out;
}

float bias_at(const ExpertWeights& w, std::int64_t i) {
  if (!w.bias.defined() || w.bias.numel() == 0) return 0.f;
  return w.bias.dtype() == DType::bf16 ? bf16_to_f32(w.bias.data<std::uint16_t>()[i]) : w.bias.data<float>()[i];
}

// out[r, c] = f32(scale[r] * sum_i e4m3(q[r, i]) * w[c, i] + bias_e[c]), the sum in f64.
void fp8_linear(const std::vector<std::uint8_t>& q, const std::vector<float>& scale, std::int64_t n,
                const std::vector<float>& w, const ExpertWeights& experts, int e, float* out) {
  const std::int64_t K = experts.in, N = experts.out;
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t c = 0; c < N; ++c) {
      double acc = 0;
      for (std::int64_t i = 0; i < K; ++i) acc += double(e4m3_to_f32(q[r * K + i])) * w[c * K + i];
      out[r * N + c] = static_cast<float>(acc * scale[r] + bias_at(experts, std::int64_t(e) * N + c));
    }
}

// As CpuOps::moe_experts (experts in ascending id, tokens in order), with x and the SwiGLU output quantised per
// token and the experts converted, exactly as the GPU's FP8 path defines them.
Tensor fp8_moe_emulation(const Tensor& x, const Tensor& indices, const Tensor& weights, const ExpertWeights& gu,
                         const ExpertWeights& down, const SwigluParams& p, std::int64_t& inexact) {
  CpuOps cpu;
  const std::int64_t S = x.size(0), H = x.size(1), k = indices.size(1), I = down.in;
  Tensor out = Tensor::zeros({S, H}, DType::f32);
  for (int e = 0; e < gu.n_experts; ++e) {
    std::vector<std::int64_t> rows;
    std::vector<float> route;
    for (std::int64_t a = 0; a < S * k; ++a)
      if (indices.data<std::int32_t>()[a] == e) rows.push_back(a / k), route.push_back(weights.data<float>()[a]);
    if (rows.empty()) continue;
    const std::int64_t n = static_cast<std::int64_t>(rows.size());
    const std::vector<float> w_gu = fp8_expert_weights(gu, e, inexact), w_down = fp8_expert_weights(down, e, inexact);
    std::vector<std::uint8_t> xq(n * H), hq(n * I);
    std::vector<float> sx(n), sh(n), y(n * H);
    for (std::int64_t r = 0; r < n; ++r)
      sx[r] = fp8_quantize_row(x.data<float>() + rows[r] * H, H, xq.data() + r * H).scale;
    Tensor g = Tensor::zeros({n, 2 * I}, DType::f32), h = Tensor::zeros({n, I}, DType::f32);
    fp8_linear(xq, sx, n, w_gu, gu, e, g.data<float>());
    EXPECT_TRUE(cpu.swiglu_clamped(g, p, h).ok());
    for (std::int64_t r = 0; r < n; ++r) sh[r] = fp8_quantize_row(h.data<float>() + r * I, I, hq.data() + r * I).scale;
    fp8_linear(hq, sh, n, w_down, down, e, y.data());
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t c = 0; c < H; ++c) out.data<float>()[rows[r] * H + c] += y[r * H + c] * route[r];
  }
  return out;
}

// ---- the GPU path against both ----

struct Errors {
  double vs_emulation = 0, vs_f32 = 0;
};

Errors run_fp8_case(CudaContext& ctx, MoeGemms& gemms, MoeWorkspace& ws, const ExpertWeights& gu_host,
                    const ExpertWeights& down_host, const ExpertWeights& gu_dev, const ExpertWeights& down_dev,
                    std::int64_t S, const SwigluParams& p, std::mt19937& rng) {
  SCOPED_TRACE("S " + std::to_string(S));
  const std::int64_t H = ws.shape.hidden;
  const Tensor x = optest::random_f32({S, H}, rng);
  Tensor indices, weights;
  random_routing(S, ws.shape.n_experts, ws.shape.k, rng, indices, weights);
  CpuOps cpu;
  Tensor want_f32 = Tensor::zeros({S, H}, DType::f32);
  EXPECT_TRUE(cpu.moe_experts(x, indices, weights, gu_host, down_host, p, want_f32).ok());
  std::int64_t inexact = 0;
  const Tensor want_fp8 = fp8_moe_emulation(x, indices, weights, gu_host, down_host, p, inexact);
  const Tensor d_x = upload(ctx, x);
  const bool on_device = S % 2 == 0;  // both index locations are supported
  const Tensor idx = on_device ? upload(ctx, indices) : indices, wts = on_device ? upload(ctx, weights) : weights;
  Tensor d_out = poisoned(ctx, {S, H}, DType::f32);
  const std::size_t used = ctx.arena().used_bytes();
  for (int call = 0; call < 2; ++call) {
    const Status st = moe_experts_cuda(d_x, idx, wts, gu_dev, down_dev, p, ws, gemms, d_out, ctx.stream());
    EXPECT_TRUE(st.ok()) << st.error().message;
    EXPECT_EQ(ctx.arena().used_bytes(), used) << "a call takes nothing from the arena (call " << call << ")";
  }
  const Tensor got = download(ctx, d_out);
  EXPECT_EQ(cudatest::count_nan(got), 0);
  EXPECT_EQ(download(ctx, ws.error_flag).data<std::int32_t>()[0], 0);
  // The GPU counts the inexact values of the experts this call converted; the emulation converted the same ones.
  EXPECT_EQ(download(ctx, ws.fp8_inexact).data<std::uint64_t>()[0], static_cast<std::uint64_t>(inexact));
  return Errors{relative_norm_error(got, want_fp8), relative_norm_error(got, want_f32)};
}

// Tolerances, relative to the output norm:
// - vs the emulation, 2e-2: same quantised operands; only fp32 accumulation order and Hopper's FP8 MMA
//   accumulation (~1e-4) differ, but a SwiGLU output (or x) that lands within that of an E4M3 rounding edge
//   rounds one step (2^-3 relative) apart. Measured on the H200: 7e-5 to 2.7e-3 typically, 1.3e-2 for one token
//   of E5/H96/I160 where a few elements carry the norm. A wrong scale or a wrong expert is off by ~1.
// - vs f32, 6e-2: E4M3 keeps 3 fraction bits, so rounding x and the SwiGLU output costs up to 2^-4 relative per
//   element, about 2.4% rms each; the CPU emulation measured 3.7-3.8% against f32 at these shapes.
constexpr double kTolVsEmulation = 2e-2, kTolVsF32 = 6e-2;

void run_shapes(CudaContext& ctx, int E, int k, std::int64_t H, std::int64_t I, const std::vector<std::int64_t>& batches,
                DType bias_dtype, bool interleaved, std::mt19937& rng) {
  SCOPED_TRACE("E " + std::to_string(E) + " k " + std::to_string(k) + " H " + std::to_string(H) + " I " +
               std::to_string(I));
  const ExpertWeights gu_host = encoded_experts(E, int(2 * I), int(H), bias_dtype, rng);
  const ExpertWeights down_host = encoded_experts(E, int(H), int(I), bias_dtype, rng);
  const ExpertWeights gu_dev = upload_experts(ctx, gu_host), down_dev = upload_experts(ctx, down_host);
  SwigluParams p;
  p.interleaved = interleaved;
  const std::int64_t max_tokens = *std::max_element(batches.begin(), batches.end());
  auto ws = MoeWorkspace::plan(ctx.arena(), MoeWorkspaceShape{E, k, H, I, max_tokens, ExpertCompute::fp8});
  ASSERT_TRUE(ws.ok()) << ws.error().message;
  MoeGemms gemms(ctx);
  for (std::int64_t S : batches) {
    const Errors err = run_fp8_case(ctx, gemms, *ws, gu_host, down_host, gu_dev, down_dev, S, p, rng);
    std::printf("[ moe fp8 ] E %d k %d H %lld I %lld S %lld: rel. error %.3g vs fp8 emulation, %.3g vs f32 "
                "(scaling %s)\n",
                E, k, (long long)H, (long long)I, (long long)S, err.vs_emulation, err.vs_f32,
                std::string(fp8_scaling_name(gemms.fp8.last_scaling())).c_str());
    EXPECT_LT(err.vs_emulation, kTolVsEmulation) << "S " << S;
    EXPECT_LT(err.vs_f32, kTolVsF32) << "S " << S;
  }
}

TEST(CudaMoeFp8, routed_experts_match_the_fp8_emulation_and_stay_near_f32_at_odd_shapes) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(6001);
  run_shapes(*ctx, 5, 3, 96, 160, {1, 7, 64}, DType::f32, false, rng);  // odd E, k, S; split gate/up
  run_shapes(*ctx, 32, 4, 64, 96, {1, 5, 64}, DType::bf16, true, rng);
  run_shapes(*ctx, 4, 1, 64, 96, {1, 3}, DType::bf16, true, rng);
}

TEST(CudaMoeFp8, with_a_fused_limit_small_calls_take_the_bf16_fused_kernels_and_larger_ones_fp8_gemms) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(6003);
  const int E = 8, k = 2;
  const std::int64_t H = 64, I = 96, T = 64;
  const ExpertWeights gu_host = encoded_experts(E, int(2 * I), int(H), DType::bf16, rng);
  const ExpertWeights down_host = encoded_experts(E, int(H), int(I), DType::bf16, rng);
  const ExpertWeights gu_dev = upload_experts(*ctx, gu_host), down_dev = upload_experts(*ctx, down_host);
  const SwigluParams p;  // gpt-oss: interleaved, as the fused path needs
  MoeWorkspaceShape s8{E, k, H, I, T, ExpertCompute::fp8};
  s8.fused_max_tokens = 8;
  MoeWorkspaceShape s16 = s8;
  s16.compute = ExpertCompute::bf16;
  auto ws8 = MoeWorkspace::plan(ctx->arena(), s8);
  auto ws16 = MoeWorkspace::plan(ctx->arena(), s16);
  ASSERT_TRUE(ws8.ok()) << ws8.error().message;
  ASSERT_TRUE(ws16.ok()) << ws16.error().message;
  EXPECT_EQ(ws8->fused_tokens, 8);
  MoeGemms gemms(*ctx);
  // 4 tokens, routing on the device: both workspaces run the fused MXFP4 kernels, so the same bits.
  const Tensor x = upload(*ctx, optest::random_f32({4, H}, rng));
  Tensor indices, weights;
  random_routing(4, E, k, rng, indices, weights);
  const Tensor d_idx = upload(*ctx, indices), d_wts = upload(*ctx, weights);
  Tensor out8 = poisoned(*ctx, {4, H}, DType::f32), out16 = poisoned(*ctx, {4, H}, DType::f32);
  D0_ASSERT_OK(moe_experts_cuda(x, d_idx, d_wts, gu_dev, down_dev, p, *ws8, gemms, out8, ctx->stream()));
  D0_ASSERT_OK(moe_experts_cuda(x, d_idx, d_wts, gu_dev, down_dev, p, *ws16, gemms, out16, ctx->stream()));
  const Tensor a = download(*ctx, out8), b = download(*ctx, out16);
  EXPECT_EQ(cudatest::count_nan(a), 0);
  EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0);
  // 32 tokens: above the limit, the fp8 workspace converts and runs fp8 GEMMs, near the fp8 emulation.
  const Errors err = run_fp8_case(*ctx, gemms, *ws8, gu_host, down_host, gu_dev, down_dev, 32, p, rng);
  EXPECT_LT(err.vs_emulation, kTolVsEmulation);
  EXPECT_LT(err.vs_f32, kTolVsF32);
}

TEST(CudaMoeFp8, prefill_sized_fused_calls_run_the_grouped_fp8_wgmma_gemms_near_the_emulation) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(6005);
  // 8 and 16 assignments an expert (from kRsFp8MinTokensPerExpert the fused path takes the FP8 GEMMs: the
  // decode-sized form up to kMxfp4WgmmaMinTokensPerExpert = 24; below 8 the bf16 fused kernels run, as the test
  // above checks), 32 and 48 (the 2-CTA GEMM), and 512 (from kWsFp8MinTokensPerExpert = 96 both GEMMs take the
  // warp-specialised form, gate_up without SwiGLU, which joins the quantisation of h), out of both matrices
  // multiples of 64 as the FP8 GEMM needs.
  const int E = 8, k = 2;
  const std::int64_t H = 128, I = 96, T = 2048;
  ASSERT_GE(T * k / E, kWsFp8MinTokensPerExpert);  // the largest call reaches the warp-specialised GEMMs
  const ExpertWeights gu_host = encoded_experts(E, int(2 * I), int(H), DType::bf16, rng);
  const ExpertWeights down_host = encoded_experts(E, int(H), int(I), DType::f32, rng);
  const ExpertWeights gu_dev = upload_experts(*ctx, gu_host), down_dev = upload_experts(*ctx, down_host);
  const SwigluParams p;
  MoeWorkspaceShape s{E, k, H, I, T, ExpertCompute::fp8};
  s.fused_max_tokens = T;
  auto ws = MoeWorkspace::plan(ctx->arena(), s);
  ASSERT_TRUE(ws.ok()) << ws.error().message;
  ASSERT_TRUE(ws->fused_x8.defined());
  MoeGemms gemms(*ctx);
  ASSERT_EQ(32 * k / E, kRsFp8MinTokensPerExpert);
  for (std::int64_t S : {32, 64, 128, 192, 2048}) {
    SCOPED_TRACE("S " + std::to_string(S));
    const Tensor x = optest::random_f32({S, H}, rng);
    Tensor indices, weights;
    random_routing(S, E, k, rng, indices, weights);
    CpuOps cpu;
    Tensor want_f32 = Tensor::zeros({S, H}, DType::f32);
    EXPECT_TRUE(cpu.moe_experts(x, indices, weights, gu_host, down_host, p, want_f32).ok());
    std::int64_t inexact = 0;
    const Tensor want_fp8 = fp8_moe_emulation(x, indices, weights, gu_host, down_host, p, inexact);
    Tensor d_out = poisoned(*ctx, {S, H}, DType::f32);
    D0_ASSERT_OK(moe_experts_cuda(upload(*ctx, x), upload(*ctx, indices), upload(*ctx, weights), gu_dev, down_dev, p,
                                  *ws, gemms, d_out, ctx->stream()));
    const Tensor got = download(*ctx, d_out);
    EXPECT_EQ(cudatest::count_nan(got), 0);
    EXPECT_EQ(download(*ctx, ws->error_flag).data<std::int32_t>()[0], 0);
    const double vs_emulation = relative_norm_error(got, want_fp8), vs_f32 = relative_norm_error(got, want_f32);
    std::printf("[ moe fp8 grouped ] S %lld: rel. error %.3g vs fp8 emulation, %.3g vs f32\n", (long long)S,
                vs_emulation, vs_f32);
    EXPECT_LT(vs_emulation, kTolVsEmulation);
    EXPECT_LT(vs_f32, kTolVsF32);
  }
}

// Mean milliseconds of one moe_experts_cuda call (after 2 warm-ups).
double time_call_ms(CudaContext& ctx, int reps, const std::function<Status()>& call) {
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(call().ok());
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaEventRecord(start, ctx.stream());
  for (int i = 0; i < reps; ++i) EXPECT_TRUE(call().ok());
  cudaEventRecord(stop, ctx.stream());
  cudaEventSynchronize(stop);
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / reps;
}

TEST(CudaMoeFp8, routed_experts_at_the_gpt_oss_20b_shape_are_accurate_and_timed_against_bf16) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  // 32 experts of 5760x2880 + 2880x2880 MXFP4 (~0.43 GB); workspaces for 128 tokens: all 32 experts, bf16
  // (~1.6 GB) and fp8 (~0.8 GB).
  auto ctx = make_context(std::size_t(4) << 30);
  ASSERT_TRUE(ctx);
  std::mt19937 rng(6002);
  const int E = 32, k = 4;
  const std::int64_t H = 2880, I = 2880, T = 128;
  const ExpertWeights gu_host = encoded_experts(E, int(2 * I), int(H), DType::bf16, rng);
  const ExpertWeights down_host = encoded_experts(E, int(H), int(I), DType::bf16, rng);
  const ExpertWeights gu_dev = upload_experts(*ctx, gu_host), down_dev = upload_experts(*ctx, down_host);
  const SwigluParams p;
  auto ws8 = MoeWorkspace::plan(ctx->arena(), MoeWorkspaceShape{E, k, H, I, T, ExpertCompute::fp8});
  auto ws16 = MoeWorkspace::plan(ctx->arena(), MoeWorkspaceShape{E, k, H, I, T, ExpertCompute::bf16});
  ASSERT_TRUE(ws8.ok() && ws16.ok());
  MoeGemms gemms(*ctx);
  for (std::int64_t S : {1, 4}) {
    const Errors err = run_fp8_case(*ctx, gemms, *ws8, gu_host, down_host, gu_dev, down_dev, S, p, rng);
    std::printf("[ moe fp8 ] gpt-oss-20b E 32 k 4 H 2880 I 2880 S %lld: rel. error %.3g vs fp8 emulation, %.3g vs "
                "f32 (scaling %s)\n",
                (long long)S, err.vs_emulation, err.vs_f32,
                std::string(fp8_scaling_name(gemms.fp8.last_scaling())).c_str());
    EXPECT_LT(err.vs_emulation, kTolVsEmulation) << "S " << S;
    EXPECT_LT(err.vs_f32, kTolVsF32) << "S " << S;
  }
  std::printf("[ moe fp8 ] workspace for %lld tokens: bf16 %s, fp8 %s\n", (long long)T,
              format_bytes(ws16->device_bytes).c_str(), format_bytes(ws8->device_bytes).c_str());
  for (std::int64_t S : {1, 4, 32, 128}) {
    const Tensor x = upload(*ctx, optest::random_f32({S, H}, rng));
    Tensor indices, weights;
    random_routing(S, E, k, rng, indices, weights);  // host indices: one grouping pass on the CPU per call
    Tensor out = poisoned(*ctx, {S, H}, DType::f32);
    const double ms16 = time_call_ms(*ctx, 5, [&] {
      return moe_experts_cuda(x, indices, weights, gu_dev, down_dev, p, *ws16, gemms, out, ctx->stream());
    });
    const double ms8 = time_call_ms(*ctx, 5, [&] {
      return moe_experts_cuda(x, indices, weights, gu_dev, down_dev, p, *ws8, gemms, out, ctx->stream());
    });
    std::printf("[ moe fp8 ] gpt-oss-20b S %3lld: bf16 %.3f ms, fp8 %.3f ms per layer call (%.2fx)\n", (long long)S,
                ms16, ms8, ms16 / ms8);
  }
}

TEST(CudaMoeFp8, an_fp8_workspace_with_a_lone_bf16_gemm_is_an_error_naming_moe_gemms) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(6003);
  const ExpertWeights gu = upload_experts(*ctx, encoded_experts(4, 64, 32, DType::f32, rng));
  const ExpertWeights down = upload_experts(*ctx, encoded_experts(4, 32, 32, DType::f32, rng));
  auto ws = MoeWorkspace::plan(ctx->arena(), MoeWorkspaceShape{4, 2, 32, 32, 2, ExpertCompute::fp8});
  ASSERT_TRUE(ws.ok()) << ws.error().message;
  GemmBf16 gemm(*ctx);
  Tensor indices, weights;
  random_routing(2, 4, 2, rng, indices, weights);
  Tensor out = poisoned(*ctx, {2, 32}, DType::f32);
  const Status st = moe_experts_cuda(upload(*ctx, optest::random_f32({2, 32}, rng)), indices, weights, gu, down,
                                     SwigluParams{}, *ws, gemm, out, ctx->stream());
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(optest::contains(st.error().message, "MoeGemms")) << st.error().message;
}

TEST(CudaMoeWorkspace, an_fp8_plan_carves_e4m3_experts_with_row_scales_instead_of_bf16_ones) {
  // Bookkeeping only: an arena over host memory (plan() launches nothing), so this runs anywhere.
  std::vector<char> host(std::size_t(8) << 20);
  const MoeWorkspaceShape bf16_shape{32, 4, 128, 96, 8, ExpertCompute::bf16};
  MoeWorkspaceShape fp8_shape = bf16_shape;
  fp8_shape.compute = ExpertCompute::fp8;
  auto arena16 = DeviceArena::over(host.data(), host.size() / 2);
  auto arena8 = DeviceArena::over(host.data() + host.size() / 2, host.size() / 2);
  auto ws16 = MoeWorkspace::plan(*arena16, bf16_shape);
  auto ws8 = MoeWorkspace::plan(*arena8, fp8_shape);
  ASSERT_TRUE(ws16.ok()) << ws16.error().message;
  ASSERT_TRUE(ws8.ok()) << ws8.error().message;
  EXPECT_EQ(ws8->gate_up_w8.dtype(), DType::f8_e4m3);
  EXPECT_EQ(ws8->gate_up_w8.shape(), (Shape{32, 192, 128}));
  EXPECT_EQ(ws8->gate_up_scales.shape(), (Shape{32, 192}));
  EXPECT_EQ(ws8->down_w8.shape(), (Shape{32, 128, 96}));
  EXPECT_EQ(ws8->down_scales.shape(), (Shape{32, 128}));
  EXPECT_EQ(ws8->xs8.shape(), (Shape{8, 128}));
  EXPECT_EQ(ws8->h8.shape(), (Shape{8, 96}));
  EXPECT_EQ(ws8->gate_up_w.raw(), nullptr) << "no bf16 experts in an fp8 plan";
  EXPECT_EQ(ws16->gate_up_w8.raw(), nullptr) << "no fp8 experts in a bf16 plan";
  // Expert bytes halve; the row scales add 4 bytes per row (1/H, 1/I of the E4M3 bytes).
  EXPECT_LT(double(ws8->device_bytes), 0.6 * double(ws16->device_bytes));
}

}  // namespace
}  // namespace day0
