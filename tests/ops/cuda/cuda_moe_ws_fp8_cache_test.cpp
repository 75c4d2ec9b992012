// The warp-specialised FP8 GEMM's weight cache (Fp8WeightCache, moe_mxfp4_wgmma_fp8_cuda.h): an expert with two or
// more 192-token tiles converts its A tiles once, stores them, and its other tiles read them. Against the same GEMM
// without a cache (the form cuda_moe_wgmma_fp8_test compares with the CPU): the same bits, with fewer cache slots
// than big experts (the rest convert per tile), in consecutive calls on new inputs (a call never reads what an
// earlier one stored), a gate_up- then a down-shaped call on one cache, with SwiGLU; and the stored bytes are the
// CPU's conversion of the expert's rows. Skipped visibly without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "cuda_test_util.h"
#include "moe_test_util.h"
#include "ops/cuda/moe_mxfp4_wgmma_cuda.h"
#include "ops/cuda/moe_mxfp4_wgmma_fp8_cuda.h"
#include "ops/op_test_util.h"
#include "quant/fp8_experts.h"
#include "quant/mxfp4.h"
#include "quant/mxfp4_to_fp8_table.h"

namespace day0 {
namespace {

using cudatest::download;
using cudatest::make_context;
using cudatest::poisoned;
using cudatest::upload;
using cudatest::zeroed;
using moetest::encoded_experts;
using moetest::group;
using moetest::Groups;
using moetest::upload_experts;

// k distinct experts a token, drawn in proportion to popularities exp(1.5 z): a few experts take several 192-token
// tiles, most one or none (as a random-weight router routes deep layers).
Tensor skewed_indices(std::int64_t S, int E, int k, std::mt19937& rng) {
  std::normal_distribution<double> normal;
  std::vector<double> popularity(E);
  for (double& p : popularity) p = std::exp(1.5 * normal(rng));
  Tensor idx = Tensor::zeros({S, k}, DType::i32);
  std::uniform_real_distribution<double> uniform;
  for (std::int64_t s = 0; s < S; ++s) {
    std::vector<double> left = popularity;
    for (int j = 0; j < k; ++j) {
      double total = 0;
      for (double p : left) total += p;
      double x = uniform(rng) * total;
      int pick = 0;
      for (int e = 0; e < E; ++e)
        if (left[e] > 0) {
          pick = e;
          if ((x -= left[e]) < 0) break;
        }
      left[pick] = 0;
      idx.data<std::int32_t>()[s * k + j] = pick;
    }
  }
  return idx;
}

struct Cache {
  Fp8WeightCache c;
  Cache(CudaContext& ctx, int slots, std::int64_t rows, std::int64_t in) {
    c.weights = zeroed(ctx, {slots, rows, in}, DType::f8_e4m3);
    c.ready = zeroed(ctx, {slots, (rows + 127) / 128}, DType::i32);
    c.epoch = zeroed(ctx, {2}, DType::i32);
  }
};

// The GEMM on entry rows x8 (scales sx) of experts w, with or without a cache.
Tensor run(CudaContext& ctx, const Tensor& x8, const Tensor& sx, const ExpertWeights& w, const Groups& g,
           std::int64_t A, bool swiglu, const Fp8WeightCache* cache) {
  SwigluParams sp;
  sp.alpha = 1.702f;
  sp.limit = 7.f;
  Tensor y = poisoned(ctx, {A, swiglu ? w.out / 2 : w.out}, DType::f32);
  const std::int64_t slots = mxfp4_wgmma_launch_slots(std::min<std::int64_t>(w.n_experts, A), A, 192);
  const Status st = mxfp4_grouped_gemm_wgmma_fp8_cuda(x8, sx, false, w, g.view(), 192, slots, swiglu ? &sp : nullptr, y,
                                                      ctx.stream(), cache);
  EXPECT_TRUE(st.ok()) << st.error().message;
  return download(ctx, y);
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// Random e4m3 entry rows (finite codes) and scales for A entries of width in.
void random_inputs(CudaContext& ctx, std::int64_t A, int in, std::mt19937& rng, Tensor& x8, Tensor& sx) {
  Tensor h8 = Tensor::zeros({A, in}, DType::f8_e4m3), hs = Tensor::zeros({A}, DType::f32);
  for (std::int64_t i = 0; i < h8.numel(); ++i) h8.data<std::uint8_t>()[i] = static_cast<std::uint8_t>(rng() % 0x7F);
  for (std::int64_t i = 0; i < A; ++i) hs.data<float>()[i] = 0.01f + 0.001f * static_cast<float>(rng() % 100);
  x8 = upload(ctx, h8);
  sx = upload(ctx, hs);
}

// Tile counts an expert from the grouping's offsets.
std::vector<int> expert_tiles(CudaContext& ctx, const Groups& g, int E) {
  const Tensor off = download(ctx, g.offsets);
  std::vector<int> tiles(E);
  for (int e = 0; e < E; ++e)
    tiles[e] = (off.data<std::int32_t>()[e + 1] - off.data<std::int32_t>()[e] + 191) / 192;
  return tiles;
}

TEST(CudaMoeWsFp8Cache, cached_experts_give_the_bits_of_converting_every_tile) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(9137);
  constexpr int E = 16, k = 4;
  constexpr std::int64_t S = 700;  // 2,800 entries: several experts of 2-6 tiles
  // gate_up-like (out 640: 5 row blocks) and down-like (out 320: the last row block half past the matrix; in 640),
  // K = 320 and 640: k-tiles whose last half lies past the row.
  const ExpertWeights gu_host = encoded_experts(E, 640, 320, DType::bf16, rng);
  const ExpertWeights down_host = encoded_experts(E, 320, 640, DType::f32, rng);
  const ExpertWeights gu = upload_experts(*ctx, gu_host), down = upload_experts(*ctx, down_host);
  const Tensor indices = skewed_indices(S, E, k, rng);
  const Groups g = group(*ctx, indices, E);
  const std::int64_t A = S * k;
  const std::vector<int> tiles = expert_tiles(*ctx, g, E);
  const int big = static_cast<int>(std::count_if(tiles.begin(), tiles.end(), [](int t) { return t > 1; }));
  ASSERT_GE(big, 3) << "the routing must give several experts two or more tiles";

  for (int slots : {2, E}) {  // 2: fewer slots than big experts, the others convert per tile
    SCOPED_TRACE(::testing::Message() << slots << " cache slots, " << big << " big experts");
    Cache cache(*ctx, slots, 640, 640);
    for (int call = 0; call < 2; ++call) {  // new inputs each call, on the same cache
      Tensor x8, sx, h8, sh;
      random_inputs(*ctx, A, 320, rng, x8, sx);
      random_inputs(*ctx, A, 640, rng, h8, sh);
      for (bool swiglu : {false, true}) {
        const Tensor want = run(*ctx, x8, sx, gu, g, A, swiglu, nullptr);
        const Tensor got = run(*ctx, x8, sx, gu, g, A, swiglu, &cache.c);
        EXPECT_EQ(cudatest::count_nan(got), 0);
        EXPECT_TRUE(same_bits(got, want)) << "gate_up shape, call " << call << (swiglu ? ", SwiGLU" : "");
      }
      const Tensor want = run(*ctx, h8, sh, down, g, A, false, nullptr);
      const Tensor got = run(*ctx, h8, sh, down, g, A, false, &cache.c);
      EXPECT_EQ(cudatest::count_nan(got), 0);
      EXPECT_TRUE(same_bits(got, want)) << "down shape, call " << call;
    }
    // Slot 0 holds the first big expert's down matrix (the last call's): the CPU's conversion of its rows (the
    // kernel's rule: each row's largest block exponent minus 6, each group through its clamped shift's table).
    const int e0 = static_cast<int>(std::find_if(tiles.begin(), tiles.end(), [](int t) { return t > 1; }) -
                                    tiles.begin());
    const Tensor stored = download(*ctx, cache.c.weights);
    const std::int64_t groups = down_host.in / kMxfp4GroupSize;
    int wrong = 0;
    for (std::int64_t r = 0; r < down_host.out; ++r) {
      const std::int64_t row = std::int64_t(e0) * down_host.out + r;
      const std::uint8_t* codes = down_host.scales.data<std::uint8_t>() + row * groups;
      const std::uint8_t* blocks = down_host.blocks.data<std::uint8_t>() + row * groups * kMxfp4GroupBytes;
      const int max_code = *std::max_element(codes, codes + groups);
      const std::uint8_t* got = stored.data<std::uint8_t>() + r * down_host.in;  // slot 0: [out, in] from the start
      for (std::int64_t gi = 0; gi < groups; ++gi) {
        const Mxfp4Fp8Table t =
            mxfp4_fp8_table(mxfp4_fp8_clamped_shift(codes[gi] - max_code + kFp8RowExponentShift));
        for (int b = 0; b < kMxfp4GroupBytes; ++b) {
          const std::uint8_t byte = blocks[gi * kMxfp4GroupBytes + b];
          wrong += got[gi * 32 + 2 * b] != mxfp4_fp8_code(byte & 0xF, t);
          wrong += got[gi * 32 + 2 * b + 1] != mxfp4_fp8_code(byte >> 4, t);
        }
      }
    }
    EXPECT_EQ(wrong, 0) << "stored codes of expert " << e0 << " differ from the CPU conversion";
  }
}

TEST(CudaMoeWsFp8Cache, a_cache_too_small_for_the_experts_is_an_error) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(77);
  const ExpertWeights w = upload_experts(*ctx, encoded_experts(4, 256, 320, DType::f32, rng));
  const Tensor indices = skewed_indices(400, 4, 2, rng);
  const Groups g = group(*ctx, indices, 4);
  Tensor x8, sx;
  random_inputs(*ctx, 800, 320, rng, x8, sx);
  Cache cache(*ctx, 2, 128, 320);  // room for 128 x 320 matrices, the experts are 256 x 320
  Tensor y = poisoned(*ctx, {800, 256}, DType::f32);
  const Status st = mxfp4_grouped_gemm_wgmma_fp8_cuda(x8, sx, false, w, g.view(), 192,
                                                      mxfp4_wgmma_launch_slots(4, 800, 192), nullptr, y,
                                                      ctx->stream(), &cache.c);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("weight cache"), std::string::npos) << st.error().message;
}

}  // namespace
}  // namespace day0
