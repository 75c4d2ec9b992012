// linear_small_cuda (the decode-size tensor-core linear) against CpuOps::linear on x rounded to bf16 (the GPU is
// given the f32 x and rounds it in registers): M from 1 to 16 (one or two token tiles, ragged) and in slices of 16
// beyond, N not a multiple
// of 16, K not a multiple of 32, biases f32/bf16/none, and up to four weights in one launch (q, k, v).
// Skipped visibly without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cuda/linear_small_cuda.h"
#include "ops/op_test_util.h"

namespace day0 {
namespace {

using cudatest::download;
using cudatest::make_context;
using cudatest::poisoned;
using cudatest::relative_norm_error;
using cudatest::upload;
using optest::random_f32;
using optest::to_bf16;

using optest::Bias;

struct Weight {
  std::int64_t n;
  Bias bias;
};

// One launch of linear_small_cuda over `weights` against the CPU reference, per output.
void run_case(CudaContext& ctx, std::int64_t M, std::int64_t K, const std::vector<Weight>& weights, std::mt19937& rng) {
  SCOPED_TRACE("M " + std::to_string(M) + " K " + std::to_string(K) + " weights " + std::to_string(weights.size()));
  const auto mark = ctx.arena().mark();
  const Tensor x = random_f32({M, K}, rng);
  const Tensor d_x = upload(ctx, x);
  std::vector<Tensor> want;
  std::vector<LinearTarget> targets;
  CpuOps cpu;
  for (const Weight& wt : weights) {
    const Tensor w = to_bf16(random_f32({wt.n, K}, rng));
    const Tensor bias = optest::random_bias(wt.n, wt.bias, rng);
    Tensor y = Tensor::zeros({M, wt.n}, DType::f32);
    D0_ASSERT_OK(cpu.linear(to_bf16(x).to_f32(), w, bias, y));
    want.push_back(y);
    targets.push_back(
        {upload(ctx, w), wt.bias == Bias::none ? Tensor() : upload(ctx, bias), poisoned(ctx, {M, wt.n}, DType::f32)});
  }
  ASSERT_TRUE(linear_small_fits(d_x, targets, kLinearSmallMaxSlicedRows));
  D0_ASSERT_OK(linear_small_cuda(d_x, targets, ctx.sm_count(), ctx.stream()));
  for (size_t i = 0; i < targets.size(); ++i) {
    SCOPED_TRACE("weight " + std::to_string(i) + " N " + std::to_string(weights[i].n));
    const Tensor got = download(ctx, targets[i].out);
    EXPECT_EQ(cudatest::count_nan(got), 0) << "unwritten (poisoned) outputs";
    // The same bf16 products summed in f32 in another order (split-K partials, MMA trees): ~1e-7 relative.
    EXPECT_LE(relative_norm_error(got, want[i]), 1e-5);
  }
  ASSERT_TRUE(ctx.arena().release(mark).ok());
}

TEST(CudaLinearSmall, matches_cpu_linear_on_bf16_rounded_x_for_1_to_16_rows_odd_shapes_and_biases) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(7101);
  for (std::int64_t M : {1, 2, 3, 7, 8, 9, 15, 16})
    for (std::int64_t K : {8, 72, 200}) run_case(*ctx, M, K, {{33, Bias::f32}}, rng);
  for (Bias b : {Bias::none, Bias::f32, Bias::bf16}) run_case(*ctx, 5, 136, {{1, b}, {16, b}, {47, b}}, rng);
  // gpt-oss-20b: q/k/v (4096, 512, 512 rows of 2880) in one launch; the o projection (K = 4096); a router.
  for (std::int64_t M : {1, 8, 16})
    run_case(*ctx, M, 2880, {{4096, Bias::bf16}, {512, Bias::bf16}, {512, Bias::bf16}}, rng);
  run_case(*ctx, 4, 4096, {{2880, Bias::bf16}}, rng);   // 180 row tiles: two CTAs an SM, the 8-deep shape
  run_case(*ctx, 12, 4096, {{2880, Bias::bf16}}, rng);  // ... with two token tiles
  run_case(*ctx, 3, 2880, {{32, Bias::f32}}, rng);
  // The many-tile shapes' cp.async rings (313 row tiles) with a part-filled last k block, and with K = 72: only
  // warp 0 has blocks.
  run_case(*ctx, 3, 200, {{5000, Bias::f32}}, rng);
  run_case(*ctx, 10, 72, {{5000, Bias::none}}, rng);
  // Few row tiles take the 16-warp shape: K = 8,200 is two rounds of its loads and a part-filled third.
  run_case(*ctx, 9, 8200, {{128, Bias::bf16}}, rng);
  run_case(*ctx, 2, 64, {{8, Bias::none}, {8, Bias::none}, {8, Bias::none}, {8, Bias::none}}, rng);
}

// More than 16 rows run in slices of 16 (batch-invariant mode): each row equals the CPU reference and, to the bit,
// the same row computed alone (what makes a token's result independent of its step's size).
TEST(CudaLinearSmall, rows_beyond_16_run_in_slices_each_row_bit_identical_to_a_one_row_call) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(7103);
  for (std::int64_t M : {17, 40, 100}) run_case(*ctx, M, 200, {{33, Bias::f32}, {70, Bias::none}}, rng);
  run_case(*ctx, 64, 2880, {{4096, Bias::bf16}, {512, Bias::bf16}, {512, Bias::bf16}}, rng);

  const std::int64_t M = 40, K = 2880, N = 96;
  const Tensor x = random_f32({M, K}, rng);
  const Tensor w = upload(*ctx, to_bf16(random_f32({N, K}, rng)));
  const Tensor bias = upload(*ctx, optest::random_bias(N, Bias::bf16, rng));
  std::vector<LinearTarget> all{{w, bias, poisoned(*ctx, {M, N}, DType::f32)}};
  D0_ASSERT_OK(linear_small_cuda(upload(*ctx, x), all, ctx->sm_count(), ctx->stream()));
  const Tensor got = download(*ctx, all[0].out);
  for (std::int64_t r : {0, 7, 8, 15, 16, 31, 39}) {
    std::vector<LinearTarget> one{{w, bias, poisoned(*ctx, {1, N}, DType::f32)}};
    D0_ASSERT_OK(linear_small_cuda(upload(*ctx, x.slice_rows(r, r + 1)), one, ctx->sm_count(), ctx->stream()));
    const Tensor alone = download(*ctx, one[0].out);
    for (std::int64_t n = 0; n < N; ++n)
      ASSERT_EQ(got.data<float>()[r * N + n], alone.data<float>()[n]) << "row " << r << " output " << n;
  }
}

TEST(CudaLinearSmall, takes_decode_sized_bf16_calls_and_leaves_the_rest_to_the_gemm) {
  // Host tensors: linear_small_fits looks at shapes and dtypes only, so this runs without a GPU.
  const Tensor w = Tensor::zeros({8, 64}, DType::bf16), w32 = Tensor::zeros({8, 64}, DType::f32);
  const std::vector<LinearTarget> one{{w, Tensor(), Tensor()}};
  for (std::int64_t M = 1; M <= kLinearSmallMaxRows; ++M)
    EXPECT_TRUE(linear_small_fits(Tensor::zeros({M, 64}, DType::f32), one)) << M;
  EXPECT_FALSE(linear_small_fits(Tensor::zeros({kLinearSmallMaxRows + 1, 64}, DType::f32), one));
  EXPECT_TRUE(linear_small_fits(Tensor::zeros({kLinearSmallMaxRows + 1, 64}, DType::f32), one, 1 << 20));
  EXPECT_FALSE(linear_small_fits(Tensor::zeros({kLinearSmallMaxSlicedRows + 1, 8}, DType::f32), one,
                                 kLinearSmallMaxSlicedRows + 1));  // more slices than one grid holds
  EXPECT_FALSE(linear_small_fits(Tensor::zeros({1, 60}, DType::f32), one));  // rows not 16-byte multiples
  EXPECT_FALSE(linear_small_fits(Tensor::zeros({1, 64}, DType::f32), {{w32, Tensor(), Tensor()}}));
  EXPECT_FALSE(linear_small_fits(Tensor::zeros({1, 64}, DType::f32), {}));
  EXPECT_TRUE(linear_small_fits(Tensor::zeros({1, 64}, DType::f32), std::vector<LinearTarget>(4, one[0])));
  EXPECT_FALSE(linear_small_fits(Tensor::zeros({1, 64}, DType::f32), std::vector<LinearTarget>(5, one[0])));
}

// Up to 128 rows for weights of at most 1 MiB (gpt-oss's router: 32 x 2880 bf16), 64 up to 4 MiB (k, v alone), 16
// for larger ones (q/k/v together, o), one from 256 MiB (lm_head), counting every target of the call.
TEST(CudaLinearSmall, tiny_weights_take_more_rows_than_large_ones) {
  const Tensor router = Tensor::zeros({32, 2880}, DType::bf16), o = Tensor::zeros({2880, 4096}, DType::bf16);
  EXPECT_EQ(linear_small_max_rows({{router, Tensor(), Tensor()}}), kLinearSmallTinyMaxRows);
  EXPECT_EQ(linear_small_max_rows({{o, Tensor(), Tensor()}}), kLinearSmallMaxRows);
  const Tensor q = Tensor::zeros({4096, 2880}, DType::bf16), kv = Tensor::zeros({512, 2880}, DType::bf16);
  EXPECT_EQ(linear_small_max_rows({{kv, Tensor(), Tensor()}}), kLinearSmallMediumMaxRows);
  EXPECT_EQ(linear_small_max_rows({{q, Tensor(), Tensor()}, {kv, Tensor(), Tensor()}, {kv, Tensor(), Tensor()}}),
            kLinearSmallMaxRows);
  const Tensor half = Tensor::zeros({256, 1024}, DType::bf16);  // 512 KiB: two of them are exactly 1 MiB
  EXPECT_EQ(linear_small_max_rows({{half, Tensor(), Tensor()}, {half, Tensor(), Tensor()}}), kLinearSmallTinyMaxRows);
  EXPECT_EQ(linear_small_max_rows(std::vector<LinearTarget>(3, {half, Tensor(), Tensor()})), kLinearSmallMediumMaxRows);
  EXPECT_EQ(linear_small_max_rows(std::vector<LinearTarget>(9, {half, Tensor(), Tensor()})), kLinearSmallMaxRows);
  // Only the sizes are asked: shapes over one byte of storage stand for gpt-oss's lm_head and 256 MiB exactly.
  auto byte = std::make_shared<std::uint8_t>(0);
  const Tensor lm_head = Tensor::borrow(byte.get(), {201088, 2880}, DType::bf16, byte);
  const Tensor at_limit = Tensor::borrow(byte.get(), {128, std::int64_t{1} << 20}, DType::bf16, byte);
  const Tensor under = Tensor::borrow(byte.get(), {128, (std::int64_t{1} << 20) - 8}, DType::bf16, byte);
  EXPECT_EQ(linear_small_max_rows({{lm_head, Tensor(), Tensor()}}), 1);
  EXPECT_EQ(linear_small_max_rows({{at_limit, Tensor(), Tensor()}}), 1);
  EXPECT_EQ(linear_small_max_rows({{under, Tensor(), Tensor()}}), kLinearSmallMaxRows);
  EXPECT_TRUE(linear_small_fits(Tensor::zeros({1, 2880}, DType::f32), {{lm_head, Tensor(), Tensor()}},
                                linear_small_max_rows({{lm_head, Tensor(), Tensor()}})));
  EXPECT_FALSE(linear_small_fits(Tensor::zeros({2, 2880}, DType::f32), {{lm_head, Tensor(), Tensor()}},
                                 linear_small_max_rows({{lm_head, Tensor(), Tensor()}})));
}

TEST(CudaLinearSmall, declines_and_rejects_what_it_does_not_take_naming_the_reason) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context(std::size_t(64) << 20);
  ASSERT_TRUE(ctx);
  std::mt19937 rng(7102);
  const Tensor w = upload(*ctx, to_bf16(random_f32({16, 64}, rng)));
  const Tensor x17 = upload(*ctx, random_f32({kLinearSmallMaxRows + 1, 64}, rng));
  const Tensor x_odd_k = upload(*ctx, random_f32({2, 60}, rng));
  const std::vector<LinearTarget> one{{w, Tensor(), poisoned(*ctx, {kLinearSmallMaxRows + 1, 16}, DType::f32)}};
  EXPECT_FALSE(linear_small_fits(x17, one));  // more rows than decode calls route here (slices: allowed)
  EXPECT_FALSE(linear_small_fits(x_odd_k, one));
  const std::vector<LinearTarget> odd{{upload(*ctx, to_bf16(random_f32({16, 60}, rng))), Tensor(),
                                       poisoned(*ctx, {2, 16}, DType::f32)}};
  const Status s = linear_small_cuda(x_odd_k, odd, ctx->sm_count(), ctx->stream());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("K % 8 == 0"), std::string::npos) << s.error().message;
  const std::vector<LinearTarget> five(5, one[0]);
  EXPECT_FALSE(linear_small_fits(upload(*ctx, random_f32({2, 64}, rng)), five));
  // A mismatched output shape is named.
  const Tensor x2 = upload(*ctx, random_f32({2, 64}, rng));
  const std::vector<LinearTarget> bad{{w, Tensor(), poisoned(*ctx, {2, 15}, DType::f32)}};
  const Status b = linear_small_cuda(x2, bad, ctx->sm_count(), ctx->stream());
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message.find("out"), std::string::npos) << b.error().message;
}

}  // namespace
}  // namespace day0
