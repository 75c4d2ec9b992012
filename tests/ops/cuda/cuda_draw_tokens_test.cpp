// draw_tokens_cuda against the host's draw (CpuOps::draw_tokens, token_draw.h): the same token bit for bit for
// every row: random logits at gpt-oss's vocabulary, past the row cache, and at widths that end inside a lane and a
// block, masked vocabularies, a dominant token, heavy ties, signed zeros, temperatures from 0.05 to 5, uniform
// numbers at 0 and just under 1, with and without top-k / top-p / min-p; unusable rows keep greedy_tokens' report;
// the tokens output follows.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/op_test_util.h"

namespace day0 {
namespace {

using cudatest::download;
using cudatest::make_context;
using cudatest::poisoned;
using cudatest::upload;
using optest::random_f32;

TEST(CudaDrawTokens, draws_the_host_samplers_token_for_every_row) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(2027);
  CpuOps cpu;
  // 395,265 ids: past what a cluster holds in shared memory (393,216), so two CTAs read a slot from global memory.
  for (const std::int64_t V : {std::int64_t{201088}, std::int64_t{395265}, std::int64_t{2049}, std::int64_t{2048},
                               std::int64_t{77}, std::int64_t{1}}) {
    SCOPED_TRACE(::testing::Message() << "V " << V);
    constexpr std::int64_t R = 80;  // more than one launch's 64 draws
    Tensor x = random_f32({R, V}, rng, -8.f, 8.f);
    std::uniform_int_distribution<std::int64_t> id(0, V - 1);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    std::vector<TokenDraw> draws;
    int filtered = 0;
    for (std::int64_t r = 0; r < R; ++r) {
      float* row = x.data<float>() + r * V;
      switch (r % 8) {
        case 1:  // most of the vocabulary masked
          for (std::int64_t i = 0; i < V; ++i)
            if (i % 7 != 3) row[i] = -INFINITY;
          row[id(rng)] = 1.f;
          break;
        case 2:  // one dominant token
          row[id(rng)] = 60.f;
          break;
        case 3:  // a wide range: weights that underflow to zero
          for (std::int64_t i = 0; i < V; ++i) row[i] *= 40.f;
          break;
        case 4:  // unusable: greedy_tokens' report stands
          row[id(rng)] = NAN;
          break;
        case 5:  // few distinct logits: a cutoff falls among ties, decided in id order
          for (std::int64_t i = 0; i < V; ++i) row[i] = std::round(row[i] / 4.f);
          break;
        case 6:  // signed zeros (different keys) around a few positive logits
          for (std::int64_t i = 0; i < V; ++i) row[i] = i % 3 == 0 ? 0.f : i % 3 == 1 ? -0.f : row[i] * 0.01f;
          break;
        default:
          break;
      }
      if (r % 5 == 4) continue;  // rows taken as argmax
      const double u = r % 11 == 0 ? 0.0 : r % 11 == 1 ? std::nextafter(1.0, 0.0) : unit(rng);
      const float temperature = std::vector<float>{0.05f, 0.7f, 1.f, 1.3f, 5.f}[r % 5];
      TokenDraw d{static_cast<std::int32_t>(r), 1.f / temperature, u};
      switch (r % 7) {  // the sampler's filters (token_cutoff.h), alone and together
        case 1:
          d.top_k = static_cast<std::int32_t>(1 + r % 50);
          break;
        case 2:
          d.top_p = 0.9;
          break;
        case 3:
          d.top_k = 200;
          d.top_p = 0.3;
          break;
        case 4:
          d.min_p = 0.1;
          break;
        case 5:
          d.top_k = static_cast<std::int32_t>(V - 1);
          d.top_p = 0.999;
          d.min_p = 0.01;
          break;
        case 6:
          d.top_p = 1e-15;  // a zero target: the first id in rank order
          break;
        default:
          break;
      }
      filtered += d.top_k != 0 || d.top_p < 1.0 || d.min_p > 0.0;
      draws.push_back(d);
    }
    Tensor want = Tensor::zeros({R, 2}, DType::i32), want_tokens = Tensor::zeros({R}, DType::i32);
    D0_ASSERT_OK(cpu.greedy_tokens(x, want, &want_tokens));
    D0_ASSERT_OK(cpu.draw_tokens(x, draws, want, &want_tokens));
    Tensor d_out = poisoned(*ctx, {R, 2}, DType::i32), d_tokens = poisoned(*ctx, {R}, DType::i32);
    const Tensor d_x = upload(*ctx, x);
    D0_ASSERT_OK(greedy_tokens_cuda(d_x, d_out, &d_tokens, ctx->stream()));
    D0_ASSERT_OK(draw_tokens_cuda(d_x, draws, d_out, &d_tokens, ctx->stream()));
    const Tensor got = download(*ctx, d_out), tokens = download(*ctx, d_tokens);
    int differ_from_argmax = 0;
    Tensor argmax = Tensor::zeros({R, 2}, DType::i32);
    D0_ASSERT_OK(cpu.greedy_tokens(x, argmax, nullptr));
    for (std::int64_t r = 0; r < R; ++r) {
      const std::int32_t* g = got.data<std::int32_t>() + 2 * r;
      const std::int32_t* w = want.data<std::int32_t>() + 2 * r;
      EXPECT_EQ(g[1], w[1]) << "row " << r;
      if (w[1] == -1) {
        EXPECT_EQ(g[0], w[0]) << "row " << r;
      }
      EXPECT_EQ(tokens.data<std::int32_t>()[r], g[0]) << "row " << r;
      differ_from_argmax += g[0] != argmax.data<std::int32_t>()[2 * r];
    }
    if (V > 1) {
      EXPECT_GT(differ_from_argmax, 0) << "no row drew other than its argmax: the draws did nothing";
    }
    EXPECT_GT(filtered, 30);
  }
}

TEST(CudaDrawTokens, refuses_bad_draws_with_the_host_checks) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  Tensor d_x = poisoned(*ctx, {2, 16}, DType::f32), d_out = poisoned(*ctx, {2, 2}, DType::i32);
  const std::vector<TokenDraw> outside = {{2, 1.f, 0.5}}, twice = {{0, 1.f, 0.5}, {0, 1.f, 0.5}},
                               bad_u = {{1, 1.f, 1.0}}, bad_top_p = {{1, 1.f, 0.5, 0, 0.0}};
  auto a = draw_tokens_cuda(d_x, outside, d_out, nullptr, ctx->stream());
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.error().message.find("outside the 2 logits rows"), std::string::npos) << a.error().message;
  EXPECT_FALSE(draw_tokens_cuda(d_x, twice, d_out, nullptr, ctx->stream()).ok());
  EXPECT_FALSE(draw_tokens_cuda(d_x, bad_u, d_out, nullptr, ctx->stream()).ok());
  EXPECT_FALSE(draw_tokens_cuda(d_x, bad_top_p, d_out, nullptr, ctx->stream()).ok());
}

}  // namespace
}  // namespace day0
