// GemmBf16 (cuBLASLt) against CpuOps::linear on the same bf16-rounded inputs, so the comparison isolates the
// kernel: shapes from decode (M = 1) to prefill (M = 257), odd sizes, f32/bf16 output, bias by epilogue
// (bias dtype = output dtype) and by the separate add kernel (other pairs). Skipped visibly without a GPU.
#include "ops/cuda/gemm_bf16.h"

#include <gtest/gtest.h>

#include <random>

#include "cuda_test_util.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/op_test_util.h"
#include "quant/mxfp4.h"

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

struct GemmCase {
  std::int64_t M, N, K;
  DType out;
  Bias bias;
};

void run_case(CudaContext& ctx, GemmBf16& gemm, const GemmCase& c, std::mt19937& rng) {
  SCOPED_TRACE("M " + std::to_string(c.M) + " N " + std::to_string(c.N) + " K " + std::to_string(c.K) + " out " +
               std::string(dtype_name(c.out)) + " bias " + std::to_string(int(c.bias)));
  const Tensor x_bf16 = to_bf16(random_f32({c.M, c.K}, rng)), w_bf16 = to_bf16(random_f32({c.N, c.K}, rng));
  const Tensor bias = optest::random_bias(c.N, c.bias, rng);
  // The reference sees exactly the values the GPU sees: x rounded to bf16 first, then widened.
  CpuOps cpu;
  Tensor want = Tensor::zeros({c.M, c.N}, DType::f32);
  D0_ASSERT_OK(cpu.linear(x_bf16.to_f32(), w_bf16, bias, want));
  const auto mark = ctx.arena().mark();
  Tensor d_y = poisoned(ctx, {c.M, c.N}, c.out);
  D0_ASSERT_OK(gemm.run(upload(ctx, x_bf16), upload(ctx, w_bf16), c.bias == Bias::none ? Tensor() : upload(ctx, bias),
                        d_y));
  const Tensor got = download(ctx, d_y);
  EXPECT_EQ(cudatest::count_nan(got), 0) << "unwritten (poisoned) outputs";
  const double err = relative_norm_error(got, want);
  // f32 out: the same products summed in another order (tensor-core tiles vs a sequential loop), ~1e-6;
  // bf16 out: rounding to 8 significant bits alone is up to 2^-9 per element, ~1.1e-3 rms.
  const double tol = c.out == DType::f32 ? 1e-5 : 4e-3;
  EXPECT_LE(err, tol);
  ASSERT_TRUE(ctx.arena().release(mark).ok());
}

TEST(CudaGemm, bf16_gemm_matches_cpu_linear_on_bf16_rounded_inputs_across_shapes_dtypes_and_bias) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  GemmBf16 gemm(*ctx);
  std::mt19937 rng(3001);
  std::vector<GemmCase> cases;
  for (std::int64_t M : {1, 3, 64, 257})
    for (DType out : {DType::f32, DType::bf16})
      for (Bias b : {Bias::none, Bias::f32, Bias::bf16}) cases.push_back({M, 32, 64, out, b});
  // gpt-oss widths: hidden 2880, gate_up 5760 (the CPU side of M = 64 takes a second or two).
  for (std::int64_t M : {1, 3, 64}) cases.push_back({M, 5760, 2880, DType::f32, Bias::bf16});
  cases.push_back({1, 5760, 2880, DType::bf16, Bias::bf16});
  cases.push_back({257, 32, 2880, DType::f32, Bias::f32});  // router-like: many tokens, few outputs
  cases.push_back({257, 5760, 64, DType::bf16, Bias::none});
  cases.push_back({5, 33, 72, DType::f32, Bias::f32});      // odd N: ld of y not a multiple of 16 bytes
  for (const GemmCase& c : cases) run_case(*ctx, gemm, c, rng);
}

TEST(CudaGemm, the_heuristic_runs_once_per_shape_and_later_calls_reuse_the_plan) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  GemmBf16 gemm(*ctx);
  std::mt19937 rng(3002);
  for (int rep = 0; rep < 3; ++rep) {
    run_case(*ctx, gemm, {3, 32, 64, DType::f32, Bias::none}, rng);
    run_case(*ctx, gemm, {4, 32, 64, DType::f32, Bias::none}, rng);
    run_case(*ctx, gemm, {3, 32, 64, DType::f32, Bias::f32}, rng);
  }
  EXPECT_EQ(gemm.plan_count(), 3u);
}

TEST(CudaGemm, rejects_f32_inputs_and_mismatched_shapes_naming_the_argument) {
  // Validation only; a GemmBf16 needs a context, so this runs on the GPU machine.
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context(std::size_t(64) << 20);
  ASSERT_TRUE(ctx);
  GemmBf16 gemm(*ctx);
  auto x32 = ctx->arena().allocate({2, 64}, DType::f32, "x");
  auto w = ctx->arena().allocate({8, 64}, DType::bf16, "w");
  auto w_bad = ctx->arena().allocate({8, 63}, DType::bf16, "w");
  auto y = ctx->arena().allocate({2, 8}, DType::f32, "y");
  ASSERT_TRUE(x32.ok() && w.ok() && w_bad.ok() && y.ok());
  Status st = gemm.run(*x32, *w, Tensor(), *y);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(optest::contains(st.error().message, "x must be")) << st.error().message;
  auto x = ctx->arena().allocate({2, 64}, DType::bf16, "x");
  ASSERT_TRUE(x.ok());
  st = gemm.run(*x, *w_bad, Tensor(), *y);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(optest::contains(st.error().message, "w must be")) << st.error().message;
}

}  // namespace
}  // namespace day0
