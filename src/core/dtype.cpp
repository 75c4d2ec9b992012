// Element types and exact scalar conversions.
//
// Every conversion works on bit patterns with integer arithmetic, so results do not depend on the host's
// floating-point environment (rounding mode, flush-to-zero) and are identical on every compiler.
#include "core/dtype.h"

#include <array>
#include <bit>
#include <cstdint>

namespace day0 {

namespace {

struct DTypeInfo {
  DType type;
  int bits;
  bool is_float;
  std::string_view name;
  std::string_view safetensors_name;
};

// One row per DType, in enum order (checked below), so lookups are a plain index.
constexpr std::array<DTypeInfo, 17> kDTypes = {{
    {DType::f64, 64, true, "f64", "F64"},
    {DType::f32, 32, true, "f32", "F32"},
    {DType::f16, 16, true, "f16", "F16"},
    {DType::bf16, 16, true, "bf16", "BF16"},
    {DType::f8_e4m3, 8, true, "f8_e4m3", "F8_E4M3"},
    {DType::f8_e5m2, 8, true, "f8_e5m2", "F8_E5M2"},
    {DType::e8m0, 8, true, "e8m0", "F8_E8M0"},
    {DType::fp4_e2m1, 4, true, "fp4_e2m1", "F4"},
    {DType::i64, 64, false, "i64", "I64"},
    {DType::i32, 32, false, "i32", "I32"},
    {DType::i16, 16, false, "i16", "I16"},
    {DType::i8, 8, false, "i8", "I8"},
    {DType::u64, 64, false, "u64", "U64"},
    {DType::u32, 32, false, "u32", "U32"},
    {DType::u16, 16, false, "u16", "U16"},
    {DType::u8, 8, false, "u8", "U8"},
    {DType::boolean, 8, false, "bool", "BOOL"},
}};

constexpr bool table_is_in_enum_order() {
  for (std::size_t i = 0; i < kDTypes.size(); ++i)
    if (static_cast<std::size_t>(kDTypes[i].type) != i) return false;
  return static_cast<std::size_t>(DType::boolean) + 1 == kDTypes.size();
}
static_assert(table_is_in_enum_order(), "kDTypes must list every DType once, in declaration order");

const DTypeInfo& info(DType t) { return kDTypes.at(static_cast<std::size_t>(t)); }

// ---- f32 layout (sign, magnitude mask and infinity: dtype.h) ----
constexpr int kF32MantBits = 23;
constexpr std::uint32_t kF32MantMask = (1u << kF32MantBits) - 1;
constexpr std::uint32_t kF32ImplicitOne = 1u << kF32MantBits;
// The top mantissa bit: worth half the leading 1 in a number (1.1b = 1.5), the "quiet" flag in a NaN.
constexpr std::uint32_t kF32TopMantBit = 1u << (kF32MantBits - 1);
constexpr std::uint32_t kF32QuietBit = kF32TopMantBit;
constexpr int kF32Bias = 127;

std::uint32_t bits_of(float x) { return std::bit_cast<std::uint32_t>(x); }
float float_of(std::uint32_t bits) { return std::bit_cast<float>(bits); }

bool is_nan_bits(std::uint32_t bits) { return (bits & kF32AbsMask) > kF32Inf; }

// `value / 2^shift`, rounded to nearest with ties to even. The 64-bit width lets callers pass shifts well
// past the width of the 24-bit significands used here (the result is then 0: the value is under half).
std::uint64_t shift_right_rne(std::uint64_t value, int shift) {
  if (shift <= 0) return value;
  if (shift >= 63) return 0;  // value < 2^32 here, far under half of 2^63
  const std::uint64_t quotient = value >> shift;
  const std::uint64_t remainder = value & ((std::uint64_t{1} << shift) - 1);
  const std::uint64_t half = std::uint64_t{1} << (shift - 1);
  const bool round_up = remainder > half || (remainder == half && (quotient & 1) != 0);
  return quotient + (round_up ? 1 : 0);
}

// Rounds a finite |x| (f32 bits without the sign) to a smaller binary format with `mant_bits` stored
// mantissa bits and exponent bias `bias`, whose subnormals have exponent field 0. Returns the magnitude
// code (exponent field << mant_bits | mantissa), RNE. A carry out of the mantissa correctly bumps the
// exponent (largest subnormal -> smallest normal, largest binade -> next binade); codes beyond the
// format's largest finite value are left for the caller to classify as overflow.
std::uint32_t round_magnitude(std::uint32_t abs_bits, int mant_bits, int bias) {
  const int f32_exp_field = static_cast<int>(abs_bits >> kF32MantBits);
  // f32 subnormals are below 2^-126, far under half of the smallest subnormal of any narrower format
  // handled here (f16: 2^-24, e4m3: 2^-9), so they round to zero; skipping them keeps the math simple.
  if (f32_exp_field == 0) return 0;
  const std::uint32_t significand = (abs_bits & kF32MantMask) | kF32ImplicitOne;  // 1.m, 24 bits
  const int exp_field = f32_exp_field - kF32Bias + bias;  // target exponent field, may be <= 0
  if (exp_field >= 1) {
    // Normal in the target: keep the top mant_bits fraction bits, the exponent goes on top. Adding the
    // rounded mantissa (which may carry to 1 << mant_bits) to the shifted exponent propagates the carry.
    const std::uint64_t mant = shift_right_rne(significand & kF32MantMask, kF32MantBits - mant_bits);
    return static_cast<std::uint32_t>((static_cast<std::uint64_t>(exp_field) << mant_bits) + mant);
  }
  // Subnormal in the target: the value is significand * 2^(f32_exp - 127 - 23) and the target's unit in
  // the last place is 2^(1 - bias - mant_bits). Rounding may produce 1 << mant_bits: the smallest normal.
  const int shift = (kF32MantBits - mant_bits) + (1 - exp_field);
  return static_cast<std::uint32_t>(shift_right_rne(significand, shift));
}

// ---- f16 layout ----
constexpr int kF16MantBits = 10;
constexpr int kF16Bias = 15;
constexpr std::uint16_t kF16SignBit = 0x8000;
constexpr std::uint16_t kF16Inf = 0x7C00;
constexpr std::uint16_t kF16QuietBit = 0x0200;
constexpr std::uint32_t kF16ExpAllOnes = 0x1F;

// ---- bf16: the upper half of an f32 ----
constexpr int kBf16Shift = 16;
constexpr std::uint16_t kBf16QuietBit = static_cast<std::uint16_t>(kF32QuietBit >> kBf16Shift);

// ---- e4m3 "fn" ----
constexpr int kE4m3MantBits = 3;
constexpr int kE4m3Bias = 7;
constexpr std::uint8_t kE4m3SignBit = 0x80;
constexpr std::uint8_t kE4m3NaN = 0x7F;     // S.1111.111; the only NaN, and there is no infinity
constexpr std::uint8_t kE4m3MaxCode = 0x7E;  // S.1111.110 = 448

// ---- e5m2: the upper byte of an f16 (same exponent width and bias, two mantissa bits) ----
constexpr int kE5m2ToF16Shift = 8;

// ---- e8m0 ----
constexpr std::uint8_t kE8m0NaN = 0xFF;
constexpr std::uint8_t kE8m0MaxCode = 0xFE;  // 2^127
constexpr int kE8m0Bias = 127;

// ---- fp4 e2m1 (sign bit and largest code: dtype.h) ----
constexpr std::array<float, 8> kFp4Magnitudes = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

}  // namespace

int dtype_bits(DType t) { return info(t).bits; }
bool dtype_is_float(DType t) { return info(t).is_float; }
std::string_view dtype_name(DType t) { return info(t).name; }
std::string_view dtype_safetensors_name(DType t) { return info(t).safetensors_name; }

std::optional<DType> dtype_from_safetensors_name(std::string_view name) {
  for (const DTypeInfo& row : kDTypes)
    if (row.safetensors_name == name) return row.type;
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------- bf16

float bf16_to_f32(std::uint16_t bits) { return float_of(static_cast<std::uint32_t>(bits) << kBf16Shift); }

std::uint16_t f32_to_bf16(float x) {
  const std::uint32_t bits = bits_of(x);
  if (is_nan_bits(bits)) {
    // Truncating could drop a payload that lives only in the low half and turn the NaN into an infinity;
    // setting the quiet bit keeps it a NaN (and quiet), with its sign and upper payload.
    return static_cast<std::uint16_t>((bits >> kBf16Shift) | kBf16QuietBit);
  }
  // RNE on the dropped low half. |bits| <= 0x7F800000 here, so the addition never carries into the sign;
  // a carry out of the largest finite binade yields exactly the infinity pattern 0x7F80.
  return static_cast<std::uint16_t>(shift_right_rne(bits, kBf16Shift));
}

// ----------------------------------------------------------------------------------------------- f16

float f16_to_f32(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & kF16SignBit) << 16;
  const std::uint32_t exp = (bits >> kF16MantBits) & kF16ExpAllOnes;
  const std::uint32_t mant = bits & ((1u << kF16MantBits) - 1);
  constexpr int kMantShift = kF32MantBits - kF16MantBits;
  if (exp == kF16ExpAllOnes) {
    // Inf stays inf; a NaN keeps its payload and is made quiet, as hardware conversions do.
    const std::uint32_t nan_quiet = mant != 0 ? kF32QuietBit : 0;
    return float_of(sign | kF32Inf | nan_quiet | (mant << kMantShift));
  }
  if (exp == 0) {
    // Subnormal: mant * 2^-24, exact in f32 (10-bit integer times a power of two in range).
    const float magnitude = static_cast<float>(mant) * 0x1p-24f;
    return float_of(sign | bits_of(magnitude));
  }
  return float_of(sign | ((exp - kF16Bias + kF32Bias) << kF32MantBits) | (mant << kMantShift));
}

std::uint16_t f32_to_f16(float x) {
  const std::uint32_t bits = bits_of(x);
  const auto sign = static_cast<std::uint16_t>((bits & kF32SignBit) >> 16);
  const std::uint32_t abs = bits & kF32AbsMask;
  if (is_nan_bits(bits)) {
    // Keep the top payload bits and force the quiet bit, so the result can never read as infinity.
    const auto payload = static_cast<std::uint16_t>((abs & kF32MantMask) >> (kF32MantBits - kF16MantBits));
    return sign | kF16Inf | kF16QuietBit | payload;
  }
  if (abs == kF32Inf) return sign | kF16Inf;
  // Anything at or above 2^16 is beyond 65520 (the tie between 65504 and the next binade), i.e. overflow.
  // Checking before rounding keeps the exponent arithmetic inside round_magnitude small.
  constexpr std::uint32_t kTwoPow16 = static_cast<std::uint32_t>(16 + kF32Bias) << kF32MantBits;
  if (abs >= kTwoPow16) return sign | kF16Inf;
  const std::uint32_t magnitude = round_magnitude(abs, kF16MantBits, kF16Bias);
  // Rounding 65520 <= |x| < 65536 up carries into exponent field 31 with mantissa 0: exactly infinity.
  return sign | static_cast<std::uint16_t>(magnitude);
}

// ------------------------------------------------------------------------------------------------ fp8

float e4m3_to_f32(std::uint8_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & kE4m3SignBit) << 24;
  if ((bits & ~kE4m3SignBit) == kE4m3NaN) return float_of(sign | kF32Inf | kF32QuietBit);
  const std::uint32_t exp = (bits >> kE4m3MantBits) & 0xF;
  const std::uint32_t mant = bits & ((1u << kE4m3MantBits) - 1);
  if (exp == 0) {
    // Subnormal: mant * 2^(1 - 7 - 3) = mant * 2^-9, exact in f32.
    const float magnitude = static_cast<float>(mant) * 0x1p-9f;
    return float_of(sign | bits_of(magnitude));
  }
  // Exponent field 15 is an ordinary binade (256..448) in the "fn" variant: there is no infinity.
  return float_of(sign | ((exp - kE4m3Bias + kF32Bias) << kF32MantBits) | (mant << (kF32MantBits - kE4m3MantBits)));
}

std::uint8_t f32_to_e4m3(float x, bool saturate) {
  const std::uint32_t bits = bits_of(x);
  const auto sign = static_cast<std::uint8_t>((bits & kF32SignBit) >> 24);
  const std::uint32_t abs = bits & kF32AbsMask;
  if (is_nan_bits(bits)) return sign | kE4m3NaN;
  // Infinity is "beyond the largest normal": NaN, or the largest normal when saturating.
  const std::uint8_t overflow = sign | (saturate ? kE4m3MaxCode : kE4m3NaN);
  if (abs == kF32Inf) return overflow;
  // Values at or above 2^9 are far beyond 464 (the tie between 448 and the would-be 480); rejecting them
  // first keeps the exponent field inside round_magnitude small.
  constexpr std::uint32_t kTwoPow9 = static_cast<std::uint32_t>(9 + kF32Bias) << kF32MantBits;
  if (abs >= kTwoPow9) return overflow;
  const std::uint32_t magnitude = round_magnitude(abs, kE4m3MantBits, kE4m3Bias);
  // 448 < |x| <= 464 rounds to 448 (464 is a tie and 448's mantissa 110 is even); above 464 the rounded
  // code is 0x7F (480 if the format had it), which is the NaN pattern, so it is an overflow.
  if (magnitude > kE4m3MaxCode) return overflow;
  return sign | static_cast<std::uint8_t>(magnitude);
}

float e5m2_to_f32(std::uint8_t bits) {
  // E5M2 is bit-for-bit the upper byte of an IEEE f16: same sign, 5-bit exponent with bias 15, inf/NaN at
  // exponent 31, subnormals at exponent 0; only the mantissa is shorter.
  return f16_to_f32(static_cast<std::uint16_t>(bits << kE5m2ToF16Shift));
}

// ----------------------------------------------------------------------------------------------- e8m0

float e8m0_to_f32(std::uint8_t bits) {
  if (bits == kE8m0NaN) return float_of(kF32Inf | kF32QuietBit);
  // 2^-127 is below f32's normal range: it is the subnormal with only the top mantissa bit set.
  if (bits == 0) return float_of(kF32TopMantBit);
  // Otherwise the code is exactly an f32 biased exponent (both use bias 127) with a zero mantissa.
  return float_of(static_cast<std::uint32_t>(bits) << kF32MantBits);
}

std::uint8_t f32_to_e8m0(float x) {
  const std::uint32_t bits = bits_of(x);
  // Zero, negatives (including -0), NaN and infinity have no power-of-two scale.
  if ((bits & kF32SignBit) != 0 || (bits & kF32AbsMask) == 0 || (bits & kF32AbsMask) >= kF32Inf) return kE8m0NaN;
  const std::uint32_t exp_field = bits >> kF32MantBits;
  if (exp_field == 0) {
    // f32 subnormal: the representable neighbours are 2^-127 (code 0, the f32 subnormal 0x00400000) and
    // 2^-126 (code 1); the linear midpoint is 1.5 * 2^-127 = 0x00600000. Anything smaller than 2^-127 is
    // still nearest to 2^-127, the smallest scale.
    constexpr std::uint32_t kOnePointFiveTimesTwoPowMinus127 = 0x0060'0000u;
    return bits >= kOnePointFiveTimesTwoPowMinus127 ? 1 : 0;
  }
  // x = 1.m * 2^e. The linear midpoint between 2^e and 2^(e+1) is 1.5 * 2^e, i.e. the top mantissa bit:
  // at or above it (halfway rounds up) the scale is 2^(e+1).
  const bool round_up = (bits & kF32TopMantBit) != 0;  // mantissa >= 0.5
  static_assert(kE8m0Bias == kF32Bias, "an f32 exponent field is then already the e8m0 code");
  const std::uint32_t code = exp_field + (round_up ? 1 : 0);
  // 1.5 * 2^127 and above would need 2^128 (code 255 is NaN): clamp to the largest scale, 2^127.
  return code > kE8m0MaxCode ? kE8m0MaxCode : static_cast<std::uint8_t>(code);
}

// ------------------------------------------------------------------------------------------------ fp4

float fp4_e2m1_to_f32(std::uint8_t nibble) {
  const float magnitude = kFp4Magnitudes[nibble & kFp4MaxCode];
  return (nibble & kFp4SignBit) != 0 ? -magnitude : magnitude;
}

}  // namespace day0
