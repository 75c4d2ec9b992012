// DType metadata and the exact scalar conversions of core/dtype.h.
//
// Every conversion is checked against an oracle that does not share the implementation's code path:
// decoders against values built from sign/exponent/mantissa with std::ldexp in double, encoders against
// "nearest entry of the table of all representable values, ties to the even code" computed in double.
// Where the format is small enough the checks are exhaustive.
#include "core/dtype.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <set>
#include <string>
#include <vector>

namespace day0 {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::uint32_t bits(float x) { return std::bit_cast<std::uint32_t>(x); }
float from_bits(std::uint32_t b) { return std::bit_cast<float>(b); }
bool sign_of(float x) { return std::signbit(x); }

std::string hex(std::uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// Compares bit patterns, so -0 vs +0 and NaN payloads count, and prints both in hex.
::testing::AssertionResult same_bits(float got, float want) {
  if (bits(got) == bits(want)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got " << got << " (" << hex(bits(got)) << "), want " << want << " ("
                                       << hex(bits(want)) << ")";
}

// The oracle's double value, converted to float. Every value the oracles produce is exactly representable
// in f32; the check makes sure the oracle itself never rounds.
float exact_float(double d) {
  const float f = static_cast<float>(d);
  EXPECT_TRUE(std::isnan(d) || static_cast<double>(f) == d) << d << " is not exact in f32";
  return f;
}

// ---- decoding oracles: value = (-1)^s * significand * 2^exponent, built with ldexp in double ----

// An IEEE-style binary format with `exp_bits` exponent bits, `mant_bits` mantissa bits and bias `bias`.
// `ieee_specials`: the all-ones exponent is inf/NaN (f16, bf16, e5m2). Otherwise it is an ordinary binade
// and only the all-ones code is NaN (e4m3 "fn").
double decode_oracle(std::uint32_t code, int exp_bits, int mant_bits, int bias, bool ieee_specials) {
  const bool negative = (code >> (exp_bits + mant_bits)) & 1;
  const int e = static_cast<int>((code >> mant_bits) & ((1u << exp_bits) - 1));
  const int m = static_cast<int>(code & ((1u << mant_bits) - 1));
  const int e_max = (1 << exp_bits) - 1;
  double magnitude;
  if (ieee_specials && e == e_max) {
    magnitude = m == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else if (!ieee_specials && e == e_max && m == (1 << mant_bits) - 1) {
    magnitude = std::numeric_limits<double>::quiet_NaN();
  } else if (e == 0) {
    magnitude = std::ldexp(static_cast<double>(m), 1 - bias - mant_bits);  // subnormal: 0.m * 2^(1-bias)
  } else {
    magnitude = std::ldexp(static_cast<double>((1 << mant_bits) + m), e - bias - mant_bits);  // 1.m * 2^(e-bias)
  }
  return negative ? -magnitude : magnitude;
}

double bf16_oracle(std::uint16_t c) { return decode_oracle(c, 8, 7, 127, true); }
double f16_oracle(std::uint16_t c) { return decode_oracle(c, 5, 10, 15, true); }
double e4m3_oracle(std::uint8_t c) { return decode_oracle(c, 4, 3, 7, false); }
double e5m2_oracle(std::uint8_t c) { return decode_oracle(c, 5, 2, 15, true); }

// ---- encoding oracle ----

// `values[i]` is the magnitude of positive code i (ascending, consecutive codes). Returns the code nearest
// to `a` >= 0, ties to the even code, or values.size() when `a` is beyond the last value. Tables may end
// with the value the next code would have with an unbounded exponent range (2^16 for f16, 480 for e4m3),
// so reaching that index means "overflow". All differences here are exact in double.
std::uint32_t nearest_code_oracle(const std::vector<double>& values, double a) {
  const auto it = std::lower_bound(values.begin(), values.end(), a);
  if (it == values.end()) return static_cast<std::uint32_t>(values.size());
  const auto hi = static_cast<std::uint32_t>(it - values.begin());
  if (*it == a || hi == 0) return hi;
  const std::uint32_t lo = hi - 1;
  const double below = a - values[lo];
  const double above = values[hi] - a;
  if (below < above) return lo;
  if (above < below) return hi;
  return (lo % 2 == 0) ? lo : hi;
}

// Magnitudes of positive codes 0..last_code, plus `next_value` (the virtual code last_code + 1).
template <class Decode>
std::vector<double> value_table(std::uint32_t last_code, double next_value, Decode decode) {
  std::vector<double> v;
  for (std::uint32_t c = 0; c <= last_code; ++c) v.push_back(decode(c));
  v.push_back(next_value);
  return v;
}

// A stride through all 2^32 f32 bit patterns (both signs, every exponent); 9973 is prime, so the low bits
// vary too. About 430k samples.
constexpr std::uint64_t kF32Stride = 9973;

// ======================================================================================= DType metadata

constexpr DType kAllDTypes[] = {
    DType::f64,  DType::f32, DType::f16, DType::bf16, DType::f8_e4m3, DType::f8_e5m2,
    DType::e8m0, DType::fp4_e2m1, DType::i64, DType::i32, DType::i16, DType::i8,
    DType::u64,  DType::u32, DType::u16, DType::u8, DType::boolean,
};

TEST(DTypeInfo, bits_are_the_element_widths) {
  EXPECT_EQ(dtype_bits(DType::f64), 64);
  EXPECT_EQ(dtype_bits(DType::f32), 32);
  EXPECT_EQ(dtype_bits(DType::f16), 16);
  EXPECT_EQ(dtype_bits(DType::bf16), 16);
  EXPECT_EQ(dtype_bits(DType::f8_e4m3), 8);
  EXPECT_EQ(dtype_bits(DType::f8_e5m2), 8);
  EXPECT_EQ(dtype_bits(DType::e8m0), 8);
  EXPECT_EQ(dtype_bits(DType::fp4_e2m1), 4);
  EXPECT_EQ(dtype_bits(DType::i64), 64);
  EXPECT_EQ(dtype_bits(DType::i32), 32);
  EXPECT_EQ(dtype_bits(DType::i16), 16);
  EXPECT_EQ(dtype_bits(DType::i8), 8);
  EXPECT_EQ(dtype_bits(DType::u64), 64);
  EXPECT_EQ(dtype_bits(DType::u32), 32);
  EXPECT_EQ(dtype_bits(DType::u16), 16);
  EXPECT_EQ(dtype_bits(DType::u8), 8);
  EXPECT_EQ(dtype_bits(DType::boolean), 8);
}

TEST(DTypeInfo, is_float_holds_exactly_for_the_floating_point_formats) {
  for (DType t : {DType::f64, DType::f32, DType::f16, DType::bf16, DType::f8_e4m3, DType::f8_e5m2, DType::e8m0,
                  DType::fp4_e2m1})
    EXPECT_TRUE(dtype_is_float(t)) << dtype_name(t);
  for (DType t : {DType::i64, DType::i32, DType::i16, DType::i8, DType::u64, DType::u32, DType::u16, DType::u8,
                  DType::boolean})
    EXPECT_FALSE(dtype_is_float(t)) << dtype_name(t);
}

TEST(DTypeInfo, names_are_short_lower_case_and_distinct) {
  EXPECT_EQ(dtype_name(DType::bf16), "bf16");
  EXPECT_EQ(dtype_name(DType::fp4_e2m1), "fp4_e2m1");
  EXPECT_EQ(dtype_name(DType::f8_e4m3), "f8_e4m3");
  EXPECT_EQ(dtype_name(DType::boolean), "bool");
  std::set<std::string_view> seen;
  for (DType t : kAllDTypes) {
    const std::string_view n = dtype_name(t);
    EXPECT_FALSE(n.empty());
    for (char ch : n) EXPECT_FALSE(ch >= 'A' && ch <= 'Z') << n;
    EXPECT_TRUE(seen.insert(n).second) << "duplicate name " << n;
  }
}

TEST(DTypeInfo, safetensors_names_are_the_format_spellings) {
  const std::pair<DType, std::string_view> expected[] = {
      {DType::f64, "F64"},         {DType::f32, "F32"},         {DType::f16, "F16"},  {DType::bf16, "BF16"},
      {DType::f8_e4m3, "F8_E4M3"}, {DType::f8_e5m2, "F8_E5M2"}, {DType::e8m0, "F8_E8M0"},
      {DType::fp4_e2m1, "F4"},     {DType::i64, "I64"},         {DType::i32, "I32"},  {DType::i16, "I16"},
      {DType::i8, "I8"},           {DType::u64, "U64"},         {DType::u32, "U32"},  {DType::u16, "U16"},
      {DType::u8, "U8"},           {DType::boolean, "BOOL"},
  };
  ASSERT_EQ(std::size(expected), std::size(kAllDTypes));
  for (const auto& [t, name] : expected) EXPECT_EQ(dtype_safetensors_name(t), name);
}

TEST(DTypeInfo, every_safetensors_name_maps_back_to_its_dtype) {
  for (DType t : kAllDTypes) {
    const std::optional<DType> back = dtype_from_safetensors_name(dtype_safetensors_name(t));
    ASSERT_TRUE(back.has_value()) << dtype_safetensors_name(t);
    EXPECT_EQ(*back, t) << dtype_safetensors_name(t);
  }
}

TEST(DTypeInfo, unknown_or_miscased_safetensors_names_are_rejected) {
  const std::string_view names[] = {"",      "bf16",       "Bf16", "F8_E4M3FN", "F8",
                                    "F4_E2M1", "BF16 ",    " BF16", "FLOAT",     "F8_E8M0FNU",
                                    "bool",  "C64",        std::string_view("BF16\0", 5)};
  for (std::string_view name : names)
    EXPECT_FALSE(dtype_from_safetensors_name(name).has_value()) << '"' << name << '"';
}

// ================================================================================================= bf16

TEST(Bf16, decodes_every_code_to_its_exact_value) {
  for (std::uint32_t c = 0; c <= 0xFFFF; ++c) {
    const double want = bf16_oracle(static_cast<std::uint16_t>(c));
    const float got = bf16_to_f32(static_cast<std::uint16_t>(c));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << hex(c);
      ASSERT_EQ(sign_of(got), (c & 0x8000) != 0) << hex(c);
    } else {
      ASSERT_TRUE(same_bits(got, exact_float(want))) << "code " << hex(c);
    }
  }
}

TEST(Bf16, every_code_round_trips_through_f32) {
  for (std::uint32_t c = 0; c <= 0xFFFF; ++c) {
    const auto code = static_cast<std::uint16_t>(c);
    const std::uint16_t back = f32_to_bf16(bf16_to_f32(code));
    const bool is_nan = (c & 0x7F80) == 0x7F80 && (c & 0x007F) != 0;
    if (!is_nan || (c & 0x0040) != 0) {
      ASSERT_EQ(back, code) << hex(c);  // numbers, infinities and quiet NaNs come back unchanged
    } else {
      ASSERT_EQ(back, code | 0x0040) << hex(c);  // a signalling NaN comes back quieted, all else kept
    }
  }
}

TEST(Bf16, f32_to_bf16_rounds_to_nearest_even_for_every_upper_half_and_boundary_lower_halves) {
  // Positive bf16 magnitudes, then 2^128: what 0x7F80 would be with an unbounded exponent (it is inf).
  const std::vector<double> table = value_table(0x7F7F, std::ldexp(1.0, 128), [](std::uint32_t c) {
    return bf16_oracle(static_cast<std::uint16_t>(c));
  });
  // Lower halves: exact, just above exact, just below the midpoint, the midpoint, just above, just below next.
  const std::uint32_t lower_halves[] = {0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xFFFF};
  for (std::uint32_t upper = 0; upper <= 0xFFFF; ++upper) {
    if ((upper & 0x7F80) == 0x7F80) continue;  // inf/NaN upper halves: tested below
    for (std::uint32_t lower : lower_halves) {
      const float x = from_bits((upper << 16) | lower);
      const std::uint32_t magnitude_code = nearest_code_oracle(table, std::fabs(static_cast<double>(x)));
      // Index 0x7F80 of the table is 2^128, and beyond the table is overflow too: both are inf (0x7F80).
      const std::uint32_t want = (upper & 0x8000) | std::min<std::uint32_t>(magnitude_code, 0x7F80);
      ASSERT_EQ(f32_to_bf16(x), want) << "f32 " << hex(bits(x)) << " = " << x;
    }
  }
}

TEST(Bf16, f32_to_bf16_keeps_every_nan_a_quiet_nan_with_its_sign) {
  // Every payload position: upper-half payloads, and payloads that live only in the lower half (which plain
  // truncation would turn into infinity).
  const std::uint32_t lower_halves[] = {0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xFFFF};
  int nans = 0;
  for (std::uint32_t upper : {0x7F80u, 0xFF80u})
    for (std::uint32_t payload = 0; payload <= 0x7F; ++payload)
      for (std::uint32_t lower : lower_halves) {
        const std::uint32_t in = ((upper | payload) << 16) | lower;
        if ((in & 0x7FFF'FFFF) == 0x7F80'0000) continue;  // that is infinity
        ++nans;
        const std::uint16_t out = f32_to_bf16(from_bits(in));
        ASSERT_TRUE(std::isnan(bf16_to_f32(out))) << hex(in) << " -> " << hex(out);
        ASSERT_EQ(out & 0x0040, 0x0040) << "not quiet: " << hex(in) << " -> " << hex(out);
        ASSERT_EQ(out & 0x8000, upper & 0x8000) << "sign lost: " << hex(in) << " -> " << hex(out);
        ASSERT_EQ(out & 0x003F, payload & 0x003F) << "upper payload lost: " << hex(in) << " -> " << hex(out);
      }
  EXPECT_EQ(nans, 2 * (128 * 6 - 1));
  EXPECT_EQ(f32_to_bf16(kNaN) & 0x7FC0, 0x7FC0);
  EXPECT_EQ(f32_to_bf16(-kNaN) & 0xFFC0, 0xFFC0);
}

TEST(Bf16, f32_to_bf16_overflows_to_infinity_exactly_from_the_midpoint_past_the_largest_value) {
  // Largest bf16: 0x7F7F = (2 - 2^-7) * 2^127. The midpoint to 2^128 is 0x7F7F8000 and ties to even:
  // 0x7F7F is odd, so the tie goes up, to infinity.
  EXPECT_EQ(f32_to_bf16(from_bits(0x7F7F0000)), 0x7F7F);
  EXPECT_EQ(f32_to_bf16(from_bits(0x7F7F7FFF)), 0x7F7F);
  EXPECT_EQ(f32_to_bf16(from_bits(0x7F7F8000)), 0x7F80);
  EXPECT_EQ(f32_to_bf16(FLT_MAX), 0x7F80);
  EXPECT_EQ(f32_to_bf16(-FLT_MAX), 0xFF80);
  EXPECT_EQ(f32_to_bf16(from_bits(0xFF7F7FFF)), 0xFF7F);
  // The binade below: a tie there stays finite (0x7F7E is even).
  EXPECT_EQ(f32_to_bf16(from_bits(0x7F7E8000)), 0x7F7E);
  EXPECT_EQ(f32_to_bf16(from_bits(0x7F7E8001)), 0x7F7F);
}

TEST(Bf16, f32_to_bf16_keeps_signed_zeros_infinities_and_subnormals) {
  EXPECT_EQ(f32_to_bf16(0.0f), 0x0000);
  EXPECT_EQ(f32_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_bf16(kInf), 0x7F80);
  EXPECT_EQ(f32_to_bf16(-kInf), 0xFF80);
  EXPECT_EQ(f32_to_bf16(from_bits(0x0000'8000)), 0x0000);  // tie between 0 and the smallest subnormal
  EXPECT_EQ(f32_to_bf16(from_bits(0x0000'8001)), 0x0001);
  EXPECT_EQ(f32_to_bf16(from_bits(0x007F'FFFF)), 0x0080);  // largest f32 subnormal rounds up to 2^-126
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(f32_to_bf16(-2.0f), 0xC000);
}

// ================================================================================================== f16

TEST(F16, decodes_every_code_to_its_exact_value) {
  for (std::uint32_t c = 0; c <= 0xFFFF; ++c) {
    const double want = f16_oracle(static_cast<std::uint16_t>(c));
    const float got = f16_to_f32(static_cast<std::uint16_t>(c));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << hex(c);
      ASSERT_EQ(sign_of(got), (c & 0x8000) != 0) << hex(c);
    } else {
      ASSERT_TRUE(same_bits(got, exact_float(want))) << "code " << hex(c);
    }
  }
}

TEST(F16, nan_codes_decode_to_quiet_nans_keeping_sign_and_payload) {
  for (std::uint32_t c = 0; c <= 0xFFFF; ++c) {
    if ((c & 0x7C00) != 0x7C00 || (c & 0x03FF) == 0) continue;
    const std::uint32_t out = bits(f16_to_f32(static_cast<std::uint16_t>(c)));
    ASSERT_EQ(out & 0x8000'0000, (c & 0x8000) << 16) << hex(c);
    ASSERT_EQ(out & 0x7FC0'0000, 0x7FC0'0000) << "not a quiet NaN: " << hex(c) << " -> " << hex(out);
    ASSERT_EQ((out >> 13) & 0x1FF, c & 0x1FF) << "payload lost: " << hex(c) << " -> " << hex(out);
  }
}

TEST(F16, every_finite_code_and_infinity_round_trips_through_f32) {
  for (std::uint32_t c = 0; c <= 0xFFFF; ++c) {
    if ((c & 0x7C00) == 0x7C00 && (c & 0x03FF) != 0) continue;  // NaN: tested separately
    const auto code = static_cast<std::uint16_t>(c);
    ASSERT_EQ(f32_to_f16(f16_to_f32(code)), code) << hex(c);
  }
}

TEST(F16, nan_codes_round_trip_as_quiet_nans_with_sign) {
  for (std::uint32_t c = 0; c <= 0xFFFF; ++c) {
    if ((c & 0x7C00) != 0x7C00 || (c & 0x03FF) == 0) continue;
    const std::uint16_t back = f32_to_f16(f16_to_f32(static_cast<std::uint16_t>(c)));
    ASSERT_EQ(back, c | 0x0200) << hex(c);  // only the quiet bit may change
  }
}

TEST(F16, every_midpoint_between_adjacent_values_rounds_to_the_even_code_and_neighbours_to_nearest) {
  // Positive codes c and c+1 for every adjacent pair of finite values, including 0 / smallest subnormal and
  // largest subnormal / smallest normal. Midpoints need 12 significant bits: exact in f32 and double.
  for (std::uint32_t c = 0; c < 0x7BFF; ++c) {
    const double lo = f16_oracle(static_cast<std::uint16_t>(c));
    const double hi = f16_oracle(static_cast<std::uint16_t>(c + 1));
    const float mid = exact_float((lo + hi) / 2);
    const std::uint16_t even = static_cast<std::uint16_t>(c % 2 == 0 ? c : c + 1);
    for (std::uint16_t sign : {std::uint16_t{0}, std::uint16_t{0x8000}}) {
      const float m = sign ? -mid : mid;
      ASSERT_EQ(f32_to_f16(m), sign | even) << "midpoint " << m << " after code " << hex(c);
      const float above = std::nextafter(mid, kInf), below = std::nextafter(mid, 0.0f);
      ASSERT_EQ(f32_to_f16(sign ? -above : above), sign | (c + 1)) << "just above midpoint after " << hex(c);
      ASSERT_EQ(f32_to_f16(sign ? -below : below), sign | c) << "just below midpoint after " << hex(c);
    }
  }
}

TEST(F16, values_from_65520_up_round_to_infinity_and_below_to_65504) {
  // 65504 = 0x7BFF (odd); the tie 65520 with the would-be 65536 goes to the even side: infinity.
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7BFF);
  EXPECT_EQ(f32_to_f16(std::nextafter(65520.0f, 0.0f)), 0x7BFF);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7C00);
  EXPECT_EQ(f32_to_f16(-65520.0f), 0xFC00);
  EXPECT_EQ(f32_to_f16(65536.0f), 0x7C00);
  EXPECT_EQ(f32_to_f16(1e10f), 0x7C00);
  EXPECT_EQ(f32_to_f16(FLT_MAX), 0x7C00);
  EXPECT_EQ(f32_to_f16(-FLT_MAX), 0xFC00);
  EXPECT_EQ(f32_to_f16(kInf), 0x7C00);
  EXPECT_EQ(f32_to_f16(-kInf), 0xFC00);
}

TEST(F16, values_at_or_below_half_the_smallest_subnormal_become_signed_zero) {
  const float half_min = std::ldexp(1.0f, -25);
  EXPECT_EQ(f32_to_f16(half_min), 0x0000);
  EXPECT_EQ(f32_to_f16(-half_min), 0x8000);
  EXPECT_EQ(f32_to_f16(std::nextafter(half_min, 1.0f)), 0x0001);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -30)), 0x0000);
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(f32_to_f16(-std::numeric_limits<float>::denorm_min()), 0x8000);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  // 1.5 * 2^-25 is above half of 2^-24: rounds to the smallest subnormal.
  EXPECT_EQ(f32_to_f16(std::ldexp(1.5f, -25)), 0x0001);
}

TEST(F16, nan_inputs_become_quiet_nans_with_sign_for_every_payload_position) {
  for (std::uint32_t sign : {0u, 0x8000'0000u})
    for (int bit = 0; bit < 23; ++bit) {
      const std::uint32_t in = sign | 0x7F80'0000 | (1u << bit);
      const std::uint16_t out = f32_to_f16(from_bits(in));
      ASSERT_EQ(out & 0x7E00, 0x7E00) << hex(in) << " -> " << hex(out);  // exponent all ones + quiet bit
      ASSERT_EQ((out & 0x8000u) << 16, sign) << hex(in);
    }
  EXPECT_EQ(f32_to_f16(kNaN) & 0x7E00, 0x7E00);
}

TEST(F16, f32_to_f16_matches_the_nearest_value_oracle_across_all_f32_exponents) {
  const std::vector<double> table = value_table(0x7BFF, 65536.0, [](std::uint32_t c) {
    return f16_oracle(static_cast<std::uint16_t>(c));
  });
  for (std::uint64_t b = 0; b <= 0xFFFF'FFFFu; b += kF32Stride) {
    const float x = from_bits(static_cast<std::uint32_t>(b));
    if (std::isnan(x)) continue;
    const std::uint32_t magnitude_code = nearest_code_oracle(table, std::fabs(static_cast<double>(x)));
    const std::uint32_t want = (std::signbit(x) ? 0x8000 : 0) | std::min<std::uint32_t>(magnitude_code, 0x7C00);
    ASSERT_EQ(f32_to_f16(x), want) << "f32 " << hex(b) << " = " << x;
  }
}

// ================================================================================================= e4m3

TEST(E4m3, decodes_every_code_to_its_exact_value) {
  for (std::uint32_t c = 0; c <= 0xFF; ++c) {
    const double want = e4m3_oracle(static_cast<std::uint8_t>(c));
    const float got = e4m3_to_f32(static_cast<std::uint8_t>(c));
    if ((c & 0x7F) == 0x7F) {
      ASSERT_TRUE(std::isnan(want));
      ASSERT_TRUE(std::isnan(got)) << hex(c);
      ASSERT_EQ(sign_of(got), (c & 0x80) != 0) << hex(c);
    } else {
      ASSERT_TRUE(same_bits(got, exact_float(want))) << "code " << hex(c);
    }
  }
  // Spot values from the OCP spec.
  EXPECT_EQ(e4m3_to_f32(0x7E), 448.0f);
  EXPECT_EQ(e4m3_to_f32(0xFE), -448.0f);
  EXPECT_EQ(e4m3_to_f32(0x78), 256.0f);  // exponent field 15 is a normal binade: no infinity
  EXPECT_EQ(e4m3_to_f32(0x38), 1.0f);
  EXPECT_EQ(e4m3_to_f32(0x08), 0x1p-6f);
  EXPECT_EQ(e4m3_to_f32(0x01), 0x1p-9f);
  EXPECT_TRUE(same_bits(e4m3_to_f32(0x80), -0.0f));
}

TEST(E4m3, every_non_nan_code_round_trips_through_f32_in_both_modes) {
  for (std::uint32_t c = 0; c <= 0xFF; ++c) {
    const auto code = static_cast<std::uint8_t>(c);
    for (bool saturate : {false, true})
      ASSERT_EQ(f32_to_e4m3(e4m3_to_f32(code), saturate), code) << hex(c) << " saturate=" << saturate;
  }
}

TEST(E4m3, every_midpoint_between_adjacent_values_rounds_to_the_even_code_and_neighbours_to_nearest) {
  for (std::uint32_t c = 0; c < 0x7E; ++c) {
    const double lo = e4m3_oracle(static_cast<std::uint8_t>(c));
    const double hi = e4m3_oracle(static_cast<std::uint8_t>(c + 1));
    const float mid = exact_float((lo + hi) / 2);
    const std::uint32_t even = c % 2 == 0 ? c : c + 1;
    const float above = std::nextafter(mid, kInf), below = std::nextafter(mid, 0.0f);
    for (bool saturate : {false, true})
      for (std::uint32_t sign : {0u, 0x80u}) {
        const float s = sign ? -1.0f : 1.0f;
        ASSERT_EQ(f32_to_e4m3(s * mid, saturate), sign | even) << "midpoint " << s * mid << " after " << hex(c);
        ASSERT_EQ(f32_to_e4m3(s * above, saturate), sign | (c + 1)) << "just above midpoint after " << hex(c);
        ASSERT_EQ(f32_to_e4m3(s * below, saturate), sign | c) << "just below midpoint after " << hex(c);
      }
  }
}

TEST(E4m3, values_between_448_and_464_round_to_448) {
  for (float x : {std::nextafter(448.0f, kInf), 450.0f, 456.0f, 460.0f, std::nextafter(464.0f, 0.0f)})
    for (bool saturate : {false, true}) {
      EXPECT_EQ(f32_to_e4m3(x, saturate), 0x7E) << x;
      EXPECT_EQ(f32_to_e4m3(-x, saturate), 0xFE) << -x;
    }
}

TEST(E4m3, exactly_464_is_a_tie_that_rounds_to_the_even_448) {
  // 464 lies halfway between 448 (mantissa 110, even) and 480 (mantissa 111, odd, the NaN pattern), so RNE
  // with an unbounded exponent range gives 448: no overflow. This matches the OCP reference conversion,
  // NVIDIA's __nv_cvt_float_to_fp8, PyTorch and ml_dtypes.
  for (bool saturate : {false, true}) {
    EXPECT_EQ(f32_to_e4m3(464.0f, saturate), 0x7E);
    EXPECT_EQ(f32_to_e4m3(-464.0f, saturate), 0xFE);
  }
}

TEST(E4m3, values_above_464_become_nan_or_saturate_to_448) {
  for (float x : {std::nextafter(464.0f, kInf), 470.0f, 480.0f, 500.0f, 512.0f, 1e6f, FLT_MAX}) {
    EXPECT_EQ(f32_to_e4m3(x), 0x7F) << x;
    EXPECT_EQ(f32_to_e4m3(-x), 0xFF) << -x;
    EXPECT_EQ(f32_to_e4m3(x, /*saturate=*/true), 0x7E) << x;
    EXPECT_EQ(f32_to_e4m3(-x, /*saturate=*/true), 0xFE) << -x;
  }
}

TEST(E4m3, infinity_becomes_nan_or_saturates_to_448) {
  EXPECT_EQ(f32_to_e4m3(kInf), 0x7F);
  EXPECT_EQ(f32_to_e4m3(-kInf), 0xFF);
  EXPECT_EQ(f32_to_e4m3(kInf, true), 0x7E);
  EXPECT_EQ(f32_to_e4m3(-kInf, true), 0xFE);
}

TEST(E4m3, nan_stays_nan_with_its_sign_even_when_saturating) {
  for (bool saturate : {false, true})
    for (std::uint32_t payload : {0x0040'0000u, 0x0000'0001u, 0x007F'FFFFu}) {
      EXPECT_EQ(f32_to_e4m3(from_bits(0x7F80'0000 | payload), saturate), 0x7F) << hex(payload);
      EXPECT_EQ(f32_to_e4m3(from_bits(0xFF80'0000 | payload), saturate), 0xFF) << hex(payload);
    }
}

TEST(E4m3, subnormal_boundaries_round_correctly) {
  const float min_sub = 0x1p-9f;  // code 0x01
  EXPECT_EQ(f32_to_e4m3(min_sub), 0x01);
  EXPECT_EQ(f32_to_e4m3(min_sub / 2), 0x00);  // tie between 0 and 2^-9: even is 0
  EXPECT_EQ(f32_to_e4m3(-min_sub / 2), 0x80);
  EXPECT_EQ(f32_to_e4m3(std::nextafter(min_sub / 2, 1.0f)), 0x01);
  EXPECT_EQ(f32_to_e4m3(0x1p-11f), 0x00);
  EXPECT_EQ(f32_to_e4m3(std::numeric_limits<float>::denorm_min()), 0x00);
  EXPECT_EQ(f32_to_e4m3(-std::numeric_limits<float>::denorm_min()), 0x80);
  EXPECT_EQ(f32_to_e4m3(FLT_MIN), 0x00);
  EXPECT_EQ(f32_to_e4m3(0.0f), 0x00);
  EXPECT_EQ(f32_to_e4m3(-0.0f), 0x80);
  // Largest subnormal 7 * 2^-9 (0x07), smallest normal 2^-6 = 8 * 2^-9 (0x08); their tie goes to 0x08.
  EXPECT_EQ(f32_to_e4m3(7 * 0x1p-9f), 0x07);
  EXPECT_EQ(f32_to_e4m3(7.5f * 0x1p-9f), 0x08);
  EXPECT_EQ(f32_to_e4m3(std::nextafter(7.5f * 0x1p-9f, 0.0f)), 0x07);
  EXPECT_EQ(f32_to_e4m3(0x1p-6f), 0x08);
  // 2.5 * 2^-9 ties between codes 2 and 3: even is 2; 3.5 * 2^-9 ties to 4.
  EXPECT_EQ(f32_to_e4m3(2.5f * 0x1p-9f), 0x02);
  EXPECT_EQ(f32_to_e4m3(3.5f * 0x1p-9f), 0x04);
}

TEST(E4m3, f32_to_e4m3_matches_the_nearest_value_oracle_across_all_f32_exponents) {
  // Positive magnitudes of codes 0..0x7E, then 480: what 0x7F would be if it were not NaN.
  const std::vector<double> table = value_table(0x7E, 480.0, [](std::uint32_t c) {
    return e4m3_oracle(static_cast<std::uint8_t>(c));
  });
  for (std::uint64_t b = 0; b <= 0xFFFF'FFFFu; b += kF32Stride) {
    const float x = from_bits(static_cast<std::uint32_t>(b));
    if (std::isnan(x)) continue;
    const std::uint32_t sign = std::signbit(x) ? 0x80 : 0;
    const std::uint32_t magnitude_code = nearest_code_oracle(table, std::fabs(static_cast<double>(x)));
    const bool overflow = magnitude_code > 0x7E;
    ASSERT_EQ(f32_to_e4m3(x, false), sign | (overflow ? 0x7F : magnitude_code)) << "f32 " << hex(b) << " = " << x;
    ASSERT_EQ(f32_to_e4m3(x, true), sign | (overflow ? 0x7E : magnitude_code)) << "f32 " << hex(b) << " = " << x;
  }
}

// ================================================================================================= e5m2

TEST(E5m2, decodes_every_code_to_its_exact_value) {
  for (std::uint32_t c = 0; c <= 0xFF; ++c) {
    const double want = e5m2_oracle(static_cast<std::uint8_t>(c));
    const float got = e5m2_to_f32(static_cast<std::uint8_t>(c));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << hex(c);
      ASSERT_EQ(sign_of(got), (c & 0x80) != 0) << hex(c);
    } else {
      ASSERT_TRUE(same_bits(got, exact_float(want))) << "code " << hex(c);
    }
  }
  EXPECT_EQ(e5m2_to_f32(0x7B), 57344.0f);
  EXPECT_EQ(e5m2_to_f32(0x7C), kInf);
  EXPECT_EQ(e5m2_to_f32(0xFC), -kInf);
  EXPECT_EQ(e5m2_to_f32(0x01), 0x1p-16f);
  EXPECT_EQ(e5m2_to_f32(0x3C), 1.0f);
}

// ================================================================================================= e8m0

TEST(E8m0, decodes_every_code_to_its_power_of_two_with_255_as_nan) {
  for (std::uint32_t c = 0; c <= 0xFF; ++c) {
    const float got = e8m0_to_f32(static_cast<std::uint8_t>(c));
    if (c == 255) {
      ASSERT_TRUE(std::isnan(got));
    } else {
      ASSERT_TRUE(same_bits(got, exact_float(std::ldexp(1.0, static_cast<int>(c) - 127)))) << "code " << c;
    }
  }
  // Code 0 is 2^-127: not an f32 normal, the subnormal with only the top mantissa bit set.
  EXPECT_EQ(bits(e8m0_to_f32(0)), 0x0040'0000u);
  EXPECT_EQ(std::fpclassify(e8m0_to_f32(0)), FP_SUBNORMAL);
  EXPECT_EQ(e8m0_to_f32(127), 1.0f);
  EXPECT_EQ(e8m0_to_f32(254), 0x1p127f);
}

TEST(E8m0, encodes_every_power_of_two_exactly) {
  for (int c = 0; c <= 254; ++c) {
    const float x = exact_float(std::ldexp(1.0, c - 127));
    ASSERT_EQ(f32_to_e8m0(x), c) << x;
  }
}

TEST(E8m0, halfway_between_powers_of_two_in_linear_value_rounds_up) {
  // 1.5 * 2^k is the linear midpoint of 2^k and 2^(k+1); just below it stays at 2^k.
  for (int k = -127; k <= 126; ++k) {
    const float mid = exact_float(std::ldexp(1.5, k));
    ASSERT_EQ(f32_to_e8m0(mid), k + 128) << "1.5 * 2^" << k;
    ASSERT_EQ(f32_to_e8m0(std::nextafter(mid, 0.0f)), k + 127) << "just below 1.5 * 2^" << k;
    ASSERT_EQ(f32_to_e8m0(std::nextafter(mid, kInf)), k + 128) << "just above 1.5 * 2^" << k;
  }
}

TEST(E8m0, positive_values_beyond_the_scale_range_clamp_to_the_end_codes) {
  // Below 2^-127 the nearest scale is still 2^-127 (code 0): there is no zero code.
  EXPECT_EQ(f32_to_e8m0(std::numeric_limits<float>::denorm_min()), 0);
  EXPECT_EQ(f32_to_e8m0(0x1p-140f), 0);
  EXPECT_EQ(f32_to_e8m0(0x1p-128f), 0);
  EXPECT_EQ(f32_to_e8m0(FLT_MIN), 1);
  // 1.5 * 2^127 and above would need 2^128; code 255 is NaN, so the largest scale 2^127 (254) is kept.
  EXPECT_EQ(f32_to_e8m0(0x1.8p127f), 254);
  EXPECT_EQ(f32_to_e8m0(FLT_MAX), 254);
}

TEST(E8m0, zero_negative_nan_and_infinity_map_to_255) {
  for (float x : {0.0f, -0.0f, -1.0f, -FLT_MAX, -std::numeric_limits<float>::denorm_min(), kInf, -kInf, kNaN,
                  -kNaN, from_bits(0x7F80'0001)})
    EXPECT_EQ(f32_to_e8m0(x), 255) << x;
}

TEST(E8m0, f32_to_e8m0_matches_a_frexp_oracle_across_all_positive_f32) {
  for (std::uint64_t b = 1; b < 0x7F80'0000u; b += kF32Stride / 4) {
    const float x = from_bits(static_cast<std::uint32_t>(b));
    int e = 0;
    const double m = std::frexp(static_cast<double>(x), &e);  // x = m * 2^e, m in [0.5, 1)
    const int k = m >= 0.75 ? e : e - 1;                      // 0.75 * 2^e = 1.5 * 2^(e-1)
    const int want = std::clamp(k + 127, 0, 254);
    ASSERT_EQ(f32_to_e8m0(x), want) << "f32 " << hex(b) << " = " << x;
  }
}

// ================================================================================================== fp4

constexpr float kFp4Table[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                 -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

TEST(Fp4, decodes_every_code_to_its_table_value) {
  for (std::uint8_t c = 0; c < 16; ++c) EXPECT_TRUE(same_bits(fp4_e2m1_to_f32(c), kFp4Table[c])) << int(c);
}

TEST(Fp4, decode_uses_only_the_low_nibble) {
  for (std::uint32_t b = 0; b <= 0xFF; ++b)
    ASSERT_TRUE(same_bits(fp4_e2m1_to_f32(static_cast<std::uint8_t>(b)), kFp4Table[b & 0xF])) << hex(b);
}

TEST(Fp4, every_code_round_trips_including_negative_zero) {
  for (std::uint8_t c = 0; c < 16; ++c) EXPECT_EQ(f32_to_fp4_e2m1(fp4_e2m1_to_f32(c)), c) << int(c);
  EXPECT_EQ(f32_to_fp4_e2m1(-0.0f), 0x8);
}

TEST(Fp4, midpoints_round_to_the_even_code) {
  const std::pair<float, std::uint8_t> ties[] = {
      {0.25f, 0x0}, {0.75f, 0x2}, {1.25f, 0x2}, {1.75f, 0x4}, {2.5f, 0x4}, {3.5f, 0x6}, {5.0f, 0x6},
  };
  for (const auto& [x, code] : ties) {
    EXPECT_EQ(f32_to_fp4_e2m1(x), code) << x;
    EXPECT_EQ(f32_to_fp4_e2m1(-x), code | 0x8) << -x;
  }
}

TEST(Fp4, values_beside_each_midpoint_round_to_the_nearer_code) {
  for (std::uint8_t c = 0; c < 7; ++c) {
    const float mid = (kFp4Table[c] + kFp4Table[c + 1]) / 2;  // exact: few significant bits
    for (float s : {1.0f, -1.0f}) {
      const std::uint8_t sign = s < 0 ? 0x8 : 0;
      EXPECT_EQ(f32_to_fp4_e2m1(s * std::nextafter(mid, 0.0f)), sign | c) << "below " << s * mid;
      EXPECT_EQ(f32_to_fp4_e2m1(s * std::nextafter(mid, kInf)), sign | (c + 1)) << "above " << s * mid;
    }
  }
}

TEST(Fp4, magnitudes_above_6_saturate_to_plus_minus_6) {
  for (float x : {std::nextafter(6.0f, kInf), 6.5f, 7.0f, 8.0f, 100.0f, FLT_MAX, kInf}) {
    EXPECT_EQ(f32_to_fp4_e2m1(x), 0x7) << x;
    EXPECT_EQ(f32_to_fp4_e2m1(-x), 0xF) << -x;
  }
}

TEST(Fp4, nan_of_either_sign_maps_to_plus_6) {
  EXPECT_EQ(f32_to_fp4_e2m1(kNaN), 0x7);
  EXPECT_EQ(f32_to_fp4_e2m1(-kNaN), 0x7);
  EXPECT_EQ(f32_to_fp4_e2m1(from_bits(0xFF80'0001)), 0x7);
}

TEST(Fp4, tiny_values_round_to_signed_zero) {
  EXPECT_EQ(f32_to_fp4_e2m1(std::numeric_limits<float>::denorm_min()), 0x0);
  EXPECT_EQ(f32_to_fp4_e2m1(-std::numeric_limits<float>::denorm_min()), 0x8);
  EXPECT_EQ(f32_to_fp4_e2m1(-0.1f), 0x8);
}

TEST(Fp4, f32_to_fp4_matches_the_nearest_value_oracle_across_all_f32_exponents) {
  // Positive magnitudes 0..6 with no "next" value: anything beyond 6 saturates.
  const std::vector<double> table(kFp4Table, kFp4Table + 8);
  for (std::uint64_t b = 0; b <= 0xFFFF'FFFFu; b += kF32Stride) {
    const float x = from_bits(static_cast<std::uint32_t>(b));
    if (std::isnan(x)) continue;
    const std::uint32_t magnitude_code = std::min<std::uint32_t>(nearest_code_oracle(table, std::fabs(x)), 7);
    const std::uint32_t want = (std::signbit(x) ? 0x8 : 0) | magnitude_code;
    ASSERT_EQ(f32_to_fp4_e2m1(x), want) << "f32 " << hex(b) << " = " << x;
  }
}

}  // namespace
}  // namespace day0
