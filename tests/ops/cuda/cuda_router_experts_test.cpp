// CUDA MoE-side kernels against the CPU reference: router top-k + softmax (ties included) and the online
// MXFP4 -> BF16 conversion of selected experts (bit-exact against mxfp4_decode_row_bf16). Skipped without a GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/op_test_util.h"
#include "quant/mxfp4.h"

namespace day0 {
namespace {

using cudatest::download;
using cudatest::download_flag;
using cudatest::make_context;
using cudatest::poisoned;
using cudatest::upload;
using cudatest::zeroed;
using optest::all_close;
using optest::random_f32;
using optest::to_double;

TEST(CudaRouter, topk_softmax_matches_the_cpu_reference_including_lowest_index_first_on_ties) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(2001);
  CpuOps cpu;
  // gpt-oss-20b: E = 32, k = 4; 120b: E = 128, k = 4; E = 7 is odd, 256 the kernel's limit.
  for (std::int64_t E : {7, 32, 128, 256})
    for (int k : {1, 4, 8})
      for (std::int64_t S : {1, 3, 64, 257})
        for (bool ties : {false, true}) {
          if (k > E) continue;
          Tensor logits = random_f32({S, E}, rng, -4.f, 4.f);
          // Few distinct values force ties, which must resolve to the lower expert index.
          if (ties)
            for (std::int64_t i = 0; i < logits.numel(); ++i)
              logits.data<float>()[i] = static_cast<float>(static_cast<int>(rng() % 4)) * 0.5f;
          Tensor want_i = Tensor::zeros({S, k}, DType::i32), want_w = Tensor::zeros({S, k}, DType::f32);
          D0_ASSERT_OK(cpu.router_topk_softmax(logits, k, want_i, want_w));
          Tensor d_i = poisoned(*ctx, {S, k}, DType::i32), d_w = poisoned(*ctx, {S, k}, DType::f32);
          D0_ASSERT_OK(router_topk_softmax_cuda(upload(*ctx, logits), k, d_i, d_w, ctx->stream()));
          const Tensor got_i = download(*ctx, d_i);
          for (std::int64_t i = 0; i < S * k; ++i)
            ASSERT_EQ(got_i.data<std::int32_t>()[i], want_i.data<std::int32_t>()[i])
                << "E " << E << " k " << k << " S " << S << " ties " << ties << " at " << i;
          // Same picks, same summation order; only expf's last ulps differ (CUDA 2 ulp, glibc 1).
          EXPECT_TRUE(all_close(download(*ctx, d_w), to_double(want_w), 1e-6, 1e-7))
              << "E " << E << " k " << k << " S " << S;
        }
}

// The fused router (linear + top-k in one launch) against CpuOps::linear for the logits (f32 sums of the same
// operands in another order), and the top-k of its own logits against CpuOps::router_topk_softmax exactly; a
// token's row is the same to the bit whatever the other tokens of the call.
TEST(CudaRouter, fused_router_matches_the_cpu_linear_then_top_k_and_ignores_the_other_tokens) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(2002);
  CpuOps cpu;
  enum class Bias { none, f32, bf16 };
  for (std::int64_t K : {64, 2880})
    for (std::int64_t E : {7, 32})
      for (int k : {1, 4})
        for (Bias b : {Bias::none, Bias::f32, Bias::bf16}) {
          const std::int64_t S = 5;
          SCOPED_TRACE(::testing::Message() << "K " << K << " E " << E << " k " << k << " bias " << int(b));
          const Tensor x = random_f32({S, K}, rng, -1.f, 1.f);
          const Tensor w = optest::to_bf16(random_f32({E, K}, rng, -1.f, 1.f));
          Tensor bias;
          if (b != Bias::none) bias = random_f32({E}, rng, -2.f, 2.f);
          if (b == Bias::bf16) bias = optest::to_bf16(bias);
          Tensor want = Tensor::zeros({S, E}, DType::f32);
          D0_ASSERT_OK(cpu.linear(x, w, bias, want));
          const Tensor d_x = upload(*ctx, x), d_w = upload(*ctx, w);
          const Tensor d_bias = bias.defined() ? upload(*ctx, bias) : Tensor();
          ASSERT_TRUE(router_fused_fits(d_x, d_w, S));
          Tensor d_logits = poisoned(*ctx, {S, E}, DType::f32);
          Tensor d_i = poisoned(*ctx, {S, k}, DType::i32), d_wt = poisoned(*ctx, {S, k}, DType::f32);
          D0_ASSERT_OK(router_fused_cuda(d_x, d_w, d_bias, k, d_logits, d_i, d_wt, ctx->stream()));
          const Tensor logits = download(*ctx, d_logits), got_i = download(*ctx, d_i), got_w = download(*ctx, d_wt);
          // |logit| up to ~50 from 2,880 products: f32 sums in two orders differ by a few ulps of the partial sums.
          EXPECT_TRUE(all_close(logits, to_double(want), 1e-5, 1e-4));
          Tensor want_i = Tensor::zeros({S, k}, DType::i32), want_w = Tensor::zeros({S, k}, DType::f32);
          D0_ASSERT_OK(cpu.router_topk_softmax(logits, k, want_i, want_w));
          for (std::int64_t i = 0; i < S * k; ++i)
            ASSERT_EQ(got_i.data<std::int32_t>()[i], want_i.data<std::int32_t>()[i]) << i;
          // As the top-k test above: expf's last ulps.
          EXPECT_TRUE(all_close(got_w, to_double(want_w), 1e-6, 1e-7));
          // Token 2 alone: the same bits as among five.
          Tensor one_x = Tensor::zeros({1, K}, DType::f32);
          for (std::int64_t i = 0; i < K; ++i) one_x.data<float>()[i] = x.data<float>()[2 * K + i];
          Tensor d_l1 = poisoned(*ctx, {1, E}, DType::f32);
          Tensor d_i1 = poisoned(*ctx, {1, k}, DType::i32), d_w1 = poisoned(*ctx, {1, k}, DType::f32);
          D0_ASSERT_OK(router_fused_cuda(upload(*ctx, one_x), d_w, d_bias, k, d_l1, d_i1, d_w1, ctx->stream()));
          const Tensor l1 = download(*ctx, d_l1), w1 = download(*ctx, d_w1);
          EXPECT_EQ(std::memcmp(l1.raw(), logits.data<float>() + 2 * E, E * sizeof(float)), 0);
          EXPECT_EQ(std::memcmp(w1.raw(), got_w.data<float>() + 2 * k, k * sizeof(float)), 0);
        }
}

TEST(CudaRouter, the_fused_router_takes_up_to_32_experts_and_rows_of_a_multiple_of_8) {
  // Validation only: no device needed, nothing is launched.
  static float buffer[64 * 40];
  auto fake = [](const Shape& shape, DType dtype) {
    return Tensor::borrow(buffer, shape, dtype, nullptr, Device::cuda);
  };
  Tensor idx = fake({1, 4}, DType::i32), wt = fake({1, 4}, DType::f32);
  Tensor logits33 = fake({1, 33}, DType::f32);
  const Status many = router_fused_cuda(fake({1, 64}, DType::f32), fake({33, 64}, DType::bf16), Tensor(), 4, logits33,
                                        idx, wt, nullptr);
  ASSERT_FALSE(many.ok());
  EXPECT_TRUE(optest::contains(many.error().message, "33 experts")) << many.error().message;
  Tensor logits = fake({1, 32}, DType::f32);
  const Status odd =
      router_fused_cuda(fake({1, 60}, DType::f32), fake({32, 60}, DType::bf16), Tensor(), 4, logits, idx, wt, nullptr);
  ASSERT_FALSE(odd.ok());
  EXPECT_TRUE(optest::contains(odd.error().message, "K % 8")) << odd.error().message;
  EXPECT_FALSE(router_fused_fits(fake({1, 64}, DType::f32), fake({33, 64}, DType::bf16), 64));
  EXPECT_FALSE(router_fused_fits(fake({65, 64}, DType::f32), fake({32, 64}, DType::bf16), 64));  // too many tokens
  EXPECT_TRUE(router_fused_fits(fake({64, 64}, DType::f32), fake({32, 64}, DType::bf16), 64));
}

// A device-tagged tensor over a host buffer: validation reads only shape, dtype, device and non-null-ness.
Tensor fake_cuda(const Shape& shape, DType dtype) {
  static float buffer[1024];
  return Tensor::borrow(buffer, shape, dtype, nullptr, Device::cuda);
}

TEST(CudaRouter, rejects_k_above_eight_and_more_than_256_experts) {
  // Validation only: no device needed, nothing is launched.
  Tensor idx = fake_cuda({1, 4}, DType::i32), w = fake_cuda({1, 4}, DType::f32);
  const Status too_many = router_topk_softmax_cuda(fake_cuda({1, 300}, DType::f32), 4, idx, w, nullptr);
  ASSERT_FALSE(too_many.ok());
  EXPECT_TRUE(optest::contains(too_many.error().message, "300 experts")) << too_many.error().message;
  Tensor idx9 = fake_cuda({1, 9}, DType::i32), w9 = fake_cuda({1, 9}, DType::f32);
  const Status st = router_topk_softmax_cuda(fake_cuda({1, 32}, DType::f32), 9, idx9, w9, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(optest::contains(st.error().message, "k = 9")) << st.error().message;
}

// Random MXFP4 experts on the host: random nibbles, scales around 2^0 with a few extremes.
ExpertWeights random_experts(int E, int out, int in, std::mt19937& rng) {
  ExpertWeights w;
  w.n_experts = E, w.out = out, w.in = in;
  const std::int64_t groups = in / kMxfp4GroupSize;
  w.blocks = Tensor::zeros({E, out, groups, kMxfp4GroupBytes}, DType::u8);
  w.scales = Tensor::zeros({E, out, groups}, DType::u8);
  for (std::int64_t i = 0; i < w.blocks.numel(); ++i) w.blocks.data<std::uint8_t>()[i] = static_cast<std::uint8_t>(rng());
  for (std::int64_t i = 0; i < w.scales.numel(); ++i)
    w.scales.data<std::uint8_t>()[i] = static_cast<std::uint8_t>(rng() % 16 == 0 ? rng() % 255 : 117 + rng() % 20);
  return w;
}

ExpertWeights upload_experts(CudaContext& ctx, const ExpertWeights& host) {
  ExpertWeights d = host;
  d.blocks = upload(ctx, host.blocks);
  d.scales = upload(ctx, host.scales);
  return d;
}

TEST(CudaMxfp4Experts, converts_only_the_selected_experts_bit_exactly_in_selection_order) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(2002);
  struct Case { int E, out, in; std::vector<std::int32_t> ids; };
  // gpt-oss's gate_up is [2*2880, 2880] and down [2880, 2880]: a 2880 x 2880 slice keeps the test quick.
  // Ids repeat and come out of order: the workspace follows the list, not the expert numbering.
  for (const Case& c : {Case{4, 1, 32, {2}}, Case{8, 33, 96, {7, 0, 3}}, Case{4, 2880, 2880, {3, 0, 3, 1}}}) {
    const ExpertWeights host = random_experts(c.E, c.out, c.in, rng);
    const std::int64_t n = static_cast<std::int64_t>(c.ids.size());
    const std::int64_t groups = c.in / kMxfp4GroupSize;
    Tensor d_ws = poisoned(*ctx, {n, c.out, c.in}, DType::bf16), flag = zeroed(*ctx, {1}, DType::i32);
    D0_ASSERT_OK(mxfp4_experts_to_bf16_cuda(upload_experts(*ctx, host), upload(*ctx, optest::i32_tensor(c.ids)),
                                            d_ws, flag, ctx->stream()));
    const Tensor got = download(*ctx, d_ws);
    EXPECT_EQ(download_flag(*ctx, flag), 0);
    std::vector<std::uint16_t> want(c.in);
    for (std::int64_t j = 0; j < n; ++j)
      for (std::int64_t r = 0; r < c.out; ++r) {
        const std::int64_t row = std::int64_t(c.ids[j]) * c.out + r;
        mxfp4_decode_row_bf16(host.blocks.data<std::uint8_t>() + row * groups * kMxfp4GroupBytes,
                              host.scales.data<std::uint8_t>() + row * groups, c.in, want.data());
        // Every MXFP4 value is exact in bf16, and both sides decode the same way: bit-exact.
        const std::uint16_t* g = got.data<std::uint16_t>() + (j * c.out + r) * c.in;
        for (int i = 0; i < c.in; ++i)
          ASSERT_EQ(g[i], want[i]) << "slot " << j << " expert " << c.ids[j] << " row " << r << " col " << i;
      }
  }
}

TEST(CudaMxfp4Experts, an_out_of_range_expert_id_is_clamped_and_raises_the_error_flag) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(2003);
  const ExpertWeights host = random_experts(4, 8, 64, rng);
  Tensor d_ws = poisoned(*ctx, {2, 8, 64}, DType::bf16), flag = zeroed(*ctx, {1}, DType::i32);
  D0_ASSERT_OK(mxfp4_experts_to_bf16_cuda(upload_experts(*ctx, host), upload(*ctx, optest::i32_tensor({1, 9})), d_ws,
                                          flag, ctx->stream()));
  EXPECT_EQ(download_flag(*ctx, flag), 1);
  EXPECT_EQ(cudatest::count_nan(download(*ctx, d_ws)), 0);  // still written (from the clamped expert 3)
}

}  // namespace
}  // namespace day0
