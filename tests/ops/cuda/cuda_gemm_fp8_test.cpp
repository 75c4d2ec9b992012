// GemmFp8 (cuBLASLt E4M3 with per-row x and per-row w scales) against an f64 reference over the dequantised
// operands, for each way of applying the scales (in the GEMM through OUTER_VEC_32F, or by our epilogue kernel),
// from decode (M = 1) to prefill (M = 257) and at gpt-oss's expert widths; then the timings that decided the
// default. Skipped visibly without a GPU.
#include "ops/cuda/gemm_fp8.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "ops/cuda/gemm_bf16.h"
#include "ops/op_test_util.h"
#include "quant/fp8_experts.h"
#include "quant/mxfp4.h"

namespace day0 {
namespace {

using cudatest::download;
using cudatest::make_context;
using cudatest::poisoned;
using cudatest::relative_norm_error;
using cudatest::upload;

using optest::Bias;

// E4M3 operands as the MoE makes them: x rows quantised per token (amax/448 scales), w rows converted from MXFP4
// (power-of-two scales); `dq` holds the dequantised values (q * scale) for the reference.
struct Fp8Operand {
  Tensor q, scales;
  std::vector<double> dq;
};

Fp8Operand activations(std::int64_t rows, std::int64_t K, std::mt19937& rng) {
  const Tensor x = optest::random_f32({rows, K}, rng);
  Fp8Operand op{Tensor::zeros({rows, K}, DType::f8_e4m3), Tensor::zeros({rows}, DType::f32), {}};
  for (std::int64_t r = 0; r < rows; ++r)
    op.scales.data<float>()[r] =
        fp8_quantize_row(x.data<float>() + r * K, K, op.q.data<std::uint8_t>() + r * K).scale;
  return op;
}

Fp8Operand mxfp4_weights(std::int64_t rows, std::int64_t K, std::mt19937& rng) {
  const Tensor w = optest::random_f32({rows, K}, rng, -0.05f, 0.05f);
  Fp8Operand op{Tensor::zeros({rows, K}, DType::f8_e4m3), Tensor::zeros({rows}, DType::f32), {}};
  std::vector<std::uint8_t> blocks(K / 2), scales(K / kMxfp4GroupSize);
  for (std::int64_t r = 0; r < rows; ++r) {
    mxfp4_encode_row(w.data<float>() + r * K, K, blocks.data(), scales.data());
    op.scales.data<float>()[r] = mxfp4_row_to_fp8(blocks.data(), scales.data(), K, op.q.data<std::uint8_t>() + r * K).scale;
  }
  return op;
}

void dequantise(Fp8Operand& op) {
  const std::int64_t rows = op.q.size(0), K = op.q.size(1);
  op.dq.resize(rows * K);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t k = 0; k < K; ++k)
      op.dq[r * K + k] = double(e4m3_to_f32(op.q.data<std::uint8_t>()[r * K + k])) * op.scales.data<float>()[r];
}

struct GemmCase {
  std::int64_t M, N, K;
  Bias bias;
};

// Largest relative error seen per scaling, printed at the end of the test.
struct Worst {
  double in_gemm = 0, epilogue = 0;
};

void run_case(CudaContext& ctx, const GemmCase& c, std::mt19937& rng, Worst& worst, bool& in_gemm_supported) {
  SCOPED_TRACE("M " + std::to_string(c.M) + " N " + std::to_string(c.N) + " K " + std::to_string(c.K) + " bias " +
               std::to_string(int(c.bias)));
  Fp8Operand x = activations(c.M, c.K, rng), w = mxfp4_weights(c.N, c.K, rng);
  dequantise(x);
  dequantise(w);
  const Tensor bias = optest::random_bias(c.N, c.bias, rng);
  Tensor want = Tensor::zeros({c.M, c.N}, DType::f32);
  const Tensor bias32 = c.bias == Bias::none ? Tensor() : bias.to_f32();
  for (std::int64_t m = 0; m < c.M; ++m)
    for (std::int64_t n = 0; n < c.N; ++n) {
      double acc = 0;
      for (std::int64_t k = 0; k < c.K; ++k) acc += x.dq[m * c.K + k] * w.dq[n * c.K + k];
      want.data<float>()[m * c.N + n] = static_cast<float>(acc + (c.bias == Bias::none ? 0.0 : bias32.data<float>()[n]));
    }
  const auto mark = ctx.arena().mark();
  const Tensor d_x = upload(ctx, x.q), d_sx = upload(ctx, x.scales), d_w = upload(ctx, w.q), d_sw = upload(ctx, w.scales);
  const Tensor d_b = c.bias == Bias::none ? Tensor() : upload(ctx, bias);
  for (Fp8Scaling scaling : {Fp8Scaling::epilogue, Fp8Scaling::in_gemm, Fp8Scaling::automatic}) {
    SCOPED_TRACE(std::string(fp8_scaling_name(scaling)));
    GemmFp8 gemm(ctx, scaling);
    Tensor d_y = poisoned(ctx, {c.M, c.N}, DType::f32);
    const Status st = gemm.run(d_x, d_sx, d_w, d_sw, d_b, d_y);
    if (scaling == Fp8Scaling::in_gemm && !st.ok() && optest::contains(st.error().message, "no FP8 algorithm")) {
      in_gemm_supported = false;  // reported by the caller; automatic must still work
      std::printf("[ gemm fp8 ] in_gemm refused at M %lld N %lld K %lld: %s\n", (long long)c.M, (long long)c.N,
                  (long long)c.K, st.error().message.c_str());
      continue;
    }
    D0_ASSERT_OK(st);
    const Tensor got = download(ctx, d_y);
    EXPECT_EQ(cudatest::count_nan(got), 0) << "unwritten (poisoned) outputs";
    const double err = relative_norm_error(got, want);
    // Products of E4M3 values are exact in fp32 and accumulate in fp32; Hopper's FP8 MMA keeps about 14 bits
    // inside each 32-deep step before cuBLAS promotes the partial to fp32 (~6e-5 relative per partial, random
    // over K / 32 partials), and the two scale multiplications round twice (~1e-7): 1e-3 leaves 10x margin.
    EXPECT_LE(err, 1e-3);
    double& w_err = gemm.last_scaling() == Fp8Scaling::in_gemm ? worst.in_gemm : worst.epilogue;
    w_err = std::max(w_err, err);
    if (scaling != Fp8Scaling::automatic) {
      EXPECT_EQ(gemm.last_scaling(), scaling) << "a forced scaling is used";
    }
  }
  ASSERT_TRUE(ctx.arena().release(mark).ok());
}

TEST(CudaGemmFp8, fp8_gemm_matches_an_f64_reference_of_the_dequantised_operands_for_both_scalings) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(5001);
  std::vector<GemmCase> cases;
  for (std::int64_t M : {1, 3, 64, 257})
    for (Bias b : {Bias::none, Bias::f32, Bias::bf16}) cases.push_back({M, 48, 64, b});
  cases.push_back({5, 32, 208, Bias::f32});
  // gpt-oss expert shapes: gate_up 5760 x 2880, down 2880 x 2880 (the CPU reference of M = 64 takes a second).
  cases.push_back({1, 5760, 2880, Bias::bf16});
  cases.push_back({4, 5760, 2880, Bias::f32});
  cases.push_back({64, 2880, 2880, Bias::bf16});
  cases.push_back({17, 2880, 2880, Bias::none});
  Worst worst;
  bool in_gemm_supported = true;
  for (const GemmCase& c : cases) run_case(*ctx, c, rng, worst, in_gemm_supported);
  std::printf("[ gemm fp8 ] worst relative error vs f64: in_gemm %.3g, epilogue %.3g; in_gemm %s on this GPU\n",
              worst.in_gemm, worst.epilogue, in_gemm_supported ? "supported" : "NOT supported");
}

TEST(CudaGemmFp8, the_heuristic_runs_once_per_shape_and_later_calls_reuse_the_plan) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(5002);
  GemmFp8 gemm(*ctx, Fp8Scaling::epilogue);
  const Fp8Operand x = activations(3, 64, rng), w = mxfp4_weights(32, 64, rng);
  const Tensor d_x = upload(*ctx, x.q), d_sx = upload(*ctx, x.scales), d_w = upload(*ctx, w.q);
  const Tensor d_sw = upload(*ctx, w.scales);
  Tensor y = poisoned(*ctx, {3, 32}, DType::f32), y2 = poisoned(*ctx, {2, 32}, DType::f32);
  for (int rep = 0; rep < 3; ++rep) {
    D0_ASSERT_OK(gemm.run(d_x, d_sx, d_w, d_sw, Tensor(), y));
    D0_ASSERT_OK(gemm.run(d_x.slice_rows(0, 2), d_sx.slice_rows(0, 2), d_w, d_sw, Tensor(), y2));
  }
  EXPECT_EQ(gemm.plan_count(), 2u);
}

TEST(CudaGemmFp8, rejects_n_or_k_off_the_16_grid_and_wrong_dtypes_naming_the_argument) {
  // Validation only; a GemmFp8 needs a context, so this runs on the GPU machine.
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context(std::size_t(64) << 20);
  ASSERT_TRUE(ctx);
  GemmFp8 gemm(*ctx);
  auto alloc = [&](const Shape& s, DType d) { return *ctx->arena().allocate(s, d, "t"); };
  Tensor x = alloc({2, 64}, DType::f8_e4m3), sx = alloc({2}, DType::f32), y33 = alloc({2, 33}, DType::f32);
  Status st = gemm.run(x, sx, alloc({33, 64}, DType::f8_e4m3), alloc({33}, DType::f32), Tensor(), y33);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(optest::contains(st.error().message, "multiples of 16")) << st.error().message;
  Tensor y = alloc({2, 32}, DType::f32);
  st = gemm.run(alloc({2, 64}, DType::bf16), sx, alloc({32, 64}, DType::f8_e4m3), alloc({32}, DType::f32), Tensor(), y);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(optest::contains(st.error().message, "x must be")) << st.error().message;
}

// Mean time of `reps` launches of f after 3 warm-ups, in microseconds.
template <class F>
double time_us(CudaContext& ctx, int reps, F&& f) {
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(f().ok());
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaEventRecord(start, ctx.stream());
  for (int i = 0; i < reps; ++i) EXPECT_TRUE(f().ok());
  cudaEventRecord(stop, ctx.stream());
  cudaEventSynchronize(stop);
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return 1000.0 * ms / reps;
}

TEST(CudaGemmFp8, timing_of_both_scalings_and_bf16_at_gpt_oss_expert_shapes) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context(std::size_t(2) << 30);
  ASSERT_TRUE(ctx);
  GemmFp8 in_gemm(*ctx, Fp8Scaling::in_gemm), epilogue(*ctx, Fp8Scaling::epilogue);
  GemmBf16 bf16(*ctx);
  // Contents do not matter for timing: zeroed operands, unit scales, a bf16 bias as the MoE passes.
  auto zeros = [&](const Shape& s, DType d) { return cudatest::zeroed(*ctx, s, d); };
  std::printf("[ gemm fp8 ] us per GEMM (weight bytes / time vs 4.3 TB/s copy rate); bias bf16\n");
  for (auto [N, K] : {std::pair<std::int64_t, std::int64_t>{5760, 2880}, {2880, 2880}})
    for (std::int64_t M : {1, 4, 16, 64, 256}) {
      const auto mark = ctx->arena().mark();
      Tensor x8 = zeros({M, K}, DType::f8_e4m3), w8 = zeros({N, K}, DType::f8_e4m3);
      Tensor sx = zeros({M}, DType::f32), sw = zeros({N}, DType::f32), b = zeros({N}, DType::bf16);
      Tensor xb = zeros({M, K}, DType::bf16), wb = zeros({N, K}, DType::bf16), y = zeros({M, N}, DType::f32);
      const bool in_ok = in_gemm.run(x8, sx, w8, sw, b, y).ok();  // refused where cuBLASLt has no algorithm
      const double t_in = in_ok ? time_us(*ctx, 20, [&] { return in_gemm.run(x8, sx, w8, sw, b, y); }) : 0.0;
      const double t_ep = time_us(*ctx, 20, [&] { return epilogue.run(x8, sx, w8, sw, b, y); });
      const double t_bf = time_us(*ctx, 20, [&] { return bf16.run(xb, wb, b, y); });
      auto tbs = [&](double us, int bytes) { return double(N) * K * bytes / (us * 1e-6) / 1e12; };
      std::printf("[ gemm fp8 ] M %4lld N %lld K %lld: in_gemm %7.1f us (%.2f TB/s)%s  epilogue %7.1f us (%.2f TB/s)  "
                  "bf16 %7.1f us (%.2f TB/s)\n",
                  (long long)M, (long long)N, (long long)K, t_in, tbs(t_in, 1), in_ok ? "" : " [refused]", t_ep,
                  tbs(t_ep, 1), t_bf, tbs(t_bf, 2));
      ASSERT_TRUE(ctx->arena().release(mark).ok());
    }
}

}  // namespace
}  // namespace day0
