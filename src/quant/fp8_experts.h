// FP8 (OCP E4M3, "fn") with one f32 scale per row: the CPU reference of the online MXFP4 -> FP8 expert path.
// Weights: one MXFP4 row becomes E4M3 bytes and a power-of-two row scale. Activations: one token row becomes
// E4M3 bytes and an amax/448 scale. The CUDA kernels (ops/cuda) are bit-exact with these functions.
//
// Weight rule. A row holds groups g of 32 E2M1 values v with block exponent b_g = scale_g - 127
// (value = v * 2^b_g). The row exponent is R = max over the row's non-zero groups of b_g, minus 6: E2M1's
// largest magnitude 6 times 2^6 = 384 fits under E4M3's 448, times 2^7 = 768 would not. The row scale is 2^R
// (1 for a row of zeros) and each value becomes e4m3_rne(v * 2^(b_g - R)), so decoding e4m3 * 2^R gives back
// v * 2^b_g. E2M1 magnitudes are {1, 1.5} * 2^k with k >= -1, and E4M3 subnormals reach 2^-9, so the
// conversion is exact for every group with b_g >= max b - 14: a row whose non-zero groups' exponents span at
// most 14 binades converts exactly. Groups further down round to nearest even into E4M3's subnormals or to
// (signed) zero; the converter counts those inexact values and returns the count rather than hiding it.
//
// Activation rule. scale = amax(|x|) / 448 (f32 division), or 1 when that is not a normal f32 (amax is 0,
// or below 448 * 2^-126: such a row quantises to zeros); q = e4m3_rne(x / scale) (f32 division). Rounding
// x / scale may give 448 * (1 + 2^-23), which rounds back to 448. fmax ignores NaN, so a NaN element leaves
// the scale alone; a NaN quotient (x NaN, or inf / inf when amax is inf) becomes the positive NaN code 0x7F,
// since CPUs and GPUs disagree on the sign of the NaNs their divisions produce.
#pragma once

#include <cstdint>

namespace day0 {

// 6 * 2^6 = 384 <= 448 (E4M3's largest normal) < 6 * 2^7.
inline constexpr int kFp8RowExponentShift = 6;
inline constexpr float kE4m3Max = 448.0f;
inline constexpr std::uint8_t kE4m3PositiveNaN = 0x7F;

// Blocks whose exponents sit within this many binades below the row's largest convert exactly.
inline constexpr int kFp8ExactBinades = 14;

struct Fp8Row {
  float scale = 1.0f;        // 2^R for weights (a power of two), amax/448 for activations
  std::int64_t inexact = 0;  // values that did not convert exactly (weights only)
};

// R as defined above for one MXFP4 row (n_in % 32 == 0); 0 for a row whose values are all zero.
int mxfp4_row_fp8_exponent(const std::uint8_t* blocks, const std::uint8_t* scales, std::int64_t n_in);

// Converts one MXFP4 row of n_in values (n_in % 32 == 0, layout as mxfp4.h) to n_in E4M3 bytes.
Fp8Row mxfp4_row_to_fp8(const std::uint8_t* blocks, const std::uint8_t* scales, std::int64_t n_in,
                        std::uint8_t* out);

// Quantises one activation row of n values to E4M3 with its per-row scale (rule above).
Fp8Row fp8_quantize_row(const float* x, std::int64_t n, std::uint8_t* q);

// out[i] = f32(q[i]) * scale, one f32 multiplication: exact for power-of-two scales (the weights) wherever the
// result is in f32 range, as the MXFP4 decode; rounded once otherwise (4 significant bits times 24 may need 28).
void fp8_decode_row(const std::uint8_t* q, float scale, std::int64_t n, float* out);

}  // namespace day0
