// f32 -> E4M3 ("fn") rounding for device code, a line-for-line port of core/dtype.cpp's f32_to_e4m3 (not
// saturating): integer arithmetic on the bit pattern, so GPU codes equal the CPU reference's bit for bit
// whatever the hardware conversion does with ties, subnormals, negative zero or overflow. Host-callable too,
// so a CPU test can compare it with f32_to_e4m3 over many bit patterns.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/host_device.h"

namespace day0 {

D0_HOST_DEVICE std::uint32_t e4m3_rne_f32_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
#endif
}

// value / 2^shift rounded to nearest, ties to even (dtype.cpp's shift_right_rne; value < 2^24 here).
D0_HOST_DEVICE std::uint32_t e4m3_rne_shift_right(std::uint32_t value, int shift) {
  if (shift <= 0) return value;
  if (shift >= 25) return 0;  // value < 2^24 is under half of 2^shift
  const std::uint32_t quotient = value >> shift;
  const std::uint32_t remainder = value & ((1u << shift) - 1);
  const std::uint32_t half = 1u << (shift - 1);
  return quotient + ((remainder > half || (remainder == half && (quotient & 1u))) ? 1u : 0u);
}

// Round to nearest even; NaN, infinity and anything above 464 (448's rounding boundary) become S.1111.111 (NaN).
D0_HOST_DEVICE std::uint8_t e4m3_rne(float x) {
  constexpr std::uint8_t kNaN = 0x7F, kMaxCode = 0x7E;
  const std::uint32_t bits = e4m3_rne_f32_bits(x);
  const std::uint8_t sign = static_cast<std::uint8_t>((bits >> 24) & 0x80);
  const std::uint32_t abs = bits & 0x7FFFFFFFu;
  if (abs >= ((9u + 127u) << 23)) return sign | kNaN;  // NaN, inf, and |x| >= 2^9 (far beyond 464)
  const int f32_exp_field = static_cast<int>(abs >> 23);
  if (f32_exp_field == 0) return sign;  // f32 subnormals are far under half of 2^-9
  const std::uint32_t significand = (abs & 0x7FFFFFu) | 0x800000u;
  const int exp_field = f32_exp_field - 127 + 7;
  std::uint32_t magnitude;
  if (exp_field >= 1)  // normal: keep 3 of 23 mantissa bits; a carry bumps the exponent
    magnitude = (static_cast<std::uint32_t>(exp_field) << 3) + e4m3_rne_shift_right(abs & 0x7FFFFFu, 20);
  else  // subnormal: units of 2^-9; rounding up to 8 gives the smallest normal
    magnitude = e4m3_rne_shift_right(significand, 20 + (1 - exp_field));
  return magnitude > kMaxCode ? static_cast<std::uint8_t>(sign | kNaN) : static_cast<std::uint8_t>(sign | magnitude);
}

}  // namespace day0
