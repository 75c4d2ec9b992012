// MXFP4 codec, CPU reference.
#include "quant/mxfp4.h"

#include <cmath>

#include "core/dtype.h"

namespace day0 {

void mxfp4_decode_row(const std::uint8_t* blocks, const std::uint8_t* scales, std::int64_t n_in, float* out) {
  for (std::int64_t g = 0; g < n_in / kMxfp4GroupSize; ++g) {
    const int exponent = static_cast<int>(scales[g]) - 127;
    const std::uint8_t* b = blocks + g * kMxfp4GroupBytes;
    float* o = out + g * kMxfp4GroupSize;
    for (int i = 0; i < kMxfp4GroupBytes; ++i) {
      o[2 * i] = std::ldexp(fp4_e2m1_to_f32(b[i] & 0xF), exponent);
      o[2 * i + 1] = std::ldexp(fp4_e2m1_to_f32(b[i] >> 4), exponent);
    }
  }
}

void mxfp4_decode_row_bf16(const std::uint8_t* blocks, const std::uint8_t* scales, std::int64_t n_in,
                           std::uint16_t* out) {
  float tmp[kMxfp4GroupSize];
  for (std::int64_t g = 0; g < n_in / kMxfp4GroupSize; ++g) {
    mxfp4_decode_row(blocks + g * kMxfp4GroupBytes, scales + g, kMxfp4GroupSize, tmp);
    for (int i = 0; i < kMxfp4GroupSize; ++i) out[g * kMxfp4GroupSize + i] = f32_to_bf16(tmp[i]);
  }
}

void mxfp4_encode_row(const float* x, std::int64_t n_in, std::uint8_t* blocks, std::uint8_t* scales) {
  for (std::int64_t g = 0; g < n_in / kMxfp4GroupSize; ++g) {
    const float* v = x + g * kMxfp4GroupSize;
    float amax = 0.f;
    for (int i = 0; i < kMxfp4GroupSize; ++i) {
      const float a = std::fabs(v[i]);
      amax = a > amax ? a : amax;  // NaN never wins, as with fmax
    }
    // Smallest e with amax / 2^e <= 6 (the largest E2M1 magnitude). With amax = f 2^k, f in [0.5, 1):
    // 6 * 2^(k-3) = 0.75 * 2^k covers f <= 0.75, 6 * 2^(k-2) the rest (exact, no log2). Infinity: e = 127.
    int e = -127;
    if (amax > 0.f) {
      int k = 0;
      const float f = std::isinf(amax) ? 0.f : std::frexp(amax, &k);
      e = std::isinf(amax) ? 127 : (f <= 0.75f ? k - 3 : k - 2);
      e = e < -127 ? -127 : (e > 127 ? 127 : e);
    }
    scales[g] = static_cast<std::uint8_t>(e + 127);
    std::uint8_t* b = blocks + g * kMxfp4GroupBytes;
    // v * 2^-e is ldexp(v, -e) exactly (one correctly rounded product either way, 2^-e a float for |e| <= 127),
    // without a library call per value.
    const float down = std::ldexp(1.0f, -e);
    for (int i = 0; i < kMxfp4GroupBytes; ++i) {
      const std::uint8_t lo = f32_to_fp4_e2m1(v[2 * i] * down);
      const std::uint8_t hi = f32_to_fp4_e2m1(v[2 * i + 1] * down);
      b[i] = static_cast<std::uint8_t>(lo | (hi << 4));
    }
  }
}

}  // namespace day0
