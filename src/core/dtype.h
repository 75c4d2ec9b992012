// Element types of tensors and checkpoints, and exact scalar conversions between them.
// Rounding to narrower formats is round-to-nearest-even unless a function says otherwise.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace day0 {

enum class DType : std::uint8_t {
  f64, f32, f16, bf16,
  f8_e4m3,   // OCP E4M3 "fn": no infinities, NaN = S.1111.111, max 448
  f8_e5m2,   // OCP E5M2: IEEE-like, with infinities
  e8m0,      // unsigned power-of-two scale 2^(c-127); c = 255 is NaN
  fp4_e2m1,  // MX FP4, two values per byte (element 2i in the low nibble)
  i64, i32, i16, i8, u64, u32, u16, u8, boolean,
};

// Size of one element in bits (4 for fp4_e2m1).
int dtype_bits(DType t);
bool dtype_is_float(DType t);
// Short lower-case name used in reports ("bf16", "fp4_e2m1").
std::string_view dtype_name(DType t);
// safetensors header names ("BF16", "F8_E4M3", "F8_E8M0", "F4", "U8", ...).
std::string_view dtype_safetensors_name(DType t);
std::optional<DType> dtype_from_safetensors_name(std::string_view name);

// --- exact scalar conversions (bit patterns in, bit patterns out) ---
float bf16_to_f32(std::uint16_t bits);
std::uint16_t f32_to_bf16(float x);  // RNE; NaN stays NaN (quiet), sign kept

float f16_to_f32(std::uint16_t bits);
std::uint16_t f32_to_f16(float x);   // RNE incl. subnormals; overflow -> inf; NaN -> quiet NaN

float e4m3_to_f32(std::uint8_t bits);
// RNE. Finite values beyond the largest normal (448) round to NaN unless `saturate`, which clamps to +-448.
std::uint8_t f32_to_e4m3(float x, bool saturate = false);

float e5m2_to_f32(std::uint8_t bits);

float e8m0_to_f32(std::uint8_t bits);  // 2^(bits-127); 255 -> NaN; 0 -> 2^-127 (an f32 subnormal)
// Nearest power of two for positive finite x (halfway in linear value rounds up); NaN, inf, x <= 0 -> 255.
std::uint8_t f32_to_e8m0(float x);

// Bit layouts the inline encoder below shares with dtype.cpp.
inline constexpr std::uint32_t kF32SignBit = 0x8000'0000u;
inline constexpr std::uint32_t kF32AbsMask = 0x7FFF'FFFFu;
inline constexpr std::uint32_t kF32Inf = 0x7F80'0000u;
inline constexpr std::uint8_t kFp4SignBit = 0x8;
inline constexpr std::uint8_t kFp4MaxCode = 0x7;  // 6.0

float fp4_e2m1_to_f32(std::uint8_t nibble);  // low 4 bits used
// RNE, saturates to +-6 (MX convention). FP4 has no NaN code: NaN maps to +6 (0x7); callers that care check first.
// Inline: the MXFP4 encoder calls it for every value.
inline std::uint8_t f32_to_fp4_e2m1(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);  // (std::bit_cast: not in the CUDA files' C++ dialect)
  const std::uint32_t abs_bits = bits & kF32AbsMask;
  if (abs_bits > kF32Inf) return kFp4MaxCode;  // NaN: no NaN code; +6
  const std::uint8_t sign = (bits & kF32SignBit) != 0 ? kFp4SignBit : 0;
  float a;
  std::memcpy(&a, &abs_bits, sizeof a);
  // Eight values are few enough to compare with the midpoints directly: the code is the number of midpoints
  // below a (summed, not branched: random weights mispredict every branch). A midpoint itself goes to the
  // neighbour with the even code (mantissa bit 0): ">" past it where the lower code is even, ">=" where odd.
  const int code = (a > 0.25f) +   // tie 0.25 -> 0   (code 0)
                   (a >= 0.75f) +  // tie 0.75 -> 1   (code 2)
                   (a > 1.25f) +   // tie 1.25 -> 1   (code 2)
                   (a >= 1.75f) +  // tie 1.75 -> 2   (code 4)
                   (a > 2.5f) +    // tie 2.5  -> 2   (code 4)
                   (a >= 3.5f) +   // tie 3.5  -> 4   (code 6)
                   (a > 5.0f);     // tie 5    -> 4   (code 6); above 5, including inf: saturate at 6 (code 7)
  return static_cast<std::uint8_t>(sign | code);
}

}  // namespace day0
