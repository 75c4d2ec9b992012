// CUDA MoE-side kernels against the CPU reference: router top-k + softmax (ties included) and the online
// MXFP4 -> BF16 conversion of selected experts (bit-exact against mxfp4_decode_row_bf16). Skipped without a GPU.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/linear_small_cuda.h"
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

// linear_small_router_cuda (the router linear with its top-k in the same launch) against the two launches it
// replaces, bit for bit: logits, picks and weights. Twice per shape: the slices' counters must be left at zero.
TEST(CudaRouter, the_fused_router_gives_the_bits_of_the_linear_and_the_top_k_kernels) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(2003);
  const std::int64_t K = 2880;
  Tensor counters = zeroed(*ctx, {kLinearSmallRouterSlices}, DType::u32);
  for (std::int64_t E : {32, 128, 256})
    for (std::int64_t M : {1, 3, 16, 17, 64, 128})
      for (const char* bias_kind : {"f32", "bf16", "none"}) {
        SCOPED_TRACE(::testing::Message() << "E " << E << " M " << M << " bias " << bias_kind);
        const int k = E == 256 ? 8 : 4;
        const Tensor x = upload(*ctx, random_f32({M, K}, rng));
        const Tensor w = upload(*ctx, optest::to_bf16(random_f32({E, K}, rng, -0.05f, 0.05f)));
        Tensor bias;
        if (bias_kind[0] == 'f') bias = upload(*ctx, random_f32({E}, rng, -0.5f, 0.5f));
        if (bias_kind[0] == 'b') bias = upload(*ctx, optest::to_bf16(random_f32({E}, rng, -0.5f, 0.5f)));
        Tensor logits = poisoned(*ctx, {M, E}, DType::f32), idx = poisoned(*ctx, {M, k}, DType::i32);
        Tensor wts = poisoned(*ctx, {M, k}, DType::f32);
        D0_ASSERT_OK(linear_small_cuda(x, {{w, bias, logits}}, ctx->sm_count(), ctx->stream()));
        D0_ASSERT_OK(router_topk_softmax_cuda(logits, k, idx, wts, ctx->stream()));
        const Tensor want_l = download(*ctx, logits), want_i = download(*ctx, idx), want_w = download(*ctx, wts);
        for (int call = 0; call < 2; ++call) {
          Tensor f_logits = poisoned(*ctx, {M, E}, DType::f32), f_idx = poisoned(*ctx, {M, k}, DType::i32);
          Tensor f_wts = poisoned(*ctx, {M, k}, DType::f32);
          D0_ASSERT_OK(linear_small_router_cuda(x, {w, bias, f_logits}, k, f_idx, f_wts, counters, ctx->sm_count(),
                                                ctx->stream()));
          EXPECT_TRUE(cudatest::same_bits(download(*ctx, f_logits), want_l)) << "call " << call;
          EXPECT_TRUE(cudatest::same_bits(download(*ctx, f_idx), want_i)) << "call " << call;
          EXPECT_TRUE(cudatest::same_bits(download(*ctx, f_wts), want_w)) << "call " << call;
        }
        const Tensor left = download(*ctx, counters);
        for (std::int64_t i = 0; i < left.numel(); ++i) EXPECT_EQ(left.data<std::uint32_t>()[i], 0u) << "slice " << i;
      }
  // Shapes it does not take, each named.
  const Tensor x = upload(*ctx, random_f32({129, 64}, rng));
  const Tensor w = upload(*ctx, optest::to_bf16(random_f32({32, 64}, rng)));
  Tensor logits = zeroed(*ctx, {129, 32}, DType::f32), idx = zeroed(*ctx, {129, 4}, DType::i32);
  Tensor wts = zeroed(*ctx, {129, 4}, DType::f32);
  const Status rows =
      linear_small_router_cuda(x, {w, Tensor(), logits}, 4, idx, wts, counters, ctx->sm_count(), ctx->stream());
  ASSERT_FALSE(rows.ok());
  EXPECT_TRUE(optest::contains(rows.error().message, "at most 128 rows")) << rows.error().message;
  const Tensor x1 = upload(*ctx, random_f32({1, 64}, rng));
  Tensor l1 = zeroed(*ctx, {1, 32}, DType::f32), i9 = zeroed(*ctx, {1, 9}, DType::i32);
  Tensor w9 = zeroed(*ctx, {1, 9}, DType::f32);
  const Status nine =
      linear_small_router_cuda(x1, {w, Tensor(), l1}, 9, i9, w9, counters, ctx->sm_count(), ctx->stream());
  ASSERT_FALSE(nine.ok());
  EXPECT_TRUE(optest::contains(nine.error().message, "k = 9")) << nine.error().message;
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
  for (std::int64_t i = 0; i < w.blocks.numel(); ++i)
    w.blocks.data<std::uint8_t>()[i] = static_cast<std::uint8_t>(rng());
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
