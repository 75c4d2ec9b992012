// row_logprobs_cuda against the host's records (CpuOps::row_logprobs, ops/logprobs.h) after the same picks: the same
// top ids in the same order (the cutoff is the host's rank order bit for bit), and logprobs within 1e-6 (both sum in
// double; their orders differ, so the float results may differ in the last ulp): random logits at gpt-oss's
// vocabulary, past the row cache, at widths that end inside a lane and a block and under 20 ids; heavy ties, signed
// zeros, masked vocabularies, a dominant token; drawn and argmax picks; top_n 0 to 20; unusable rows left as they were.
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

constexpr float kLogprobTolerance = 1e-6f;  // double sums in two orders, rounded to float: an ulp at |logprob| ~ 16

// Equal where infinite (a masked id's logprob is -inf), within the tolerance elsewhere.
void expect_logprob(float got, float want, const char* what, int k) {
  if (std::isinf(want))
    EXPECT_EQ(got, want) << what << " " << k;
  else
    EXPECT_NEAR(got, want, kLogprobTolerance) << what << " " << k;
}

LogprobRecord record_at(const Tensor& records, std::int64_t i) {
  return logprob_record_at(records.data<std::int32_t>(), i);
}

TEST(CudaRowLogprobs, match_the_host_records_for_every_row) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(20261207);
  CpuOps cpu;
  for (const std::int64_t V :
       {std::int64_t{201088}, std::int64_t{395265}, std::int64_t{2049}, std::int64_t{77}, std::int64_t{13}}) {
    SCOPED_TRACE(::testing::Message() << "V " << V);
    constexpr std::int64_t R = 72;  // more than one launch's 64 requests
    Tensor x = random_f32({R, V}, rng, -8.f, 8.f);
    std::uniform_int_distribution<std::int64_t> id(0, V - 1);
    std::vector<TokenDraw> draws;
    std::vector<LogprobRequest> requests;
    for (std::int64_t r = 0; r < R; ++r) {
      float* row = x.data<float>() + r * V;
      switch (r % 6) {
        case 1:  // most of the vocabulary masked
          for (std::int64_t i = 0; i < V; ++i)
            if (i % 7 != 3) row[i] = -INFINITY;
          break;
        case 2:  // one dominant token
          row[id(rng)] = 60.f;
          break;
        case 3:  // few distinct logits: the top n end among ties, taken in id order
          for (std::int64_t i = 0; i < V; ++i) row[i] = std::round(row[i] / 4.f);
          break;
        case 4:  // signed zeros (+0 ranks before -0)
          for (std::int64_t i = 0; i < V; ++i) row[i] = i % 3 == 0 ? 0.f : i % 3 == 1 ? -0.f : row[i] - 20.f;
          break;
        case 5:
          if (r % 4 == 1) row[id(rng)] = NAN;  // unusable: its record stays as it was
          break;
        default:
          break;
      }
      if (r % 3 == 0) draws.push_back({static_cast<std::int32_t>(r), 1.f, 0.5});
      if (r % 9 != 8) requests.push_back({static_cast<std::int32_t>(r), static_cast<std::int32_t>(r % 21)});
    }
    const auto n = static_cast<std::int64_t>(requests.size());
    Tensor picks = Tensor::zeros({R, 2}, DType::i32), want = Tensor::zeros({n, kLogprobRecordWords}, DType::i32);
    D0_ASSERT_OK(cpu.greedy_tokens(x, picks, nullptr));
    D0_ASSERT_OK(cpu.draw_tokens(x, draws, picks, nullptr));
    D0_ASSERT_OK(cpu.row_logprobs(x, requests, picks, want));
    const Tensor d_x = upload(*ctx, x);
    Tensor d_picks = poisoned(*ctx, {R, 2}, DType::i32),
           d_records = poisoned(*ctx, {n, kLogprobRecordWords}, DType::i32);
    D0_ASSERT_OK(greedy_tokens_cuda(d_x, d_picks, nullptr, ctx->stream()));
    D0_ASSERT_OK(draw_tokens_cuda(d_x, draws, d_picks, nullptr, ctx->stream()));
    D0_ASSERT_OK(row_logprobs_cuda(d_x, requests, d_picks, d_records, ctx->stream()));
    const Tensor got_picks = download(*ctx, d_picks), got = download(*ctx, d_records);
    int checked = 0, ties = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int32_t row = requests[i].row;
      SCOPED_TRACE(::testing::Message() << "row " << row << ", top " << requests[i].top_n);
      const std::int32_t unusable = picks.data<std::int32_t>()[2 * row + 1];
      ASSERT_EQ(got_picks.data<std::int32_t>()[2 * row + 1], unusable);
      const LogprobRecord g = record_at(got, i), w = record_at(want, i);
      if (unusable != -1) {  // left as it was: still the poison's bytes (the pick's token means nothing here)
        EXPECT_EQ(got.data<std::int32_t>()[i * kLogprobRecordWords + 1], -1);
        continue;
      }
      ASSERT_EQ(got_picks.data<std::int32_t>()[2 * row], picks.data<std::int32_t>()[2 * row]);
      expect_logprob(g.picked, w.picked, "picked", 0);
      ASSERT_EQ(g.n, w.n);
      EXPECT_EQ(w.n, std::min<std::int64_t>(requests[i].top_n, V));
      for (int k = 0; k < w.n; ++k) {
        EXPECT_EQ(g.ids[k], w.ids[k]) << "entry " << k;
        expect_logprob(g.logprobs[k], w.logprobs[k], "entry", k);
        ties += k > 0 && w.logprobs[k] == w.logprobs[k - 1];
      }
      ++checked;
    }
    EXPECT_GT(checked, 50);
    if (V > 13) {
      EXPECT_GT(ties, 10) << "no ties among the top entries: the id order went untested";
    }
  }
}

TEST(CudaRowLogprobs, refuses_bad_requests_with_the_host_checks) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  Tensor d_x = poisoned(*ctx, {2, 16}, DType::f32), d_picks = poisoned(*ctx, {2, 2}, DType::i32);
  Tensor d_records = poisoned(*ctx, {1, kLogprobRecordWords}, DType::i32);
  auto outside = row_logprobs_cuda(d_x, {{2, 1}}, d_picks, d_records, ctx->stream());
  ASSERT_FALSE(outside.ok());
  EXPECT_NE(outside.error().message.find("outside the step's 2 rows"), std::string::npos) << outside.error().message;
  EXPECT_FALSE(row_logprobs_cuda(d_x, {{0, 21}}, d_picks, d_records, ctx->stream()).ok());
  EXPECT_FALSE(row_logprobs_cuda(d_x, {{0, 1}, {1, 1}}, d_picks, d_records, ctx->stream()).ok());  // one record
}

}  // namespace
}  // namespace day0
