// The one-token MXFP4 expert kernels (mxfp4_token_matmul_cuda: decode at batch 1, no grouping) against the CPU's
// expert matmul: plain, with SwiGLU, with a row per slot, with rows outside f16's range, and with a bad expert id. The whole MoE at one token runs them and is compared with CpuOps::moe_experts in
// cuda_moe_test.cpp. Skipped visibly without a GPU.
#include <gtest/gtest.h>

#include <cmath>
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

// 96 / 160 inputs end in a part-filled tile; 2,880 is gpt-oss (23 tiles in 3 copy stages, the last part-filled);
// 4,096 is the widest input the kernel takes (4 stages).
constexpr Shape4 kShapes[] = {{4, 4, 64, 96, DType::f32},
                              {32, 4, 48, 160, DType::bf16},
                              {32, 4, 2880, 2880, DType::bf16},
                              {8, 2, 32, 4096, DType::f32}};

// The kernel stages the token in f16 after a power-of-two shift that puts its largest magnitude in [2^14, 2^15):
// 2^-12 relative error per value at most, so 5e-4 on the outputs (the weights are exact; f32 sums). Inputs that
// are bf16-exact stay exact in f16 within 2^29 of the row's largest, so there only the summation order differs: 1e-5.
constexpr double kF16TokenTolerance = 5e-4, kExactTokenTolerance = 1e-5;

TEST(CudaMoeToken, plain_form_matches_the_cpu_with_the_token_in_f16) {
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
    const Tensor x = spread_inputs(1, s.in, rng);  // over 2^-12..2^12, not bf16- or f16-exact
    Tensor y = poisoned(*ctx, {s.k, s.out}, DType::f32), f = flag;
    D0_ASSERT_OK(mxfp4_token_matmul_cuda(upload(*ctx, x), upload(*ctx, slots), d, nullptr, y, f, ctx->stream()));
    const Tensor got = download(*ctx, y);
    EXPECT_EQ(cudatest::download_flag(*ctx, flag), 0);
    // Settled ids (read, and the weights fetched, before the dependent-launch wait): the same sums.
    Tensor y_settled = poisoned(*ctx, {s.k, s.out}, DType::f32);
    D0_ASSERT_OK(mxfp4_token_matmul_cuda(upload(*ctx, x), upload(*ctx, slots), d, nullptr, y_settled, f,
                                         ctx->stream(), true));
    EXPECT_TRUE(same_bits(got, download(*ctx, y_settled)));

    const Tensor want = cpu_per_assignment(x, slots, w);
    const double err = relative_norm_error(got, want);
    EXPECT_LT(err, kF16TokenTolerance);
    // The grouped kernel rounds the token to bf16 (8 significant bits against f16's 11): further from the f32 CPU.
    const Groups g = group(*ctx, slots, s.E);
    Tensor yg = poisoned(*ctx, {s.k, s.out}, DType::f32);
    D0_ASSERT_OK(mxfp4_grouped_matmul_cuda(upload(*ctx, optest::to_bf16(x)), true, d, g.view(), true,
                                           std::min(s.E, s.k), nullptr, yg, ctx->stream()));
    EXPECT_LT(err, relative_norm_error(download(*ctx, yg), want));

    // A bf16-exact token: exact in f16 too, so only the summation order differs from the CPU.
    const Tensor xb = optest::to_bf16(x).to_f32();
    Tensor yb = poisoned(*ctx, {s.k, s.out}, DType::f32);
    D0_ASSERT_OK(mxfp4_token_matmul_cuda(upload(*ctx, xb), upload(*ctx, slots), d, nullptr, yb, f, ctx->stream()));
    EXPECT_LT(relative_norm_error(download(*ctx, yb), cpu_per_assignment(xb, slots, w)), kExactTokenTolerance);

    // A row per slot (bf16, as the gate_up output reaches the down projection): row j is W_{e_j} . x_j.
    const Tensor xs = optest::to_bf16(spread_inputs(s.k, s.in, rng));
    Tensor ys = poisoned(*ctx, {s.k, s.out}, DType::f32);
    D0_ASSERT_OK(mxfp4_token_matmul_cuda(upload(*ctx, xs), upload(*ctx, slots), d, nullptr, ys, f, ctx->stream()));
    const Tensor per_slot = slots.view({s.k, 1}).clone();
    EXPECT_LT(relative_norm_error(download(*ctx, ys), cpu_per_assignment(xs.to_f32(), per_slot, w)),
              kExactTokenTolerance);
  }
}

// Rows whose values f16 cannot hold as they are (2^20 overflows it, 2^-30 is below its smallest subnormal) and a
// zero row: the staging shift keeps each one's 11 bits, and a zero row gives the bias exactly.
TEST(CudaMoeToken, rows_outside_the_f16_range_are_staged_without_loss) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(4205);
  const int E = 8, k = 2, out = 32, in = 256;
  const ExpertWeights w = encoded_experts(E, out, in, DType::f32, rng);
  const ExpertWeights d = upload_experts(*ctx, w);
  const Tensor slots = token_slots(E, k, rng);
  Tensor flag = cudatest::zeroed(*ctx, {1}, DType::i32);
  for (int binade : {40, 20, -30, -100}) {
    SCOPED_TRACE(::testing::Message() << "values near 2^" << binade);
    Tensor x = optest::random_f32({1, in}, rng);
    for (std::int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = std::ldexp(x.data<float>()[i], binade);
    Tensor y = poisoned(*ctx, {k, out}, DType::f32);
    D0_ASSERT_OK(mxfp4_token_matmul_cuda(upload(*ctx, x), upload(*ctx, slots), d, nullptr, y, flag, ctx->stream()));
    const Tensor got = download(*ctx, y);
    EXPECT_EQ(cudatest::count_nan(got), 0);
    // The products alone: the bias would hide those of the tiny rows.
    Tensor want = cpu_per_assignment(x, slots, w);
    const Tensor bias_only = cpu_per_assignment(Tensor::zeros({1, in}, DType::f32), slots, w);
    Tensor got_products = got.clone();
    for (std::int64_t i = 0; i < want.numel(); ++i) {
      want.data<float>()[i] -= bias_only.data<float>()[i];
      got_products.data<float>()[i] -= bias_only.data<float>()[i];
    }
    EXPECT_LT(relative_norm_error(got_products, want), kF16TokenTolerance);
  }
  Tensor y = poisoned(*ctx, {k, out}, DType::f32);
  const Tensor zero = Tensor::zeros({1, in}, DType::f32);
  D0_ASSERT_OK(mxfp4_token_matmul_cuda(upload(*ctx, zero), upload(*ctx, slots), d, nullptr, y, flag, ctx->stream()));
  EXPECT_TRUE(same_bits(download(*ctx, y), cpu_per_assignment(zero, slots, w)));
  EXPECT_EQ(cudatest::download_flag(*ctx, flag), 0);
}

TEST(CudaMoeToken, swiglu_form_matches_the_cpu) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(4202);
  const int E = 8, k = 4, I = 64, H = 160;
  const ExpertWeights w = encoded_experts(E, 2 * I, H, DType::bf16, rng);
  const ExpertWeights d = upload_experts(*ctx, w);
  Tensor x = optest::random_f32({1, H}, rng, -3.f, 3.f);  // reaches the clamp
  const Tensor slots = token_slots(E, k, rng);
  SwigluParams p;
  p.interleaved = true;
  Tensor h = poisoned(*ctx, {k, I}, DType::bf16), flag = cudatest::zeroed(*ctx, {1}, DType::i32);
  D0_ASSERT_OK(mxfp4_token_matmul_cuda(upload(*ctx, x), upload(*ctx, slots), d, &p, h, flag, ctx->stream()));
  const Tensor got = download(*ctx, h).to_f32();
  EXPECT_EQ(cudatest::count_nan(got), 0);
  CpuOps cpu;
  Tensor want = Tensor::zeros({k, I}, DType::f32);
  D0_ASSERT_OK(cpu.swiglu_clamped(cpu_per_assignment(x, slots, w), p, want));
  // 4e-3: h is bf16 (2^-9 relative), the token f16 (2^-12).
  EXPECT_LT(relative_norm_error(got, want), 4e-3);
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
