// CUDA FP8 kernels against the CPU reference of quant/fp8_experts.h, bit for bit: the MXFP4 -> E4M3 conversion of
// selected experts (row scales, rows whose block exponents span more than 14 binades, the inexact count) and the
// gather + per-token quantisation of activations. Skipped visibly without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/op_test_util.h"
#include "quant/fp8_experts.h"
#include "quant/mxfp4.h"

namespace day0 {
namespace {

using cudatest::download;
using cudatest::download_flag;
using cudatest::make_context;
using cudatest::poisoned;
using cudatest::upload;
using cudatest::zeroed;

std::uint32_t bits_of(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

// Random MXFP4 experts whose rows stress the conversion: mostly scales near 2^0, one group in 16 anywhere in
// [0, 254] (so most 90-group rows span far more than 14 binades), some all-zero groups (their scales must not
// count), and every 7th row all zero.
ExpertWeights stress_experts(int E, int out, int in, std::mt19937& rng) {
  ExpertWeights w;
  w.n_experts = E, w.out = out, w.in = in;
  const std::int64_t groups = in / kMxfp4GroupSize;
  w.blocks = Tensor::zeros({E, out, groups, kMxfp4GroupBytes}, DType::u8);
  w.scales = Tensor::zeros({E, out, groups}, DType::u8);
  std::uint8_t* blocks = w.blocks.data<std::uint8_t>();
  std::uint8_t* scales = w.scales.data<std::uint8_t>();
  for (std::int64_t row = 0; row < std::int64_t(E) * out; ++row)
    for (std::int64_t g = 0; g < groups; ++g) {
      const std::int64_t i = row * groups + g;
      scales[i] = static_cast<std::uint8_t>(rng() % 16 == 0 ? rng() % 255 : 117 + rng() % 20);
      const bool zero = row % 7 == 3 || rng() % 10 == 0;
      for (int b = 0; b < kMxfp4GroupBytes; ++b)
        blocks[i * kMxfp4GroupBytes + b] = zero ? static_cast<std::uint8_t>(rng() % 2 ? 0x88 : 0) : rng();
    }
  return w;
}

TEST(CudaFp8Experts, converts_the_selected_experts_bit_exactly_with_power_of_two_row_scales) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(4001);
  struct Case { int E, out, in; std::vector<std::int32_t> ids; };
  // Odd row counts (partial 8-row blocks), one group per row, and a 2880 x 2880 slice of gpt-oss's experts;
  // ids repeat and come out of order: the workspace follows the list.
  for (const Case& c : {Case{4, 1, 32, {2}}, Case{8, 33, 96, {7, 0, 3}}, Case{3, 13, 1056, {1, 1}},
                        Case{4, 2880, 2880, {3, 0, 3, 1}}}) {
    SCOPED_TRACE("out " + std::to_string(c.out) + " in " + std::to_string(c.in));
    const ExpertWeights host = stress_experts(c.E, c.out, c.in, rng);
    ExpertWeights dev = host;
    dev.blocks = upload(*ctx, host.blocks);
    dev.scales = upload(*ctx, host.scales);
    const std::int64_t n = static_cast<std::int64_t>(c.ids.size()), groups = c.in / kMxfp4GroupSize;
    Tensor d_w = poisoned(*ctx, {n, c.out, c.in}, DType::f8_e4m3), d_s = poisoned(*ctx, {n, c.out}, DType::f32);
    Tensor flag = zeroed(*ctx, {1}, DType::i32), inexact = zeroed(*ctx, {1}, DType::u64);
    D0_ASSERT_OK(mxfp4_experts_to_fp8_cuda(dev, upload(*ctx, optest::i32_tensor(c.ids)), d_w, d_s, flag, ctx->stream(),
                                           &inexact));
    const Tensor got_w = download(*ctx, d_w), got_s = download(*ctx, d_s);
    EXPECT_EQ(download_flag(*ctx, flag), 0);
    std::vector<std::uint8_t> want(c.in);
    std::int64_t want_inexact = 0, wide_rows = 0;
    for (std::int64_t j = 0; j < n; ++j)
      for (std::int64_t r = 0; r < c.out; ++r) {
        const std::int64_t row = std::int64_t(c.ids[j]) * c.out + r;
        const std::uint8_t* b = host.blocks.data<std::uint8_t>() + row * groups * kMxfp4GroupBytes;
        const std::uint8_t* s = host.scales.data<std::uint8_t>() + row * groups;
        const Fp8Row info = mxfp4_row_to_fp8(b, s, c.in, want.data());
        want_inexact += info.inexact;
        wide_rows += info.inexact > 0;
        ASSERT_EQ(bits_of(got_s.data<float>()[j * c.out + r]), bits_of(info.scale)) << "slot " << j << " row " << r;
        const std::uint8_t* g = got_w.data<std::uint8_t>() + (j * c.out + r) * c.in;
        for (int i = 0; i < c.in; ++i)
          ASSERT_EQ(g[i], want[i]) << "slot " << j << " expert " << c.ids[j] << " row " << r << " col " << i;
      }
    EXPECT_EQ(download(*ctx, inexact).data<std::uint64_t>()[0], static_cast<std::uint64_t>(want_inexact));
    if (c.in >= 1056) {
      EXPECT_GT(wide_rows, 0) << "the case must include rows that do not convert exactly";
    }
    std::printf("[ fp8 conv ] out %d in %d: %lld of %lld values inexact (rows spanning > 14 binades: %lld)\n", c.out,
                c.in, static_cast<long long>(want_inexact), static_cast<long long>(n * c.out * c.in),
                static_cast<long long>(wide_rows));
  }
}

TEST(CudaFp8Experts, an_out_of_range_expert_id_is_clamped_and_raises_the_error_flag) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(4002);
  const ExpertWeights host = stress_experts(4, 8, 64, rng);
  ExpertWeights dev = host;
  dev.blocks = upload(*ctx, host.blocks);
  dev.scales = upload(*ctx, host.scales);
  Tensor d_w = poisoned(*ctx, {2, 8, 64}, DType::f8_e4m3), d_s = poisoned(*ctx, {2, 8}, DType::f32);
  Tensor flag = zeroed(*ctx, {1}, DType::i32);
  D0_ASSERT_OK(
      mxfp4_experts_to_fp8_cuda(dev, upload(*ctx, optest::i32_tensor({-1, 9})), d_w, d_s, flag, ctx->stream()));
  EXPECT_EQ(download_flag(*ctx, flag), 1);
  EXPECT_EQ(cudatest::count_nan(download(*ctx, d_s)), 0);  // still written (experts 0 and 3)
}

// E4M3's rounding boundaries (midpoints between codes) below 464: (2m + 1) 2^-10 among the subnormals, 2^e (1 +
// (2m + 1) / 16) from 2^-6 on.
std::vector<float> e4m3_boundaries() {
  std::vector<float> b;
  for (int m = 0; m < 8; ++m) b.push_back(std::ldexp(float(2 * m + 1), -10));
  for (int e = -6; e <= 8; ++e)
    for (int m = 0; m < 8; ++m)
      if (const float v = std::ldexp(1.0f + float(2 * m + 1) / 16.0f, e); v <= 464.0f) b.push_back(v);
  return b;
}

// A row whose quotients by its scale land on E4M3's rounding boundaries and up to 4 ulps either side (where a
// quotient a rounding off its exact value would take the other code), signs alternating; its first value sets the
// scale.
void fill_boundary_row(float* row, std::int64_t H, std::mt19937& rng) {
  static const std::vector<float> bounds = e4m3_boundaries();
  const float amax = 448.0f * std::ldexp(1.0f + float(rng() % 1024) / 1024.0f, static_cast<int>(rng() % 41) - 20);
  const float scale = amax / kE4m3Max;  // fp8_quantize_row's rule (a normal f32 here)
  row[0] = amax;
  for (std::int64_t c = 1; c < H; ++c) {
    float v = bounds[rng() % bounds.size()] * scale;
    for (int k = static_cast<int>(c % 9) - 4; k != 0; k += k > 0 ? -1 : 1)
      v = std::nextafter(v, k > 0 ? INFINITY : 0.0f);
    v = std::min(v, amax);  // amax stays the row's largest magnitude
    row[c] = c % 2 ? -v : v;
  }
}

// Rows of very different magnitudes (2^-40 .. 2^40), a zero row, a vanishing row (scale 1), a row holding NaNs
// of both signs, a row holding an infinity (scale inf, inf / inf = NaN) and rows of quotients at E4M3's rounding
// boundaries.
Tensor activation_rows(std::int64_t S, std::int64_t H, std::mt19937& rng) {
  Tensor x = optest::random_f32({S, H}, rng);
  float* v = x.data<float>();
  for (std::int64_t s = 0; s < S; ++s) {
    const float scale = std::ldexp(1.0f, static_cast<int>(rng() % 81) - 40);
    for (std::int64_t c = 0; c < H; ++c) v[s * H + c] *= scale;
  }
  if (S > 4) {
    for (std::int64_t c = 0; c < H; ++c) v[1 * H + c] = 0.0f, v[2 * H + c] = static_cast<float>(c % 3) * 1e-38f;
    v[3 * H + H / 2] = NAN;
    v[3 * H] = -NAN;
    v[4 * H + 1] = -INFINITY;
  }
  for (std::int64_t s = 5; s < std::min<std::int64_t>(S, 9); ++s) fill_boundary_row(v + s * H, H, rng);
  return x;
}

TEST(CudaFp8Quantize, gather_and_quantise_matches_fp8_quantize_row_bit_for_bit) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(4003);
  // 30 and 4,100: the scalar kernel (not a multiple of 4; past the float4 form's 4,096); the others float4s.
  for (std::int64_t H : {30, 32, 100, 2880, 4100})
    for (std::int64_t S : {1, 9, 130}) {
      SCOPED_TRACE("H " + std::to_string(H) + " S " + std::to_string(S));
      const Tensor x = activation_rows(S, H, rng);
      // Repeated and unordered rows, as an expert's token list after grouping; and the plain (identity) form.
      std::vector<std::int32_t> rows;
      for (std::int64_t r = 0; r < S + 3; ++r) rows.push_back(static_cast<std::int32_t>((r * 7 + 3) % S));
      const Tensor d_x = upload(*ctx, x);
      for (bool gather : {true, false}) {
        const std::int64_t n = gather ? std::int64_t(rows.size()) : S;
        Tensor d_q = poisoned(*ctx, {n, H}, DType::f8_e4m3), d_s = poisoned(*ctx, {n}, DType::f32);
        Tensor flag = zeroed(*ctx, {1}, DType::i32);
        D0_ASSERT_OK(gather_quantize_fp8_cuda(d_x, gather ? upload(*ctx, optest::i32_tensor(rows)) : Tensor(), d_q,
                                              d_s, flag, ctx->stream()));
        const Tensor got_q = download(*ctx, d_q), got_s = download(*ctx, d_s);
        EXPECT_EQ(download_flag(*ctx, flag), 0);
        std::vector<std::uint8_t> want(H);
        for (std::int64_t r = 0; r < n; ++r) {
          const std::int64_t src = gather ? rows[r] : r;
          const Fp8Row info = fp8_quantize_row(x.data<float>() + src * H, H, want.data());
          ASSERT_EQ(bits_of(got_s.data<float>()[r]), bits_of(info.scale)) << "gather " << gather << " row " << r;
          for (std::int64_t c = 0; c < H; ++c)
            ASSERT_EQ(got_q.data<std::uint8_t>()[r * H + c], want[c]) << "gather " << gather << " row " << r << " col " << c;
        }
      }
    }
}

// The staged order (the decode-sized FP8 GEMM's rows): the natural rows' codes moved as fp8_rows_to_staged moves
// them, the scales unchanged; widths of 1-4 groups in the last k-tile. A width not of whole groups is refused.
TEST(CudaFp8Quantize, the_staged_order_is_the_natural_rows_permuted) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(4007);
  for (std::int64_t H : {32, 96, 160, 256, 2880}) {
    SCOPED_TRACE("H " + std::to_string(H));
    const std::int64_t S = 5;
    const Tensor d_x = upload(*ctx, activation_rows(S, H, rng));
    Tensor q1 = poisoned(*ctx, {S, H}, DType::f8_e4m3), s1 = poisoned(*ctx, {S}, DType::f32);
    Tensor q2 = poisoned(*ctx, {S, H}, DType::f8_e4m3), s2 = poisoned(*ctx, {S}, DType::f32);
    Tensor flag = zeroed(*ctx, {1}, DType::i32);
    D0_ASSERT_OK(gather_quantize_fp8_cuda(d_x, Tensor(), q1, s1, flag, ctx->stream()));
    D0_ASSERT_OK(gather_quantize_fp8_cuda(d_x, Tensor(), q2, s2, flag, ctx->stream(), Fp8RowOrder::staged));
    const Tensor natural = download(*ctx, q1), staged = download(*ctx, q2);
    Tensor want = Tensor::zeros({S, H}, DType::f8_e4m3);
    fp8_rows_to_staged(natural.data<std::uint8_t>(), S, H, want.data<std::uint8_t>());
    EXPECT_EQ(std::memcmp(staged.raw(), want.raw(), want.nbytes()), 0);
    const Tensor a_s = download(*ctx, s1), b_s = download(*ctx, s2);
    EXPECT_EQ(std::memcmp(a_s.raw(), b_s.raw(), a_s.nbytes()), 0);
  }
  Tensor q = poisoned(*ctx, {2, 100}, DType::f8_e4m3), sc = poisoned(*ctx, {2}, DType::f32);
  Tensor flag = zeroed(*ctx, {1}, DType::i32);
  const Status st = gather_quantize_fp8_cuda(upload(*ctx, activation_rows(2, 100, rng)), Tensor(), q, sc, flag,
                                             ctx->stream(), Fp8RowOrder::staged);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("multiple of 32"), std::string::npos) << st.error().message;
}

// Two quantisations' codes and scales equal bit for bit, and most codes not zero (the inputs were not all
// quantised away).
void expect_same_nonzero_codes(CudaContext& ctx, const Tensor& q1, const Tensor& s1, const Tensor& q2,
                               const Tensor& s2) {
  const Tensor a_q = download(ctx, q1), a_s = download(ctx, s1);
  const Tensor b_q = download(ctx, q2), b_s = download(ctx, s2);
  EXPECT_EQ(std::memcmp(a_s.raw(), b_s.raw(), a_s.nbytes()), 0);
  EXPECT_EQ(std::memcmp(a_q.raw(), b_q.raw(), a_q.nbytes()), 0);
  std::int64_t nonzero = 0;
  for (std::int64_t i = 0; i < b_q.numel(); ++i) nonzero += (b_q.data<std::uint8_t>()[i] & 0x7F) != 0;
  EXPECT_GT(nonzero, b_q.numel() / 2);
}

TEST(CudaFp8Quantize, fused_epilogue_swiglu_quantise_equals_the_three_kernels_bit_for_bit) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(4005);
  std::uniform_real_distribution<float> gemm_out(-3000.f, 3000.f), scale(1e-4f, 4e-3f), b(-2.f, 2.f);
  for (const std::int64_t I : {48, 2880})
    for (const std::int64_t n : {1, 37})
      for (const int bias_kind : {0, 1, 2})  // none, f32, bf16
        for (const bool interleaved : {true, false}) {
          SCOPED_TRACE(::testing::Message() << "I " << I << " n " << n << " bias " << bias_kind << " interleaved "
                                            << interleaved);
          Tensor gu = Tensor::zeros({n, 2 * I}, DType::f32), sx = Tensor::zeros({n}, DType::f32);
          Tensor sw = Tensor::zeros({2 * I}, DType::f32), bias = Tensor::zeros({2 * I}, DType::f32);
          for (std::int64_t i = 0; i < gu.numel(); ++i) gu.data<float>()[i] = gemm_out(rng);
          for (std::int64_t i = 0; i < n; ++i) sx.data<float>()[i] = scale(rng);
          for (std::int64_t i = 0; i < 2 * I; ++i) sw.data<float>()[i] = scale(rng), bias.data<float>()[i] = b(rng);
          if (n > 1) gu.data<float>()[2 * I] = NAN;  // a NaN in the GEMM output: both paths must treat it alike
          Tensor d_bias;
          if (bias_kind == 1) d_bias = upload(*ctx, bias);
          if (bias_kind == 2) d_bias = upload(*ctx, optest::to_bf16(bias));
          SwigluParams p;
          p.interleaved = interleaved;
          const Tensor d_sx = upload(*ctx, sx), d_sw = upload(*ctx, sw);
          // The three kernels: epilogue in place, SwiGLU, quantise.
          Tensor y = upload(*ctx, gu), h = poisoned(*ctx, {n, I}, DType::f32);
          Tensor q1 = poisoned(*ctx, {n, I}, DType::f8_e4m3), s1 = poisoned(*ctx, {n}, DType::f32);
          Tensor flag = zeroed(*ctx, {1}, DType::i32);
          D0_ASSERT_OK(fp8_gemm_epilogue_cuda(y, d_sx, d_sw, d_bias, ctx->stream()));
          D0_ASSERT_OK(swiglu_clamped_cuda(y, p, h, ctx->stream()));
          D0_ASSERT_OK(gather_quantize_fp8_cuda(h, Tensor(), q1, s1, flag, ctx->stream()));
          // The fused kernel on the unscaled output.
          Tensor q2 = poisoned(*ctx, {n, I}, DType::f8_e4m3), s2 = poisoned(*ctx, {n}, DType::f32);
          D0_ASSERT_OK(swiglu_quantize_fp8_cuda(upload(*ctx, gu), d_sx, d_sw, d_bias, p, q2, s2, ctx->stream()));
          expect_same_nonzero_codes(*ctx, q1, s1, q2, s2);
        }
}

TEST(CudaFp8Quantize, gathered_swiglu_quantise_equals_swiglu_then_gather_quantise_bit_for_bit) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(4006);
  std::uniform_real_distribution<float> pre(-12.f, 12.f);  // past the clamp (7) both ways
  for (const std::int64_t I : {48, 2880, 4096})
    for (const std::int64_t S : {1, 37})
      for (const bool interleaved : {true, false}) {
        SCOPED_TRACE(::testing::Message() << "I " << I << " S " << S << " interleaved " << interleaved);
        Tensor gu = Tensor::zeros({S, 2 * I}, DType::f32);
        for (std::int64_t i = 0; i < gu.numel(); ++i) gu.data<float>()[i] = pre(rng);
        if (S > 1) gu.data<float>()[2 * I + 5] = NAN;  // a NaN in the GEMM output: both paths must treat it alike
        std::vector<std::int32_t> rows;  // repeated and unordered, as entries' assignments
        for (std::int64_t r = 0; r < S + 3; ++r) rows.push_back(static_cast<std::int32_t>((r * 7 + 3) % S));
        const std::int64_t n = static_cast<std::int64_t>(rows.size());
        SwigluParams p;
        p.interleaved = interleaved;
        const Tensor d_gu = upload(*ctx, gu), d_rows = upload(*ctx, optest::i32_tensor(rows));
        Tensor h = poisoned(*ctx, {S, I}, DType::f32), flag = zeroed(*ctx, {1}, DType::i32);
        Tensor q1 = poisoned(*ctx, {n, I}, DType::f8_e4m3), s1 = poisoned(*ctx, {n}, DType::f32);
        D0_ASSERT_OK(swiglu_clamped_cuda(d_gu, p, h, ctx->stream()));
        D0_ASSERT_OK(gather_quantize_fp8_cuda(h, d_rows, q1, s1, flag, ctx->stream()));
        Tensor q2 = poisoned(*ctx, {n, I}, DType::f8_e4m3), s2 = poisoned(*ctx, {n}, DType::f32);
        D0_ASSERT_OK(gather_swiglu_quantize_fp8_cuda(d_gu, d_rows, p, q2, s2, flag, ctx->stream()));
        EXPECT_EQ(download_flag(*ctx, flag), 0);
        expect_same_nonzero_codes(*ctx, q1, s1, q2, s2);
      }
}

TEST(CudaFp8Quantize, gathered_swiglu_quantise_refuses_a_width_it_cannot_hold_and_flags_a_bad_row) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(4007);
  SwigluParams p;
  p.interleaved = true;
  Tensor flag = zeroed(*ctx, {1}, DType::i32);
  {  // I = 30: not a multiple of 4
    Tensor q = poisoned(*ctx, {2, 30}, DType::f8_e4m3), s = poisoned(*ctx, {2}, DType::f32);
    const Status st = gather_swiglu_quantize_fp8_cuda(upload(*ctx, optest::random_f32({2, 60}, rng)), Tensor(), p, q,
                                                      s, flag, ctx->stream());
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message.find("multiple of 4"), std::string::npos) << st.error().message;
  }
  Tensor q = poisoned(*ctx, {2, 64}, DType::f8_e4m3), s = poisoned(*ctx, {2}, DType::f32);
  D0_ASSERT_OK(gather_swiglu_quantize_fp8_cuda(upload(*ctx, optest::random_f32({3, 128}, rng)),
                                               upload(*ctx, optest::i32_tensor({5, -2})), p, q, s, flag,
                                               ctx->stream()));
  EXPECT_EQ(download_flag(*ctx, flag), 1);
  EXPECT_EQ(cudatest::count_nan(download(*ctx, s)), 0);
}

// Each token quantised once into its entries' rows equals the gather by the grouping's rows, bit for bit; an entry
// of -1 leaves nothing, one past the output flags and stores nothing.
TEST(CudaFp8Quantize, quantise_scatter_by_entries_equals_the_gather_by_rows_bit_for_bit) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(4008);
  for (std::int64_t H : {32, 2880, 4096})
    for (std::int64_t S : {1, 9, 130}) {
      SCOPED_TRACE("H " + std::to_string(H) + " S " + std::to_string(S));
      const int k = 4;
      const Tensor x = activation_rows(S, H, rng);
      // A permutation of the S k assignments as the entries, the last assignment left ungrouped (-1).
      std::vector<std::int32_t> entries(static_cast<size_t>(S * k));
      for (std::int64_t a = 0; a < S * k; ++a) entries[a] = static_cast<std::int32_t>(a);
      std::shuffle(entries.begin(), entries.end(), rng);
      const std::int64_t n = S * k;
      std::vector<std::int32_t> rows(static_cast<size_t>(n), 0);
      for (std::int64_t a = 0; a < S * k; ++a) rows[entries[a]] = static_cast<std::int32_t>(a / k);
      const std::int32_t unused = entries.back();
      entries.back() = -1;
      const Tensor d_x = upload(*ctx, x);
      Tensor q1 = poisoned(*ctx, {n, H}, DType::f8_e4m3), s1 = poisoned(*ctx, {n}, DType::f32);
      Tensor q2 = poisoned(*ctx, {n, H}, DType::f8_e4m3), s2 = poisoned(*ctx, {n}, DType::f32);
      Tensor flag = zeroed(*ctx, {1}, DType::i32);
      D0_ASSERT_OK(gather_quantize_fp8_cuda(d_x, upload(*ctx, optest::i32_tensor(rows)), q1, s1, flag, ctx->stream()));
      D0_ASSERT_OK(quantize_scatter_fp8_cuda(d_x, upload(*ctx, optest::i32_tensor(entries)).view({S, k}), q2, s2, flag,
                                             ctx->stream()));
      EXPECT_EQ(download_flag(*ctx, flag), 0);
      // The unnamed row stays as poisoned: give both sides its gathered bits before comparing the rest.
      Tensor g_q = download(*ctx, q1), g_s = download(*ctx, s1), c_q = download(*ctx, q2), c_s = download(*ctx, s2);
      const Tensor poison_row = download(*ctx, poisoned(*ctx, {1, H}, DType::f8_e4m3));
      EXPECT_EQ(std::memcmp(c_q.data<std::uint8_t>() + unused * H, poison_row.raw(), H), 0);
      std::memcpy(c_q.data<std::uint8_t>() + unused * H, g_q.data<std::uint8_t>() + unused * H, H);
      c_s.data<float>()[unused] = g_s.data<float>()[unused];
      EXPECT_EQ(std::memcmp(g_s.raw(), c_s.raw(), g_s.nbytes()), 0);
      EXPECT_EQ(std::memcmp(g_q.raw(), c_q.raw(), g_q.nbytes()), 0);
    }
  Tensor q = poisoned(*ctx, {2, 64}, DType::f8_e4m3), s = poisoned(*ctx, {2}, DType::f32);
  Tensor flag = zeroed(*ctx, {1}, DType::i32);
  D0_ASSERT_OK(quantize_scatter_fp8_cuda(upload(*ctx, optest::random_f32({1, 64}, rng)),
                                         upload(*ctx, optest::i32_tensor({1, 2})).view({1, 2}), q, s, flag,
                                         ctx->stream()));
  EXPECT_EQ(download_flag(*ctx, flag), 1);
  EXPECT_EQ(cudatest::count_nan(download(*ctx, s)), 1) << "row 1 written, row 2 (past the end) not, row 0 poisoned";
}

TEST(CudaFp8Quantize, an_out_of_range_row_is_clamped_and_raises_the_error_flag) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(4004);
  Tensor d_q = poisoned(*ctx, {2, 64}, DType::f8_e4m3), d_s = poisoned(*ctx, {2}, DType::f32);
  Tensor flag = zeroed(*ctx, {1}, DType::i32);
  D0_ASSERT_OK(gather_quantize_fp8_cuda(upload(*ctx, optest::random_f32({3, 64}, rng)),
                                        upload(*ctx, optest::i32_tensor({5, -2})), d_q, d_s, flag, ctx->stream()));
  EXPECT_EQ(download_flag(*ctx, flag), 1);
  EXPECT_EQ(cudatest::count_nan(download(*ctx, d_s)), 0);
}

}  // namespace
}  // namespace day0
