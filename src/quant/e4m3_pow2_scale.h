// The one-token MXFP4 kernels' activation rule in fp8 mode (W4A8, moe_mxfp4_fused_cuda.h's TokenInputs::e4m3): a
// row x is scaled by a power of two 2^-e, e the least integer with amax(|x|) * 2^-e <= 448 (clamped to >= -126, so
// a row under 2^-118 quantises as if its amax were there), and each scaled value rounds once to E4M3 (nearest even;
// never saturates: every one is <= 448). The row's scale is 2^e, or NaN where amax is not finite (its outputs are
// NaN, as they would be from the bf16 row). Against fp8_experts.h's amax / 448 rule: the scaling is exact (a
// multiply, no division a value, in kernels bound by instruction issue), at the price of up to one binade of E4M3's
// range left unused. Host-callable: fp8_experts.h's fp8_quantize_row_pow2 is its CPU reference.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/host_device.h"

namespace day0 {

inline constexpr int kE4m3Pow2NonFinite = 1 << 30;  // e4m3_pow2_exponent of an infinite or NaN amax

D0_HOST_DEVICE float e4m3_pow2_float(std::uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
#endif
}

// e for a row whose largest magnitude is amax (>= 0), or kE4m3Pow2NonFinite. 448 is 1.75 * 2^8: a normal amax of
// exponent k and mantissa m needs e = k - 8, or k - 7 where m > 0.75.
D0_HOST_DEVICE int e4m3_pow2_exponent(float amax) {
  std::uint32_t bits;
#if defined(__CUDA_ARCH__)
  bits = __float_as_uint(amax);
#else
  std::memcpy(&bits, &amax, sizeof bits);
#endif
  const int field = static_cast<int>((bits >> 23) & 0xFFu);
  if (field == 0xFF) return kE4m3Pow2NonFinite;
  if (field == 0) return -126;  // zero or subnormal
  const int e = field - 127 - 8 + ((bits & 0x7FFFFFu) > 0x600000u ? 1 : 0);
  return e < -126 ? -126 : e;
}

// 2^e for e in [-126, 127].
D0_HOST_DEVICE float e4m3_pow2(int e) { return e4m3_pow2_float(static_cast<std::uint32_t>(e + 127) << 23); }

// The row's scale: 2^e, or NaN.
D0_HOST_DEVICE float e4m3_pow2_scale(int e) { return e == kE4m3Pow2NonFinite ? e4m3_pow2_float(0x7FC00000u) : e4m3_pow2(e); }

// What x is multiplied by before rounding: 2^-e (1 for a non-finite row, whose scale makes every output NaN).
D0_HOST_DEVICE float e4m3_pow2_inverse(int e) { return e == kE4m3Pow2NonFinite ? 1.0f : e4m3_pow2(-e); }

}  // namespace day0
