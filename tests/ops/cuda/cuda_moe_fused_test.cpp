// The MXFP4 grouped expert kernels that read the packed experts directly on tensor cores (the decode-size fused
// matmul and the prefill-size tiled GEMM) against the CPU reference on fresh random inputs: the decode exactly
// (one-hot inputs, every scale code), products against CpuOps::expert_matmul from one token to several passes of
// 32 (fused) and several 128-token tiles per expert (tiled), the SwiGLU epilogue, and a bad expert id. The whole fused
// MoE is compared with CpuOps::moe_experts in cuda_moe_test.cpp. Skipped visibly without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iterator>
#include <random>
#include <utility>
#include <vector>

#include "cuda_test_util.h"
#include "moe_test_util.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cuda/expert_grouping_cuda.h"
#include "ops/cuda/moe_mxfp4_fused_cuda.h"
#include "ops/cuda/moe_mxfp4_gemm_cuda.h"
#include "ops/cuda/moe_mxfp4_wgmma_cuda.h"
#include "ops/op_test_util.h"
#include "quant/mxfp4.h"

namespace day0 {
namespace {

using cudatest::download;
using cudatest::make_context;
using cudatest::poisoned;
using cudatest::relative_norm_error;
using cudatest::upload;
using moetest::cpu_per_assignment;
using moetest::encoded_experts;
using moetest::group;
using moetest::Groups;
using moetest::random_routing;
using moetest::upload_experts;

enum class Kernel { fused, tiled, wgmma32, wgmma64, wgmma128 };

// The wgmma GEMM's token tile, 0 for the other kernels.
int wgmma_tile(Kernel k) {
  switch (k) {
    case Kernel::wgmma32: return 32;
    case Kernel::wgmma64: return 64;
    case Kernel::wgmma128: return 128;
    default: return 0;
  }
}

const char* kernel_name(Kernel k) {
  switch (k) {
    case Kernel::fused:
      return "fused matmul";
    case Kernel::tiled:
      return "tiled gemm";
    case Kernel::wgmma32:
      return "wgmma gemm, 32-token tiles";
    case Kernel::wgmma64:
      return "wgmma gemm, 64-token tiles";
    case Kernel::wgmma128:
      return "wgmma gemm, 128-token tiles";
  }
  return "?";
}

constexpr Kernel kWgmmaKernels[] = {Kernel::wgmma32, Kernel::wgmma64, Kernel::wgmma128};

// Both forms of the fused kernel: K split over 8 warps, then over 4.
constexpr bool kSplits[] = {true, false};

std::string split_name(bool wide) { return wide ? "8 warps" : "4 warps"; }

// One grouped launch over A assignments of E experts by either kernel (`wide`: the fused kernel's split).
Status run_grouped(Kernel kern, const Tensor& x, bool inputs_are_tokens, const ExpertWeights& d, const Groups& g,
                   bool wide, std::int64_t A, int E, const SwigluParams* p, Tensor& out, cudaStream_t stream) {
  const std::int64_t routed = std::min<std::int64_t>(E, A);
  if (kern == Kernel::fused)
    return mxfp4_grouped_matmul_cuda(x, inputs_are_tokens, d, g.view(), wide, routed, p, out, stream);
  if (const int tile = wgmma_tile(kern); tile > 0) {
    return mxfp4_grouped_gemm_wgmma_cuda(x, inputs_are_tokens, d, g.view(), tile,
                                         mxfp4_wgmma_launch_slots(routed, A, tile), p, out, stream);
  }
  return mxfp4_grouped_gemm_cuda(x, inputs_are_tokens, d, g.view(), mxfp4_gemm_launch_slots(routed, A), p, out, stream);
}

TEST(CudaMoeFused, decodes_mxfp4_in_registers_exactly_at_every_scale_code) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(4101);
  // Random nibbles and scale codes 1..128 (one multiply per pair) or 1..250 (most warps take both multiplies;
  // 6 * 2^123 stays finite in bf16). Input s is the one-hot vector e_s, so output row r of token s is W[r, s]: any
  // decode error shows. 96 or 128 tokens over 3 experts: every fused form makes several passes; 96 inputs end in a
  // part-filled tile (the wgmma GEMM needs inputs in k-tiles of 64: 128 only).
  const int E = 3, out = 64;
  for (int in : {96, 128}) {
    ExpertWeights w;
    w.n_experts = E, w.out = out, w.in = in;
    w.blocks = Tensor::zeros({E, out, in / 32, 16}, DType::u8);
    w.scales = Tensor::zeros({E, out, in / 32}, DType::u8);
    for (std::int64_t i = 0; i < w.blocks.numel(); ++i) w.blocks.data<std::uint8_t>()[i] = std::uint8_t(rng());
    Tensor x = Tensor::zeros({in, in}, DType::f32);
    for (int s = 0; s < in; ++s) x.data<float>()[s * in + s] = 1.f;
    Tensor indices = Tensor::zeros({in, 1}, DType::i32);
    for (int s = 0; s < in; ++s) indices.data<std::int32_t>()[s] = static_cast<std::int32_t>(rng() % E);
    const Groups g = group(*ctx, indices, E);
    for (int max_code : {128, 250}) {
      for (std::int64_t i = 0; i < w.scales.numel(); ++i)
        w.scales.data<std::uint8_t>()[i] = std::uint8_t(1 + rng() % max_code);
      const ExpertWeights d = upload_experts(*ctx, w);
      std::vector<std::pair<Kernel, bool>> forms = {{Kernel::tiled, false}};
      if (in % 64 == 0)
        for (Kernel kern : kWgmmaKernels) forms.push_back({kern, false});
      for (bool wide : kSplits) forms.push_back({Kernel::fused, wide});
      for (const auto& [kern, wide] : forms) {
        SCOPED_TRACE(::testing::Message()
                     << kernel_name(kern) << ", scale codes 1.." << max_code << ", " << split_name(wide));
        Tensor y = poisoned(*ctx, {in, out}, DType::f32);
        D0_ASSERT_OK(
            run_grouped(kern, upload(*ctx, optest::to_bf16(x)), true, d, g, wide, in, E, nullptr, y, ctx->stream()));
        const Tensor got = download(*ctx, y);
        std::vector<float> row(in);
        std::int64_t mismatches = 0;
        for (int s = 0; s < in; ++s) {
          const int e = indices.data<std::int32_t>()[s];
          for (int r = 0; r < out; ++r) {
            const std::int64_t wr = std::int64_t(e) * out + r;
            mxfp4_decode_row(w.blocks.data<std::uint8_t>() + wr * (in / 32) * 16,
                             w.scales.data<std::uint8_t>() + wr * (in / 32), in, row.data());
            const float v = got.data<float>()[s * out + r];
            mismatches += std::memcmp(&v, &row[s], sizeof(float)) != 0 && !(v == 0.f && row[s] == 0.f);
          }
        }
        EXPECT_EQ(mismatches, 0);
      }
    }
  }
}

// Every kernel of `kernels` on S random tokens routed top-k over the experts (host w, its device copy d), against
// one CPU reference.
void compare_kernels_with_cpu(CudaContext& ctx, const std::vector<Kernel>& kernels, const ExpertWeights& w,
                              const ExpertWeights& d, int k, std::int64_t S, std::mt19937& rng) {
  const int E = static_cast<int>(w.n_experts), out = static_cast<int>(w.out), in = static_cast<int>(w.in);
  SCOPED_TRACE(::testing::Message() << "E " << E << " k " << k << " out " << out << " in " << in << " S " << S);
  const Tensor x = optest::to_bf16(optest::random_f32({S, in}, rng)).to_f32();  // bf16-exact, as the kernel reads it
  Tensor indices, weights;
  random_routing(S, E, k, rng, indices, weights);
  const Groups g = group(ctx, indices, E);
  const Tensor want = cpu_per_assignment(x, indices, w);
  const Tensor xb = upload(ctx, optest::to_bf16(x));
  for (Kernel kern : kernels) {
    SCOPED_TRACE(kernel_name(kern));
    for (bool wide : kSplits) {
      if (kern != Kernel::fused && wide) continue;  // the GEMMs have one form
      SCOPED_TRACE(split_name(wide));
      Tensor y = poisoned(ctx, {S * k, out}, DType::f32);
      D0_ASSERT_OK(run_grouped(kern, xb, true, d, g, wide, S * k, E, nullptr, y, ctx.stream()));
      const Tensor got = download(ctx, y);
      EXPECT_EQ(cudatest::count_nan(got), 0);
      // 1e-5: weights and inputs are exact on both sides and every product is exact in f32; only the summation
      // order (and the tensor cores' f32 accumulation) differs.
      EXPECT_LT(relative_norm_error(got, want), 1e-5);
    }
  }
}

void compare_with_cpu(CudaContext& ctx, Kernel kern, int E, int k, int out, int in, std::int64_t S, DType bias_dtype,
                      std::mt19937& rng) {
  const ExpertWeights w = encoded_experts(E, out, in, bias_dtype, rng);
  compare_kernels_with_cpu(ctx, {kern}, w, upload_experts(ctx, w), k, S, rng);
}

TEST(CudaMoeFused, grouped_matmul_matches_the_cpu_expert_matmul) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(4102);
  // 96 and 160 inputs end in a part-filled tile; S 40 with E 4, k 4 puts 40 tokens on every expert (5 passes).
  for (std::int64_t S : {1, 3, 8, 17, 40}) {
    compare_with_cpu(*ctx, Kernel::fused, 4, 4, 64, 96, S, DType::f32, rng);
    compare_with_cpu(*ctx, Kernel::fused, 32, 4, 48, 160, S, DType::bf16, rng);
  }
}

TEST(CudaMoeFused, tiled_gemm_matches_the_cpu_expert_matmul) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(4105);
  // From a lone token (one part-filled tile) to ~300 tokens per expert (three 128-token tiles, the last ragged);
  // 32 experts with a few tokens each: many part-filled tiles in one launch.
  for (std::int64_t S : {1, 40, 300}) compare_with_cpu(*ctx, Kernel::tiled, 4, 4, 64, 96, S, DType::f32, rng);
  for (std::int64_t S : {9, 130}) compare_with_cpu(*ctx, Kernel::tiled, 32, 4, 128, 160, S, DType::bf16, rng);
}

TEST(CudaMoeFused, wgmma_gemm_matches_the_cpu_expert_matmul) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(4107);
  for (Kernel kern : kWgmmaKernels) {
    // A lone token; ~300 tokens an expert (several tiles, the last ragged); out 64 (a CTA's second warpgroup past
    // the rows) and 192 (one full CTA and one half); in 64 (one k-tile) to 320 (more k-tiles than ring stages).
    for (std::int64_t S : {1, 40, 300}) compare_with_cpu(*ctx, kern, 4, 4, 64, 128, S, DType::f32, rng);
    for (std::int64_t S : {9, 130}) compare_with_cpu(*ctx, kern, 32, 4, 192, 320, S, DType::bf16, rng);
    compare_with_cpu(*ctx, kern, 8, 2, 128, 64, 70, DType::f32, rng);
    compare_with_cpu(*ctx, kern, 8, 2, 64, 576, 20, DType::bf16, rng);    // 9 k-tiles: past the deepest ring (6)
    compare_with_cpu(*ctx, kern, 4, 2, 64, 2880, 150, DType::bf16, rng);  // gpt-oss's 45 k-tiles: many ring laps
  }
}

TEST(CudaMoeFused, grouped_matmul_matches_the_cpu_at_the_gpt_oss_20b_shape) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context(std::size_t(2) << 30);
  ASSERT_TRUE(ctx);
  std::mt19937 rng(4103);
  // One encoding (265 M values) and upload and, at 64 tokens, one reference for the four GEMMs: that was most of
  // this test's 138 s on the H200 when each kernel made its own.
  const ExpertWeights w = encoded_experts(32, 2880, 2880, DType::bf16, rng);
  const ExpertWeights d = upload_experts(*ctx, w);
  for (std::int64_t S : {1, 8}) compare_kernels_with_cpu(*ctx, {Kernel::fused}, w, d, 4, S, rng);
  std::vector<Kernel> gemms = {Kernel::tiled};
  gemms.insert(gemms.end(), std::begin(kWgmmaKernels), std::end(kWgmmaKernels));
  compare_kernels_with_cpu(*ctx, gemms, w, d, 4, 64, rng);
}

TEST(CudaMoeFused, swiglu_epilogue_matches_the_cpu_swiglu_of_the_matmul) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(4104);
  CpuOps cpu;
  const int E = 8, k = 2, I = 64, H = 64;  // gate_up rows 128: a multiple of the tiled GEMM's 64
  const std::int64_t S = 11;
  const ExpertWeights w = encoded_experts(E, 2 * I, H, DType::bf16, rng);
  const Tensor x = optest::to_bf16(optest::random_f32({S, H}, rng, -3.f, 3.f)).to_f32();  // reaches the clamp
  Tensor indices, weights;
  random_routing(S, E, k, rng, indices, weights);
  const Groups g = group(*ctx, indices, E);
  SwigluParams p;
  p.interleaved = true;
  for (Kernel kern : {Kernel::fused, Kernel::tiled, Kernel::wgmma32, Kernel::wgmma64, Kernel::wgmma128}) {
    SCOPED_TRACE(kernel_name(kern));
    Tensor h = poisoned(*ctx, {S * k, I}, DType::bf16);
    D0_ASSERT_OK(run_grouped(kern, upload(*ctx, optest::to_bf16(x)), true, upload_experts(*ctx, w), g,
                             fused_moe_wide_split(S, false), S * k, E, &p, h, ctx->stream()));
    const Tensor got = download(*ctx, h).to_f32();
    // h is by grouped entry: row q holds assignment assignments[q].
    const Tensor assignments = download(*ctx, g.assignments);
    const Tensor per_assignment = cpu_per_assignment(x, indices, w);
    Tensor want_by_assignment = Tensor::zeros({S * k, I}, DType::f32);
    D0_ASSERT_OK(cpu.swiglu_clamped(per_assignment, p, want_by_assignment));
    Tensor want = Tensor::zeros({S * k, I}, DType::f32);
    for (std::int64_t q = 0; q < S * k; ++q)
      std::memcpy(want.data<float>() + q * I,
                  want_by_assignment.data<float>() + assignments.data<std::int32_t>()[q] * I, I * sizeof(float));
    EXPECT_EQ(cudatest::count_nan(got), 0);
    // 4e-3: the output is rounded to bf16 (2^-9 relative per element); the matmul differs by summation order only.
    EXPECT_LT(relative_norm_error(got, optest::to_bf16(want).to_f32()), 4e-3);
  }
}

TEST(CudaMoeFused, a_bad_expert_id_raises_the_flag_and_leaves_the_rest_computed) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(4105);
  const ExpertWeights w = encoded_experts(4, 32, 64, DType::f32, rng);
  Tensor indices = Tensor::zeros({2, 1}, DType::i32);
  indices.data<std::int32_t>()[0] = 2;
  indices.data<std::int32_t>()[1] = 9;  // outside [0, 4)
  const Tensor x = optest::to_bf16(optest::random_f32({2, 64}, rng)).to_f32();
  const Groups g = group(*ctx, indices, 4);
  EXPECT_EQ(cudatest::download_flag(*ctx, g.flag), 1);
  Tensor y = poisoned(*ctx, {2, 32}, DType::f32);
  D0_ASSERT_OK(mxfp4_grouped_matmul_cuda(upload(*ctx, optest::to_bf16(x)), true, upload_experts(*ctx, w), g.view(),
                                         false, 2, nullptr, y, ctx->stream()));
  const Tensor got = download(*ctx, y);
  Tensor first = Tensor::zeros({1, 1}, DType::i32);
  first.data<std::int32_t>()[0] = 2;
  const Tensor want = cpu_per_assignment(x.slice_rows(0, 1).clone(), first, w);
  EXPECT_LT(relative_norm_error(got.slice_rows(0, 1).clone(), want), 1e-5);
}

TEST(CudaMoeFused, sixteen_token_passes_give_the_bits_of_eight_token_passes) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(4108);
  // 60 tokens x 2 of 4 experts: ~30 an expert, so full 16-token passes, part-filled ones and passes of 8 or fewer.
  // Inputs spread over 2^-12..2^12 make the f32 sums inexact: only the same order of the same products agrees.
  const int E = 4, k = 2, out = 64, in = 1024;
  const std::int64_t S = 60;
  const ExpertWeights d = upload_experts(*ctx, encoded_experts(E, out, in, DType::f32, rng));
  const Tensor x = upload(*ctx, optest::to_bf16(moetest::spread_inputs(S, in, rng)));
  Tensor indices, weights;
  random_routing(S, E, k, rng, indices, weights);
  const Groups g = group(*ctx, indices, E);
  SwigluParams p;
  p.interleaved = true;
  const SwigluParams* forms[] = {nullptr, &p};
  for (const SwigluParams* swiglu : forms) {
    SCOPED_TRACE(swiglu ? "swiglu" : "plain");
    auto run = [&](int pass_tokens) {
      Tensor y = swiglu ? poisoned(*ctx, {S * k, out / 2}, DType::bf16) : poisoned(*ctx, {S * k, out}, DType::f32);
      EXPECT_TRUE(mxfp4_grouped_matmul_cuda(x, true, d, g.view(), false, E, swiglu, y, ctx->stream(), pass_tokens)
                      .ok());
      return download(*ctx, y);
    };
    const Tensor eight = run(8), sixteen = run(16);
    EXPECT_EQ(cudatest::count_nan(eight.to_f32()), 0);
    EXPECT_EQ(std::memcmp(eight.raw(), sixteen.raw(), eight.nbytes()), 0);
  }
  Tensor y = poisoned(*ctx, {S * k, out}, DType::f32);
  EXPECT_FALSE(mxfp4_grouped_matmul_cuda(x, true, d, g.view(), false, E, nullptr, y, ctx->stream(), 12).ok());
}

// The grouped kernel over the tiled block order (ExpertStorage::mxfp4_tiled) gives the row-major order's bits:
// one and two row tiles a CTA (out 48, 64), whole and part-filled last tiles (in 1,024, 2,880), 8- and 16-token
// passes, the wide split at one token, plain and SwiGLU. The other readers: cuda_mxfp4_tiled_test.cpp.
TEST(CudaMoeFused, tiled_blocks_give_the_row_major_bits) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(4111);
  const int E = 4, k = 2;
  for (auto [out, in] : {std::pair<int, int>{48, 1024}, {64, 2880}}) {
    const ExpertWeights host = encoded_experts(E, out, in, DType::f32, rng);
    auto tiled_host = mxfp4_tiled_experts(host);
    ASSERT_TRUE(tiled_host.ok()) << tiled_host.error().message;
    const ExpertWeights rows = upload_experts(*ctx, host), tiles = upload_experts(*ctx, *tiled_host);
    for (std::int64_t S : {1, 60}) {
      const Tensor x = upload(*ctx, optest::to_bf16(moetest::spread_inputs(S, in, rng)));
      Tensor indices, weights;
      random_routing(S, E, k, rng, indices, weights);
      const Groups g = group(*ctx, indices, E);
      SwigluParams p;
      p.interleaved = true;
      const SwigluParams* forms[] = {nullptr, &p};
      for (const SwigluParams* swiglu : forms)
        for (int pass_tokens : {8, 16}) {
          SCOPED_TRACE(::testing::Message() << "out " << out << " in " << in << " S " << S << " pass " << pass_tokens
                                            << (swiglu ? " swiglu" : " plain"));
          auto run = [&](const ExpertWeights& w) {
            Tensor y =
                swiglu ? poisoned(*ctx, {S * k, out / 2}, DType::bf16) : poisoned(*ctx, {S * k, out}, DType::f32);
            const Status st =
                mxfp4_grouped_matmul_cuda(x, true, w, g.view(), S == 1, E, swiglu, y, ctx->stream(), pass_tokens);
            EXPECT_TRUE(st.ok()) << st.error().message;
            return download(*ctx, y);
          };
          const Tensor want = run(rows), got = run(tiles);
          EXPECT_EQ(cudatest::count_nan(want.to_f32()), 0);
          EXPECT_EQ(std::memcmp(want.raw(), got.raw(), want.nbytes()), 0);
        }
    }
  }
}

TEST(CudaMoeFused, batch_invariant_mode_gives_a_token_the_same_bits_alone_and_in_a_batch) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(4106);
  // 1,024 inputs = 8 tiles: the 8-warp split and the 4-warp one sum them in different orders, so a batch-1 call
  // on the wide split would differ from the same token in a batch. Inputs spread over 2^-12..2^12 make the f32
  // sums inexact (with inputs of one magnitude they are exact and every order agrees).
  const int E = 4, out = 32, in = 1024;
  const ExpertWeights d = upload_experts(*ctx, encoded_experts(E, out, in, DType::f32, rng));
  const Tensor x = optest::to_bf16(moetest::spread_inputs(3, in, rng));
  Tensor indices = Tensor::zeros({3, 1}, DType::i32);
  for (int s = 0; s < 3; ++s) indices.data<std::int32_t>()[s] = s == 0 ? 1 : s;
  auto run = [&](std::int64_t S, bool invariant) {
    Tensor ids = indices.slice_rows(0, S).clone();
    const Groups g = group(*ctx, ids, E);
    Tensor y = poisoned(*ctx, {S, out}, DType::f32);
    EXPECT_TRUE(run_grouped(Kernel::fused, upload(*ctx, x.slice_rows(0, S).clone()), true, d, g,
                            fused_moe_wide_split(S, invariant), S, E, nullptr, y, ctx->stream())
                    .ok());
    return download(*ctx, y).slice_rows(0, 1).clone();
  };
  const Tensor batch = run(3, true), alone = run(1, true);
  EXPECT_EQ(std::memcmp(batch.raw(), alone.raw(), batch.nbytes()), 0);
  // Not a tautology: the 8-warp form is another sum (it may agree on a few elements, not on all 32).
  const Tensor wide = run(1, false);
  EXPECT_NE(std::memcmp(batch.raw(), wide.raw(), batch.nbytes()), 0);
}

}  // namespace
}  // namespace day0
