// FP8 E4M3 with per-row scales, CPU reference (rules in fp8_experts.h): written for reading, one value at a time.
#include "quant/fp8_experts.h"

#include <algorithm>
#include <climits>
#include <cmath>

#include "core/dtype.h"
#include "quant/mxfp4.h"

namespace day0 {
namespace {

// A group is zero when every nibble's magnitude bits are (+0 and -0 both count as zero).
bool group_is_zero(const std::uint8_t* group_bytes) {
  for (int i = 0; i < kMxfp4GroupBytes; ++i)
    if ((group_bytes[i] & 0x77) != 0) return false;
  return true;
}

// Below this amax, amax / 448 is not a normal f32: 448 * 2^-126.
constexpr float kMinNormalAmax = kE4m3Max * 0x1p-126f;

}  // namespace

int mxfp4_row_fp8_exponent(const std::uint8_t* blocks, const std::uint8_t* scales, std::int64_t n_in) {
  int max_exponent = INT_MIN;
  for (std::int64_t g = 0; g < n_in / kMxfp4GroupSize; ++g)
    if (!group_is_zero(blocks + g * kMxfp4GroupBytes))
      max_exponent = std::max(max_exponent, static_cast<int>(scales[g]) - 127);
  return max_exponent == INT_MIN ? 0 : max_exponent - kFp8RowExponentShift;
}

Fp8Row mxfp4_row_to_fp8(const std::uint8_t* blocks, const std::uint8_t* scales, std::int64_t n_in,
                        std::uint8_t* out) {
  const int row_exponent = mxfp4_row_fp8_exponent(blocks, scales, n_in);
  Fp8Row row;
  row.scale = std::ldexp(1.0f, row_exponent);
  for (std::int64_t i = 0; i < n_in; ++i) {
    const std::int64_t g = i / kMxfp4GroupSize;
    const std::uint8_t byte = blocks[i / 2];
    const float v = fp4_e2m1_to_f32(i % 2 == 0 ? byte & 0xF : byte >> 4);
    const int shift = static_cast<int>(scales[g]) - 127 - row_exponent;
    // In double the product is exact (|shift| < 300); as f32 it is exact down to 2^-126, and anything smaller
    // is far under half of E4M3's smallest subnormal 2^-9, so rounding through f32 changes no E4M3 code.
    const double exact = std::ldexp(static_cast<double>(v), shift);
    out[i] = f32_to_e4m3(static_cast<float>(exact));
    row.inexact += static_cast<double>(e4m3_to_f32(out[i])) != exact;
  }
  return row;
}

Fp8Row fp8_quantize_row(const float* x, std::int64_t n, std::uint8_t* q) {
  float amax = 0.0f;
  for (std::int64_t i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  Fp8Row row;
  row.scale = amax >= kMinNormalAmax ? amax / kE4m3Max : 1.0f;
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = x[i] / row.scale;
    q[i] = std::isnan(v) ? kE4m3PositiveNaN : f32_to_e4m3(v);
  }
  return row;
}

void fp8_decode_row(const std::uint8_t* q, float scale, std::int64_t n, float* out) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = e4m3_to_f32(q[i]) * scale;
}

}  // namespace day0
