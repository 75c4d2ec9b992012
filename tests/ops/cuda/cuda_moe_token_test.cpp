// The one-token MXFP4 expert kernels (mxfp4_token_matmul_cuda: decode at batch 1, no grouping) against the grouped
// fused kernel's wide split bit for bit and against the CPU's expert matmul, with SwiGLU, with a row per slot, and
// with a bad expert id; the f16-groups form (TokenForm::f16_groups: the same products in another order) against the
// CPU and the bf16 form; the tiled block order against the row-major one. The whole MoE at one token runs them and
// is compared with CpuOps::moe_experts in cuda_moe_test.cpp. Skipped visibly without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

#include "cuda_test_util.h"
#include "moe_test_util.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cuda/moe_mxfp4_fused_cuda.h"
#include "ops/op_test_util.h"

namespace day0 {
namespace {

using cudatest::download;
using cudatest::make_context;
using cudatest::poisoned;
using cudatest::relative_norm_error;
using cudatest::same_bits;
using cudatest::upload;
using moetest::cpu_per_assignment;
using moetest::encoded_experts;
using moetest::group;
using moetest::Groups;
using moetest::spread_inputs;
using moetest::upload_experts;

// k distinct experts for the one token, as the router gives them (pick order, not ascending).
Tensor token_slots(int E, int k, std::mt19937& rng) {
  Tensor indices, weights;
  moetest::random_routing(1, E, k, rng, indices, weights);
  return indices;
}

struct Shape4 {
  int E, k, out, in;
  DType bias;
};

// 96 / 160 inputs end in a part-filled tile; 2,880 is gpt-oss (23 tiles in 3 copy stages, the last part-filled),
// also with 1,040 rows (65 row tiles, an odd count) and 3 slots; 4,096 is the widest input the kernel takes (4 stages).
constexpr Shape4 kShapes[] = {{4, 4, 64, 96, DType::f32},
                              {32, 4, 48, 160, DType::bf16},
                              {32, 4, 2880, 2880, DType::bf16},
                              {8, 3, 1040, 2880, DType::f32},
                              {8, 2, 32, 4096, DType::f32}};

TEST(CudaMoeToken, plain_form_gives_the_grouped_wide_split_bits_and_matches_the_cpu) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context(std::size_t(2) << 30);
  ASSERT_TRUE(ctx);
  std::mt19937 rng(4201);
  for (const Shape4& s : kShapes) {
    SCOPED_TRACE(::testing::Message() << "E " << s.E << " k " << s.k << " out " << s.out << " in " << s.in);
    const ExpertWeights w = encoded_experts(s.E, s.out, s.in, s.bias, rng);
    const ExpertWeights d = upload_experts(*ctx, w);
    const Tensor slots = token_slots(s.E, s.k, rng);
    const Tensor flag = cudatest::zeroed(*ctx, {1}, DType::i32);
    // The token as f32 (not bf16-exact: the kernel rounds it on the way in, as the grouped path's conversion).
    const Tensor x = spread_inputs(1, s.in, rng);
    Tensor y = poisoned(*ctx, {s.k, s.out}, DType::f32), f = flag;
    D0_ASSERT_OK(mxfp4_token_matmul_cuda(upload(*ctx, x), upload(*ctx, slots), d, nullptr, y, f, ctx->stream()));
    const Tensor got = download(*ctx, y);
    EXPECT_EQ(cudatest::download_flag(*ctx, flag), 0);
    // Settled ids (read, and the weights fetched, before the dependent-launch wait): the same sums.
    Tensor y_settled = poisoned(*ctx, {s.k, s.out}, DType::f32);
    D0_ASSERT_OK(mxfp4_token_matmul_cuda(upload(*ctx, x), upload(*ctx, slots), d, nullptr, y_settled, f, ctx->stream(),
                                         {.slots = true}));
    EXPECT_TRUE(same_bits(got, download(*ctx, y_settled)));

    const Groups g = group(*ctx, slots, s.E);
    Tensor yg = poisoned(*ctx, {s.k, s.out}, DType::f32);
    D0_ASSERT_OK(mxfp4_grouped_matmul_cuda(upload(*ctx, optest::to_bf16(x)), true, d, g.view(), true,
                                           std::min(s.E, s.k), nullptr, yg, ctx->stream()));
    EXPECT_TRUE(same_bits(got, download(*ctx, yg)));
    // 1e-5: the weights and the bf16 token are exact on both sides; only the summation order differs.
    EXPECT_LT(relative_norm_error(got, cpu_per_assignment(optest::to_bf16(x).to_f32(), slots, w)), 1e-5);

    // A row per slot (bf16, as the gate_up output reaches the down projection): token j of a grouped call whose
    // token j has the single expert e_j gives the same sum.
    const Tensor xs = optest::to_bf16(spread_inputs(s.k, s.in, rng));
    Tensor ys = poisoned(*ctx, {s.k, s.out}, DType::f32);
    D0_ASSERT_OK(mxfp4_token_matmul_cuda(upload(*ctx, xs), upload(*ctx, slots), d, nullptr, ys, f, ctx->stream()));
    const Tensor per_token = slots.view({s.k, 1}).clone();
    const Groups gt = group(*ctx, per_token, s.E);
    Tensor yt = poisoned(*ctx, {s.k, s.out}, DType::f32);
    D0_ASSERT_OK(mxfp4_grouped_matmul_cuda(upload(*ctx, xs), true, d, gt.view(), true, std::min(s.E, s.k), nullptr, yt,
                                           ctx->stream()));
    EXPECT_TRUE(same_bits(download(*ctx, ys), download(*ctx, yt)));
  }
}

TEST(CudaMoeToken, swiglu_form_gives_the_grouped_wide_split_bits) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(4202);
  const int E = 8, k = 4, I = 64, H = 160;
  const ExpertWeights d = upload_experts(*ctx, encoded_experts(E, 2 * I, H, DType::bf16, rng));
  Tensor x = optest::random_f32({1, H}, rng, -3.f, 3.f);  // reaches the clamp
  const Tensor slots = token_slots(E, k, rng);
  SwigluParams p;
  p.interleaved = true;
  Tensor h = poisoned(*ctx, {k, I}, DType::bf16), flag = cudatest::zeroed(*ctx, {1}, DType::i32);
  D0_ASSERT_OK(mxfp4_token_matmul_cuda(upload(*ctx, x), upload(*ctx, slots), d, &p, h, flag, ctx->stream()));
  const Tensor got = download(*ctx, h);
  // The grouped kernel writes h by grouped entry (ascending expert): put slot j's row where it is.
  const Groups g = group(*ctx, slots, E);
  Tensor hg = poisoned(*ctx, {k, I}, DType::bf16);
  D0_ASSERT_OK(mxfp4_grouped_matmul_cuda(upload(*ctx, optest::to_bf16(x)), true, d, g.view(), true, k, &p, hg,
                                         ctx->stream()));
  const Tensor grouped = download(*ctx, hg), assignments = download(*ctx, g.assignments);
  for (int q = 0; q < k; ++q) {
    const int j = assignments.data<std::int32_t>()[q];
    EXPECT_EQ(std::memcmp(got.data<std::uint16_t>() + j * I, grouped.data<std::uint16_t>() + q * I, I * 2), 0)
        << "slot " << j;
  }
  EXPECT_EQ(cudatest::count_nan(got.to_f32()), 0);
}

// TokenForm::f16_groups multiplies the same values (weights exact, the token's bf16 values, exact in f16 under each
// group's power of two) and sums them in another order: 1e-5 against the CPU as the bf16 form, not its bits. The
// spread inputs (2^-12..2^12) put a group's values up to 2^24 apart, and the token is also run scaled by 1e30 and
// 1e-30, which the group scaling must carry without overflowing f16 or flushing to zero.
TEST(CudaMoeToken, f16_groups_form_matches_the_cpu_on_the_bf16_token_for_every_shape) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context(std::size_t(2) << 30);
  ASSERT_TRUE(ctx);
  std::mt19937 rng(4207);
  for (const Shape4& s : kShapes) {
    SCOPED_TRACE(::testing::Message() << "E " << s.E << " k " << s.k << " out " << s.out << " in " << s.in);
    ExpertWeights w = encoded_experts(s.E, s.out, s.in, s.bias, rng);
    w.bias = Tensor();  // a bias of 0.1 would hide a 1e-30 token's sums (the bias path is the bf16 form's)
    const ExpertWeights d = upload_experts(*ctx, w);
    const Tensor slots = token_slots(s.E, s.k, rng), d_slots = upload(*ctx, slots);
    Tensor flag = cudatest::zeroed(*ctx, {1}, DType::i32);
    const Tensor spread = spread_inputs(1, s.in, rng);
    for (const float scale : {1.f, 1e30f, 1e-30f}) {
      SCOPED_TRACE(::testing::Message() << "token scaled by " << scale);
      Tensor x = spread.clone();
      for (std::int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] *= scale;
      Tensor y = poisoned(*ctx, {s.k, s.out}, DType::f32), y_bf16 = poisoned(*ctx, {s.k, s.out}, DType::f32);
      D0_ASSERT_OK(mxfp4_token_matmul_cuda(upload(*ctx, x), d_slots, d, nullptr, y, flag, ctx->stream(), {},
                                           TokenForm::f16_groups));
      D0_ASSERT_OK(mxfp4_token_matmul_cuda(upload(*ctx, x), d_slots, d, nullptr, y_bf16, flag, ctx->stream()));
      const Tensor got = download(*ctx, y);
      EXPECT_EQ(cudatest::download_flag(*ctx, flag), 0);
      EXPECT_EQ(cudatest::count_nan(got), 0);
      const double err = relative_norm_error(got, cpu_per_assignment(optest::to_bf16(x).to_f32(), slots, w));
      std::printf("[ token f16 groups ] E %d k %d out %d in %d x %g: rel. error %.3g vs the CPU, %.3g vs bf16 form\n",
                  s.E, s.k, s.out, s.in, double(scale), err, relative_norm_error(got, download(*ctx, y_bf16)));
      EXPECT_LT(err, 1e-5);
      Tensor y_settled = poisoned(*ctx, {s.k, s.out}, DType::f32);
      D0_ASSERT_OK(mxfp4_token_matmul_cuda(upload(*ctx, x), d_slots, d, nullptr, y_settled, flag, ctx->stream(),
                                           {.slots = true}, TokenForm::f16_groups));
      EXPECT_TRUE(same_bits(got, download(*ctx, y_settled)));
    }

    // A row per slot (bf16, as h reaches the down projection).
    const Tensor xs = optest::to_bf16(spread_inputs(s.k, s.in, rng));
    Tensor ys = poisoned(*ctx, {s.k, s.out}, DType::f32);
    D0_ASSERT_OK(mxfp4_token_matmul_cuda(upload(*ctx, xs), d_slots, d, nullptr, ys, flag, ctx->stream(), {},
                                         TokenForm::f16_groups));
    const Tensor per_token = slots.view({s.k, 1}).clone();
    EXPECT_LT(relative_norm_error(download(*ctx, ys), cpu_per_assignment(xs.to_f32(), per_token, w)), 1e-5);
  }
}

TEST(CudaMoeToken, f16_groups_swiglu_form_matches_the_bf16_form) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(4208);
  const int E = 8, k = 4, I = 64, H = 160;
  const ExpertWeights d = upload_experts(*ctx, encoded_experts(E, 2 * I, H, DType::bf16, rng));
  const Tensor x = upload(*ctx, optest::random_f32({1, H}, rng, -3.f, 3.f));
  const Tensor slots = upload(*ctx, token_slots(E, k, rng));
  SwigluParams p;
  p.interleaved = true;
  Tensor h = poisoned(*ctx, {k, I}, DType::bf16), hb = poisoned(*ctx, {k, I}, DType::bf16);
  Tensor flag = cudatest::zeroed(*ctx, {1}, DType::i32);
  D0_ASSERT_OK(mxfp4_token_matmul_cuda(x, slots, d, &p, h, flag, ctx->stream(), {}, TokenForm::f16_groups));
  D0_ASSERT_OK(mxfp4_token_matmul_cuda(x, slots, d, &p, hb, flag, ctx->stream()));
  // 1e-2: the same SwiGLU of sums ~1e-7 apart, rounded to bf16 (2^-9), where a sum near a rounding edge may land
  // one bf16 step away.
  EXPECT_LT(relative_norm_error(download(*ctx, h).to_f32(), download(*ctx, hb).to_f32()), 1e-2);
  EXPECT_EQ(cudatest::count_nan(download(*ctx, h).to_f32()), 0);
}

// The tiled block order (ExpertStorage::mxfp4_tiled: a bulk copy a stage instead of swizzled tensor-copy boxes)
// gives the row-major order's bits in both forms, for every shape (part-filled last stages; 4,096: four stages), the
// token and a row per slot, settled ids, and SwiGLU.
TEST(CudaMoeToken, tiled_blocks_give_the_row_major_bits) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context(std::size_t(2) << 30);
  ASSERT_TRUE(ctx);
  std::mt19937 rng(4209);
  for (const Shape4& s : kShapes) {
    const ExpertWeights host = encoded_experts(s.E, s.out, s.in, s.bias, rng);
    auto tiled_host = mxfp4_tiled_experts(host);
    ASSERT_TRUE(tiled_host.ok()) << tiled_host.error().message;
    const ExpertWeights rows = upload_experts(*ctx, host), tiles = upload_experts(*ctx, *tiled_host);
    ASSERT_TRUE(mxfp4_token_matmul_fits(tiles));
    const Tensor slots = upload(*ctx, token_slots(s.E, s.k, rng));
    const Tensor token = upload(*ctx, spread_inputs(1, s.in, rng));
    const Tensor per_slot = upload(*ctx, optest::to_bf16(spread_inputs(s.k, s.in, rng)));
    Tensor flag = cudatest::zeroed(*ctx, {1}, DType::i32);
    SwigluParams p;
    p.interleaved = true;
    const SwigluParams* epilogues[] = {nullptr, &p};
    for (TokenForm form : {TokenForm::bf16_tiles, TokenForm::f16_groups})
      for (const Tensor* x : {&token, &per_slot})
        for (const SwigluParams* swiglu : epilogues)
          for (bool settled : {false, true}) {
            SCOPED_TRACE(::testing::Message()
                         << "E " << s.E << " k " << s.k << " out " << s.out << " in " << s.in << " form "
                         << int(form) << (x == &token ? " token" : " row per slot")
                         << (swiglu ? " swiglu" : " plain") << (settled ? " settled" : ""));
            auto run = [&](const ExpertWeights& w) {
              Tensor y = swiglu ? poisoned(*ctx, {s.k, s.out / 2}, DType::bf16)
                                : poisoned(*ctx, {s.k, s.out}, DType::f32);
              const Status st =
                  mxfp4_token_matmul_cuda(*x, slots, w, swiglu, y, flag, ctx->stream(), {.slots = settled}, form);
              EXPECT_TRUE(st.ok()) << st.error().message;
              return download(*ctx, y);
            };
            const Tensor want = run(rows), got = run(tiles);
            EXPECT_EQ(cudatest::count_nan(want.to_f32()), 0);
            EXPECT_TRUE(same_bits(want, got));
          }
    EXPECT_EQ(cudatest::download_flag(*ctx, flag), 0);
  }
}

TEST(CudaMoeToken, a_bad_expert_id_raises_the_flag_and_leaves_the_other_slots_computed) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(4203);
  const ExpertWeights w = encoded_experts(4, 32, 64, DType::f32, rng);
  Tensor slots = Tensor::zeros({1, 2}, DType::i32);
  slots.data<std::int32_t>()[0] = 2;
  slots.data<std::int32_t>()[1] = 9;  // outside [0, 4)
  const Tensor x = optest::to_bf16(optest::random_f32({1, 64}, rng)).to_f32();
  Tensor y = poisoned(*ctx, {2, 32}, DType::f32), flag = cudatest::zeroed(*ctx, {1}, DType::i32);
  D0_ASSERT_OK(
      mxfp4_token_matmul_cuda(upload(*ctx, x), upload(*ctx, slots), upload_experts(*ctx, w), nullptr, y, flag,
                              ctx->stream()));
  EXPECT_EQ(cudatest::download_flag(*ctx, flag), 1);
  const Tensor got = download(*ctx, y);
  Tensor first = Tensor::zeros({1, 1}, DType::i32);
  first.data<std::int32_t>()[0] = 2;
  EXPECT_LT(relative_norm_error(got.slice_rows(0, 1).clone(), cpu_per_assignment(x, first, w)), 1e-5);
  EXPECT_EQ(cudatest::count_nan(got.slice_rows(1, 2).clone()), 32);  // slot 1 left unwritten (poisoned)
}

TEST(CudaMoeToken, refuses_shapes_and_inputs_it_does_not_take) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(4204);
  const ExpertWeights d = upload_experts(*ctx, encoded_experts(4, 32, 64, DType::f32, rng));
  Tensor slots = upload(*ctx, Tensor::zeros({1, 2}, DType::i32)), flag = cudatest::zeroed(*ctx, {1}, DType::i32);
  Tensor y = poisoned(*ctx, {2, 32}, DType::f32);
  const Tensor three_rows = upload(*ctx, Tensor::zeros({3, 64}, DType::f32));
  const Status rows = mxfp4_token_matmul_cuda(three_rows, slots, d, nullptr, y, flag, ctx->stream());
  ASSERT_FALSE(rows.ok());
  EXPECT_NE(rows.error().message.find("a row per slot"), std::string::npos) << rows.error().message;
  const Tensor two_tokens = upload(*ctx, Tensor::zeros({2, 2}, DType::i32));
  const Status tokens =
      mxfp4_token_matmul_cuda(upload(*ctx, Tensor::zeros({1, 64}, DType::f32)), two_tokens, d, nullptr, y, flag,
                              ctx->stream());
  ASSERT_FALSE(tokens.ok());
  EXPECT_NE(tokens.error().message.find("one token"), std::string::npos) << tokens.error().message;
  ExpertWeights odd = d;
  odd.out = 24;  // not a multiple of 16
  EXPECT_FALSE(mxfp4_token_matmul_fits(odd));
  ExpertWeights wide = d;
  wide.in = 2 * kMxfp4TokenMaxInputBytes;  // a 16-row tile would not fit in shared memory
  EXPECT_FALSE(mxfp4_token_matmul_fits(wide));
}

}  // namespace
}  // namespace day0
