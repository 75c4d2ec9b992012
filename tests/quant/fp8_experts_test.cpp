// FP8 E4M3 with per-row scales (quant/fp8_experts.h): the MXFP4 -> FP8 weight rule (row exponent, exactness
// within 14 binades, counted round-to-nearest-even below), the per-token activation quantisation, the decode,
// and the kernels' helpers (quant/e4m3_rne.h, quant/mxfp4_to_fp8_table.h) against the reference on the CPU.
#include "quant/fp8_experts.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "quant/e2m1_to_e4m3.h"
#include "quant/e4m3_rne.h"
#include "quant/mxfp4.h"
#include "quant/mxfp4_to_fp8_table.h"

namespace day0 {
namespace {

// One MXFP4 row: random nibbles, the given scale code per group.
struct Row {
  std::vector<std::uint8_t> blocks, scales;
  std::int64_t n_in() const { return static_cast<std::int64_t>(scales.size()) * kMxfp4GroupSize; }
};

Row random_row(const std::vector<int>& scale_codes, std::mt19937& rng) {
  Row r;
  r.scales.assign(scale_codes.begin(), scale_codes.end());
  r.blocks.resize(scale_codes.size() * kMxfp4GroupBytes);
  for (auto& b : r.blocks) b = static_cast<std::uint8_t>(rng());
  return r;
}

std::vector<float> mxfp4_values(const Row& r) {
  std::vector<float> v(r.n_in());
  mxfp4_decode_row(r.blocks.data(), r.scales.data(), r.n_in(), v.data());
  return v;
}

std::vector<float> fp8_values(const Row& r, Fp8Row* info = nullptr) {
  std::vector<std::uint8_t> q(r.n_in());
  const Fp8Row row = mxfp4_row_to_fp8(r.blocks.data(), r.scales.data(), r.n_in(), q.data());
  if (info) *info = row;
  std::vector<float> v(r.n_in());
  fp8_decode_row(q.data(), row.scale, r.n_in(), v.data());
  return v;
}

std::uint32_t bits_of(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

TEST(Fp8Experts, row_exponent_is_the_largest_nonzero_block_exponent_minus_six) {
  std::mt19937 rng(1);
  Row r = random_row({127, 130, 120, 140}, rng);
  // Group 3 (exponent 13) is all zeros, -0 included: it does not count.
  for (int i = 0; i < kMxfp4GroupBytes; ++i) r.blocks[3 * kMxfp4GroupBytes + i] = i % 2 ? 0x88 : 0x00;
  r.blocks[kMxfp4GroupBytes] |= 0x07;  // group 1 (exponent 3) surely non-zero
  EXPECT_EQ(mxfp4_row_fp8_exponent(r.blocks.data(), r.scales.data(), r.n_in()), 3 - kFp8RowExponentShift);
  Fp8Row info;
  const std::vector<float> got = fp8_values(r, &info);
  EXPECT_EQ(info.scale, std::ldexp(1.0f, 3 - 6));
  // The largest value, 6 * 2^3, is 384 in E4M3 units: inside 448.
  const std::vector<float> want = mxfp4_values(r);
  for (std::int64_t i = 0; i < r.n_in(); ++i) ASSERT_EQ(bits_of(got[i]), bits_of(want[i])) << i;
}

TEST(Fp8Experts, an_all_zero_row_has_scale_one_and_converts_to_signed_zeros) {
  Row r{std::vector<std::uint8_t>(32, 0x80), {200, 3}};
  std::vector<std::uint8_t> q(64);
  const Fp8Row row = mxfp4_row_to_fp8(r.blocks.data(), r.scales.data(), 64, q.data());
  EXPECT_EQ(row.scale, 1.0f);
  EXPECT_EQ(row.inexact, 0);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(q[i], i % 2 ? 0x80 : 0x00) << i;  // -0 in the high nibbles
}

TEST(Fp8Experts, conversion_is_bit_exact_whenever_block_exponents_span_at_most_14_binades) {
  std::mt19937 rng(2);
  // Every base scale code, spans 0..14, a few rows each: the decoded FP8 row equals the MXFP4 decode bit for bit.
  for (int base = 0; base + kFp8ExactBinades <= 254; ++base)
    for (int span = 0; span <= kFp8ExactBinades; ++span) {
      std::vector<int> codes(6);
      for (auto& c : codes) c = base + static_cast<int>(rng() % (span + 1));
      codes[0] = base, codes[5] = base + span;  // the span is reached
      Row r = random_row(codes, rng);
      r.blocks[0] |= 0x01, r.blocks[5 * kMxfp4GroupBytes] |= 0x01;  // both ends non-zero
      Fp8Row info;
      const std::vector<float> got = fp8_values(r, &info), want = mxfp4_values(r);
      ASSERT_EQ(info.inexact, 0) << "base " << base << " span " << span;
      for (std::int64_t i = 0; i < r.n_in(); ++i)
        ASSERT_EQ(bits_of(got[i]), bits_of(want[i])) << "base " << base << " span " << span << " at " << i;
    }
}

TEST(Fp8Experts, blocks_more_than_14_binades_down_round_to_nearest_even_and_are_counted) {
  std::mt19937 rng(3);
  for (int drop : {15, 16, 17, 19, 24, 40, 120}) {
    Row r = random_row({127, 127 - drop, 127 - drop / 2}, rng);
    r.blocks[0] |= 0x07;  // the top block holds a 6: R = -6, E4M3 subnormal unit 2^(R - 9) = 2^-15
    Fp8Row info;
    const std::vector<float> got = fp8_values(r, &info), want = mxfp4_values(r);
    ASSERT_EQ(info.scale, std::ldexp(1.0f, -6));
    std::int64_t inexact = 0;
    for (std::int64_t i = 0; i < r.n_in(); ++i) {
      const double unit = std::ldexp(1.0, -15);
      // An independent rounding: nearest multiple of the subnormal unit, ties to even (default FE_TONEAREST).
      const double rounded = want[i] == 0 ? 0.0 : std::nearbyint(double(want[i]) / unit) * unit;
      const bool subnormal_range = std::fabs(double(want[i])) < std::ldexp(1.0, -6 - 6);
      if (subnormal_range) {
        ASSERT_EQ(double(got[i]), rounded) << "drop " << drop << " at " << i << " value " << want[i];
        ASSERT_EQ(std::signbit(got[i]), std::signbit(want[i])) << "sign kept, zero included";
      } else {
        ASSERT_EQ(got[i], want[i]) << "drop " << drop << " at " << i;
      }
      inexact += got[i] != want[i];
    }
    EXPECT_EQ(info.inexact, inexact) << "drop " << drop;
    EXPECT_GT(info.inexact, 0) << "drop " << drop << ": the low block must lose something";
  }
}

TEST(Fp8Experts, encoded_gaussian_weights_round_trip_exactly_through_fp8) {
  // Weights as mxfp4_encode_row makes them (and as checkpoints look): block exponents within a few binades.
  std::mt19937 rng(4);
  std::normal_distribution<float> normal(0.f, 0.02f);
  const int n_in = 2880;
  std::vector<float> x(n_in);
  std::vector<std::uint8_t> blocks(n_in / 2), scales(n_in / 32), q(n_in);
  std::int64_t inexact = 0;
  for (int rep = 0; rep < 64; ++rep) {
    for (auto& v : x) v = normal(rng);
    mxfp4_encode_row(x.data(), n_in, blocks.data(), scales.data());
    const Row r{blocks, scales};
    Fp8Row info;
    const std::vector<float> got = fp8_values(r, &info), want = mxfp4_values(r);
    inexact += info.inexact;
    for (int i = 0; i < n_in; ++i) ASSERT_EQ(got[i], want[i]) << rep << "," << i;
  }
  EXPECT_EQ(inexact, 0);
}

TEST(Fp8Experts, activation_rows_scale_by_amax_over_448_and_round_each_value_to_nearest) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (int rep = 0; rep < 200; ++rep) {
    const int n = 1 + static_cast<int>(rng() % 3000);
    const float spread = std::ldexp(1.0f, static_cast<int>(rng() % 60) - 30);
    std::vector<float> x(n), back(n);
    for (auto& v : x) v = normal(rng) * spread;
    std::vector<std::uint8_t> q(n);
    const Fp8Row row = fp8_quantize_row(x.data(), n, q.data());
    float amax = 0;
    for (float v : x) amax = std::fmax(amax, std::fabs(v));
    ASSERT_EQ(row.scale, amax / 448.0f);
    fp8_decode_row(q.data(), row.scale, n, back.data());
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(q[i], f32_to_e4m3(x[i] / row.scale));
      if (std::fabs(x[i]) == amax) {
        EXPECT_EQ(q[i] & 0x7F, 0x7E) << "the amax element is +-448";
      }
      // Half an E4M3 ulp: 2^-4 relative for normals, 2^-10 * scale below 2^-6 * scale; plus the f32 product.
      const double bound = std::fmax(std::fabs(x[i]) * 0x1p-4, row.scale * 0x1p-10) * (1 + 1e-6);
      ASSERT_LE(std::fabs(double(back[i]) - x[i]), bound) << rep << "," << i;
    }
  }
}

TEST(Fp8Experts, zero_and_vanishing_activation_rows_get_scale_one_and_nan_becomes_the_positive_nan_code) {
  std::vector<std::uint8_t> q(4);
  const float zeros[4] = {0.f, -0.f, 0.f, 0.f};
  EXPECT_EQ(fp8_quantize_row(zeros, 4, q.data()).scale, 1.0f);
  EXPECT_EQ(q[1], 0x80);
  // amax / 448 would be subnormal: scale 1, and every value is far below E4M3's 2^-10 rounding edge.
  const float tiny[4] = {1e-37f, -3e-38f, 0.f, 5e-39f};
  EXPECT_EQ(fp8_quantize_row(tiny, 4, q.data()).scale, 1.0f);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(q[i] & 0x7F, 0) << i;
  const float nan_row[4] = {1.f, NAN, -2.f, -NAN};
  EXPECT_EQ(fp8_quantize_row(nan_row, 4, q.data()).scale, 2.0f / 448.0f) << "NaN does not move the scale";
  EXPECT_EQ(q[1], 0x7F) << "NaN stays NaN, positive";
  EXPECT_EQ(q[3], 0x7F) << "NaN stays NaN, positive";
  const float inf_row[2] = {-INFINITY, 1.f};
  EXPECT_EQ(fp8_quantize_row(inf_row, 2, q.data()).scale, INFINITY);
  EXPECT_EQ(q[0], 0x7F) << "inf / inf";
  EXPECT_EQ(q[1], 0x00);
}

// The one-token kernels' decode (e2m1_to_e4m3.h): every nibble in every position of a word becomes the E4M3 code of
// its E2M1 value times 2^-6, sign included (-0 stays -0), whatever the other nibbles hold: byte b of the low codes
// holds value 2b of the word, of the high codes value 2b + 1.
TEST(Fp8Experts, e2m1_words_decode_to_e4m3_codes_of_each_value_times_2_to_the_minus_6) {
  const auto check = [](std::uint32_t w) {
    const std::uint32_t low = e2m1_low_to_e4m3x4(w), high = e2m1_high_to_e4m3x4(w);
    for (int v = 0; v < 8; ++v) {  // value v of the word: nibble v
      const std::uint32_t codes = v % 2 == 0 ? low : high;
      const float got = e4m3_to_f32(static_cast<std::uint8_t>(codes >> (8 * (v / 2))));
      const float want = fp4_e2m1_to_f32(static_cast<std::uint8_t>((w >> (4 * v)) & 0xF)) * 0x1p-6f;
      if (got != want || std::signbit(got) != std::signbit(want)) return testing::AssertionFailure()
             << std::hex << "word " << w << " value " << v << ": " << got << " != " << want;
    }
    return testing::AssertionSuccess();
  };
  std::mt19937 rng(7);
  for (int rep = 0; rep < 4096; ++rep) ASSERT_TRUE(check(static_cast<std::uint32_t>(rng())));
  for (std::uint32_t n = 0; n < 16; ++n)  // each nibble alone, in each of the 8 positions, the rest all ones / zeros
    for (int i = 0; i < 8; ++i) {
      EXPECT_TRUE(check((0xFFFFFFFFu & ~(0xFu << (4 * i))) | (n << (4 * i))));
      EXPECT_TRUE(check(n << (4 * i)));
    }
}

TEST(Fp8Experts, device_rounding_helper_equals_f32_to_e4m3_on_every_tested_bit_pattern) {
  // All patterns whose low 9 mantissa bits are a few values around rounding edges, plus random ones.
  std::int64_t checked = 0;
  for (std::uint64_t hi = 0; hi < (1u << 23); ++hi)
    for (std::uint32_t lo : {0u, 1u, 0xFFu, 0x100u, 0x1FFu}) {
      const std::uint32_t bits = static_cast<std::uint32_t>(hi << 9) | lo;
      float x;
      std::memcpy(&x, &bits, sizeof x);
      ASSERT_EQ(e4m3_rne(x), f32_to_e4m3(x)) << std::hex << bits;
      ++checked;
    }
  std::mt19937 rng(6);
  for (int i = 0; i < 1000000; ++i) {
    const std::uint32_t bits = rng();
    float x;
    std::memcpy(&x, &bits, sizeof x);
    ASSERT_EQ(e4m3_rne(x), f32_to_e4m3(x)) << std::hex << bits;
  }
  EXPECT_GT(checked, 40000000);
}

TEST(Fp8Experts, the_kernels_table_lookup_equals_the_reference_for_every_shift) {
  // The CUDA kernel's path: row exponent, then per group an 8-entry code table (the shift clamped), looked up
  // per nibble and per packed word (prmt).
  std::mt19937 rng(7);
  for (int top : {0, 1, 60, 127, 200, 254})
    for (int low = 0; low <= top; ++low) {
      Row r = random_row({top, low, top - (top - low) / 2}, rng);
      r.blocks[0] |= 0x01;
      std::vector<std::uint8_t> want(r.n_in());
      const Fp8Row info = mxfp4_row_to_fp8(r.blocks.data(), r.scales.data(), r.n_in(), want.data());
      const int row_exponent = mxfp4_row_fp8_exponent(r.blocks.data(), r.scales.data(), r.n_in());
      ASSERT_EQ(info.scale, std::ldexp(1.0f, row_exponent));
      std::int64_t inexact = 0, word_inexact = 0;
      for (std::int64_t i = 0; i < r.n_in(); ++i) {
        const Mxfp4Fp8Table t = mxfp4_fp8_table(r.scales[i / kMxfp4GroupSize] - 127 - row_exponent);
        const std::uint32_t nibble = i % 2 == 0 ? r.blocks[i / 2] & 0xF : r.blocks[i / 2] >> 4;
        ASSERT_EQ(mxfp4_fp8_code(nibble, t), want[i]) << "top " << top << " low " << low << " at " << i;
        inexact += mxfp4_fp8_inexact(nibble, t);
      }
      ASSERT_EQ(inexact, info.inexact) << "top " << top << " low " << low;
      // The kernel's word form: clamped shift, byte tables, eight nibbles per packed word by prmt.
      for (std::int64_t i = 0; i < r.n_in(); i += 8) {
        const int shift = r.scales[i / kMxfp4GroupSize] - 127 - row_exponent;
        const Mxfp4Fp8Bytes t = mxfp4_fp8_bytes(mxfp4_fp8_table(mxfp4_fp8_clamped_shift(shift)));
        std::uint32_t word, lo, hi;
        std::memcpy(&word, &r.blocks[i / 2], sizeof word);
        word_inexact += mxfp4_word_to_fp8(word, t, lo, hi);
        std::uint8_t got[8];
        std::memcpy(got, &lo, 4);
        std::memcpy(got + 4, &hi, 4);
        for (int j = 0; j < 8; ++j)
          ASSERT_EQ(got[j], want[i + j]) << "top " << top << " low " << low << " at " << i + j;
      }
      ASSERT_EQ(word_inexact, info.inexact) << "top " << top << " low " << low;
    }
}

}  // namespace
}  // namespace day0
