// Every MXFP4 reader over the tiled block order (ExpertStorage::mxfp4_tiled, quant/mxfp4_tiles.h) gives the bits it
// gives over the published row-major order: the whole MoE (moe_experts_cuda) at step sizes that take each of its
// paths in both computes, the two online conversions, and the device repack (mxfp4_to_tiles_cuda) against the host
// one. The token and grouped kernels are also compared alone (cuda_moe_token_test.cpp, cuda_moe_fused_test.cpp).
// Skipped visibly without a GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <tuple>

#include "cuda_test_util.h"
#include "moe_test_util.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/moe_cuda.h"
#include "ops/op_test_util.h"
#include "ops/registry.h"
#include "quant/mxfp4_tiles.h"

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

ExpertWeights tiled_copy(const ExpertWeights& host) {
  auto t = mxfp4_tiled_experts(host);
  EXPECT_TRUE(t.ok()) << t.error().message;
  return t.ok() ? *t : host;
}

struct MoeShape {
  int E, k;
  std::int64_t H, I;
};

// H x I. 128 x 128: the bf16 wgmma GEMM fits (inputs in 64-value k-tiles). 192 x 96: it does not (down's 96 inputs),
// the tiled GEMM runs, and both inputs pad (6 groups to 8, 3 to 4). 160 x 96: no grouped GEMM fits (down's 160
// rows), the grouped kernel runs at every size. Steps of 300 tokens average 150 assignments an expert: the FP8
// path's down GEMM is the warp-specialised form there (96 or more).
constexpr MoeShape kShapes[] = {{4, 2, 128, 128}, {4, 2, 192, 96}, {4, 2, 160, 96}};

// Steps by path (fused_max_tokens 512): 1 token the token kernels; 5 and 40 (2.5 and 20 assignments an expert) the
// grouped kernel, but 40 with fp8 the decode-sized FP8 GEMM where the experts fit it (16 to 24 an expert); 300 the
// grouped GEMMs (bf16: wgmma or tiled; fp8: the FP8 wgmma GEMMs).
// fused_max_tokens 0: the conversion path (routed experts converted, then cuBLASLt), host and device routing.
TEST(CudaMxfp4Tiled, the_moe_gives_the_row_major_bits_on_every_path) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context(std::size_t(1) << 30);
  ASSERT_TRUE(ctx);
  std::mt19937 rng(4301);
  MoeGemms gemms(*ctx);
  for (const MoeShape& m : kShapes) {
    const ExpertWeights gu_host = encoded_experts(m.E, int(2 * m.I), int(m.H), DType::bf16, rng);
    const ExpertWeights down_host = encoded_experts(m.E, int(m.H), int(m.I), DType::f32, rng);
    const ExpertWeights gu_rows = upload_experts(*ctx, gu_host), down_rows = upload_experts(*ctx, down_host);
    const ExpertWeights gu_tiles = upload_experts(*ctx, tiled_copy(gu_host));
    const ExpertWeights down_tiles = upload_experts(*ctx, tiled_copy(down_host));
    const SwigluParams p;
    for (ExpertCompute compute : {ExpertCompute::bf16, ExpertCompute::fp8})
      for (std::int64_t fused : {512, 0}) {
        MoeWorkspaceShape shape{m.E, m.k, m.H, m.I, 300, compute};
        shape.fused_max_tokens = fused;
        auto ws = MoeWorkspace::plan(ctx->arena(), shape);
        ASSERT_TRUE(ws.ok()) << ws.error().message;
        for (std::int64_t S : {1, 5, 40, 300}) {
          SCOPED_TRACE(::testing::Message() << "H " << m.H << " I " << m.I << " compute "
                                            << expert_compute_name(compute) << " fused_max_tokens " << fused << " S "
                                            << S);
          const Tensor x = upload(*ctx, optest::random_f32({S, m.H}, rng));
          Tensor indices, weights;
          random_routing(S, m.E, m.k, rng, indices, weights);
          const bool on_device = fused > 0 || S % 2 == 0;  // the fused path routes on the device only
          const Tensor idx = on_device ? upload(*ctx, indices) : indices;
          const Tensor wts = on_device ? upload(*ctx, weights) : weights;
          auto run = [&](const ExpertWeights& gu, const ExpertWeights& down) {
            Tensor out = poisoned(*ctx, {S, m.H}, DType::f32);
            const Status st = moe_experts_cuda(x, idx, wts, gu, down, p, *ws, gemms, out, ctx->stream());
            EXPECT_TRUE(st.ok()) << st.error().message;
            return download(*ctx, out);
          };
          const Tensor want = run(gu_rows, down_rows), got = run(gu_tiles, down_tiles);
          EXPECT_EQ(cudatest::count_nan(want), 0);
          EXPECT_TRUE(same_bits(want, got));
          EXPECT_EQ(cudatest::download_flag(*ctx, ws->error_flag), 0);
        }
      }
  }
}

// The conversions of selected experts (the conversion path, and CudaOps::expert_matmul) give the same bytes and
// row scales from either order; 2,880 inputs (90 groups, padded to 92) and 1,040 rows (65 row blocks).
TEST(CudaMxfp4Tiled, the_conversions_give_the_row_major_bytes) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context(std::size_t(1) << 30);
  ASSERT_TRUE(ctx);
  std::mt19937 rng(4302);
  for (auto [out, in] : {std::pair<int, int>{64, 160}, {1040, 2880}}) {
    SCOPED_TRACE(::testing::Message() << "out " << out << " in " << in);
    const int E = 5;
    const ExpertWeights host = encoded_experts(E, out, in, DType::f32, rng);
    const ExpertWeights rows = upload_experts(*ctx, host), tiles = upload_experts(*ctx, tiled_copy(host));
    const Tensor ids = upload(*ctx, optest::i32_tensor({3, 0, 4}));
    Tensor flag = cudatest::zeroed(*ctx, {1}, DType::i32);
    auto bf16 = [&](const ExpertWeights& w) {
      Tensor ws = poisoned(*ctx, {3, out, in}, DType::bf16);
      const Status st = mxfp4_experts_to_bf16_cuda(w, ids, ws, flag, ctx->stream());
      EXPECT_TRUE(st.ok()) << st.error().message;
      return download(*ctx, ws);
    };
    EXPECT_TRUE(same_bits(bf16(rows), bf16(tiles)));
    auto fp8 = [&](const ExpertWeights& w, Tensor& scales) {
      Tensor w8 = poisoned(*ctx, {3, out, in}, DType::f8_e4m3), s = poisoned(*ctx, {3, out}, DType::f32);
      const Status st = mxfp4_experts_to_fp8_cuda(w, ids, w8, s, flag, ctx->stream());
      EXPECT_TRUE(st.ok()) << st.error().message;
      scales = download(*ctx, s);
      return download(*ctx, w8);
    };
    Tensor s_rows, s_tiles;
    const Tensor w_rows = fp8(rows, s_rows), w_tiles = fp8(tiles, s_tiles);
    EXPECT_TRUE(same_bits(w_rows, w_tiles));
    EXPECT_TRUE(same_bits(s_rows, s_tiles));
    EXPECT_EQ(cudatest::download_flag(*ctx, flag), 0);
  }
}

// The placement's device repack writes the host repack's bytes, padding zeros included (the output starts
// poisoned), for padded and unpadded K; it refuses rows that are not whole row blocks, and an in-place call.
TEST(CudaMxfp4Tiled, the_device_repack_equals_the_host_repack) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(4303);
  for (auto [E, out, groups] : {std::tuple<int, int, int>{3, 48, 90}, {2, 32, 8}, {1, 16, 1}}) {
    SCOPED_TRACE(::testing::Message() << "E " << E << " out " << out << " groups " << groups);
    Tensor blocks = Tensor::zeros({E, out, groups, 16}, DType::u8);
    for (std::int64_t i = 0; i < blocks.numel(); ++i) blocks.data<std::uint8_t>()[i] = std::uint8_t(rng());
    const std::int64_t padded = mxfp4_tiled_groups(groups);
    Tensor want = Tensor::zeros({E, out, padded, 16}, DType::u8);
    D0_ASSERT_OK(mxfp4_to_tiles(blocks.data<std::uint8_t>(), std::int64_t(E) * out, groups,
                                want.data<std::uint8_t>()));
    Tensor got = poisoned(*ctx, {E, out, padded, 16}, DType::u8);
    D0_ASSERT_OK(mxfp4_to_tiles_cuda(upload(*ctx, blocks), got, ctx->stream()));
    EXPECT_TRUE(same_bits(download(*ctx, got), want));
  }
  Tensor odd = upload(*ctx, Tensor::zeros({1, 24, 4, 16}, DType::u8));
  Tensor odd_out = poisoned(*ctx, {1, 24, 4, 16}, DType::u8);
  const Status rows = mxfp4_to_tiles_cuda(odd, odd_out, ctx->stream());
  ASSERT_FALSE(rows.ok());
  EXPECT_NE(rows.error().message.find("multiple of 16"), std::string::npos) << rows.error().message;
  Tensor same = upload(*ctx, Tensor::zeros({1, 16, 4, 16}, DType::u8));
  EXPECT_FALSE(mxfp4_to_tiles_cuda(same, same, ctx->stream()).ok());
}

}  // namespace
}  // namespace day0
