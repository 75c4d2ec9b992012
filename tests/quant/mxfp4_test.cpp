// MXFP4 codec: decode against the E2M1 table and E8M0 scales, encode/decode round trips, and the CUDA
// decode kernel against the CPU decode (GPU machine only; skipped visibly elsewhere).
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "quant/mxfp4.h"

#include <cuda_runtime.h>

namespace day0 {
namespace {

const float kE2M1[16] = {0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0f, -0.5, -1, -1.5, -2, -3, -4, -6};

TEST(Mxfp4, decode_puts_even_elements_in_low_nibbles_and_scales_by_two_to_the_scale_minus_127) {
  std::vector<std::uint8_t> blocks(16), scales = {130};  // 2^3
  for (int b = 0; b < 16; ++b) blocks[b] = static_cast<std::uint8_t>(b | ((15 - b) << 4));
  std::vector<float> out(32);
  mxfp4_decode_row(blocks.data(), scales.data(), 32, out.data());
  for (int b = 0; b < 16; ++b) {
    EXPECT_EQ(out[2 * b], kE2M1[b] * 8.0f) << b;
    EXPECT_EQ(out[2 * b + 1], kE2M1[15 - b] * 8.0f) << b;
  }
}

TEST(Mxfp4, decode_covers_every_code_at_every_scale_exactly) {
  std::vector<std::uint8_t> blocks(16);
  for (int b = 0; b < 16; ++b) blocks[b] = static_cast<std::uint8_t>(b | (b << 4));
  std::vector<float> out(32);
  std::vector<std::uint16_t> out_bf16(32);
  for (int s = 0; s < 255; ++s) {  // 255 is E8M0's NaN code
    const std::uint8_t scale = static_cast<std::uint8_t>(s);
    mxfp4_decode_row(blocks.data(), &scale, 32, out.data());
    mxfp4_decode_row_bf16(blocks.data(), &scale, 32, out_bf16.data());
    for (int b = 0; b < 16; ++b) {
      double expected = std::ldexp(static_cast<double>(kE2M1[b]), s - 127);
      // Top scales overflow f32 (6 * 2^127 > FLT_MAX): such values decode to a signed infinity.
      if (std::fabs(expected) > 3.4028234663852886e38) expected = std::copysign(INFINITY, expected);
      ASSERT_EQ(static_cast<double>(out[2 * b]), expected) << "code " << b << " scale " << s;
      // Every MXFP4 value is exact in bf16 too.
      ASSERT_EQ(static_cast<double>(bf16_to_f32(out_bf16[2 * b])), expected) << "code " << b << " scale " << s;
    }
  }
}

TEST(Mxfp4, encode_then_decode_is_exact_for_values_already_on_the_grid) {
  std::mt19937 rng(7);
  std::vector<float> x(64);
  for (int g = 0; g < 2; ++g) {
    const int e = static_cast<int>(rng() % 40) - 20;
    for (int i = 0; i < 32; ++i) x[g * 32 + i] = std::ldexp(kE2M1[rng() % 16], e);
    x[g * 32] = std::ldexp(6.0f, e);  // pin the group maximum so the scale is 2^e
  }
  std::vector<std::uint8_t> blocks(32), scales(2);
  mxfp4_encode_row(x.data(), 64, blocks.data(), scales.data());
  std::vector<float> y(64);
  mxfp4_decode_row(blocks.data(), scales.data(), 64, y.data());
  for (int i = 0; i < 64; ++i) EXPECT_EQ(y[i], x[i]) << i;
}

TEST(Mxfp4, encode_picks_the_smallest_scale_that_fits_and_rounds_to_nearest) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.f, 3.f);
  std::vector<float> x(32 * 50);
  for (auto& v : x) v = normal(rng);
  std::vector<std::uint8_t> blocks(16 * 50), scales(50);
  mxfp4_encode_row(x.data(), static_cast<std::int64_t>(x.size()), blocks.data(), scales.data());
  std::vector<float> y(x.size());
  mxfp4_decode_row(blocks.data(), scales.data(), static_cast<std::int64_t>(x.size()), y.data());
  for (int g = 0; g < 50; ++g) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::fmax(amax, std::fabs(x[g * 32 + i]));
    const int e = scales[g] - 127;
    EXPECT_LE(amax, std::ldexp(6.0f, e)) << g;
    EXPECT_GT(amax, std::ldexp(6.0f, e - 1)) << g;
    for (int i = 0; i < 32; ++i) {
      // Grid spacing at the top of the range is 2^(e+1); nearest rounding is within half of it.
      EXPECT_LE(std::fabs(y[g * 32 + i] - x[g * 32 + i]), std::ldexp(1.0f, e)) << g << "," << i;
    }
  }
}

TEST(Mxfp4, encode_rounds_each_value_as_ldexp_then_nearest_at_every_group_exponent) {
  // The encoder divides by the group's 2^e with one multiply; ldexp per value is the reference. Groups from
  // subnormal maxima (e clamped at -127) to FLT_MAX (e = 126), values spread 2^-40 below their maximum, so the
  // scaled values reach f32's subnormals and the products round there.
  std::mt19937 rng(13);
  const int groups = 400;
  std::vector<float> x(32 * groups);
  for (int g = 0; g < groups; ++g) {
    const int top = static_cast<int>(rng() % 278) - 150;  // 2^-150 .. 2^127
    for (int i = 0; i < 32; ++i) {
      const float m = 1.f + static_cast<float>(rng() % 1000) / 1000.f;
      const float v = std::ldexp(m, top - static_cast<int>(rng() % 41));
      x[g * 32 + i] = std::isfinite(v) ? (rng() % 2 ? -v : v) : FLT_MAX;
    }
  }
  std::vector<std::uint8_t> blocks(16 * groups), scales(groups);
  mxfp4_encode_row(x.data(), static_cast<std::int64_t>(x.size()), blocks.data(), scales.data());
  for (int g = 0; g < groups; ++g) {
    const int e = scales[g] - 127;
    for (int i = 0; i < 32; ++i) {
      const std::uint8_t want = f32_to_fp4_e2m1(std::ldexp(x[g * 32 + i], -e));
      const std::uint8_t got = (blocks[g * 16 + i / 2] >> (4 * (i % 2))) & 0xF;
      ASSERT_EQ(got, want) << "group " << g << " value " << i << " = " << x[g * 32 + i] << ", e " << e;
    }
  }
}

TEST(Mxfp4Cuda, cuda_decode_matches_cpu_decode_bit_for_bit) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  std::mt19937 rng(3);
  for (auto [rows, n_in] : {std::pair<int, int>{1, 32}, {7, 96}, {33, 2880}}) {
    std::vector<std::uint8_t> blocks(rows * n_in / 2), scales(rows * n_in / 32);
    for (auto& b : blocks) b = static_cast<std::uint8_t>(rng());
    for (auto& s : scales) s = static_cast<std::uint8_t>(100 + rng() % 50);
    std::vector<std::uint16_t> expected(rows * n_in), got(rows * n_in, 0xFFFF);  // poisoned
    for (int r = 0; r < rows; ++r)
      mxfp4_decode_row_bf16(blocks.data() + r * n_in / 2, scales.data() + r * n_in / 32, n_in,
                            expected.data() + r * n_in);
    std::uint8_t *d_blocks, *d_scales;
    std::uint16_t* d_out;
    ASSERT_EQ(cudaMalloc(&d_blocks, blocks.size()), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d_scales, scales.size()), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d_out, got.size() * 2), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_blocks, blocks.data(), blocks.size(), cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_scales, scales.data(), scales.size(), cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_out, got.data(), got.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
    const Status st = mxfp4_decode_bf16_cuda(d_blocks, d_scales, rows, n_in, d_out, nullptr);
    ASSERT_TRUE(st.ok()) << st.error().message;
    ASSERT_EQ(cudaMemcpy(got.data(), d_out, got.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    cudaFree(d_blocks);
    cudaFree(d_scales);
    cudaFree(d_out);
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], expected[i]) << "rows " << rows << " element " << i;
  }
}

TEST(Mxfp4Cuda, cuda_decode_rejects_a_row_length_that_is_not_a_multiple_of_32) {
  const Status st = mxfp4_decode_bf16_cuda(nullptr, nullptr, 1, 33, nullptr, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("multiple of 32"), std::string::npos);
}

}  // namespace
}  // namespace day0
