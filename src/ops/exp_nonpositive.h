// e^z for z <= 0 in float, by bit operations and a polynomial: the weights of every sampling draw (ops/token_draw.h,
// ops/token_cutoff.cpp); its CUDA twin is in ops/cuda/exp_nonpositive_cuda.cuh. C++20 (std::bit_cast): host code only.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>

namespace day0 {

// e^z for z <= 0 (and -inf: 0) in float, within a few ulp of the exact value: 2^(z log2 e) as an integer power
// (exponent bits) times 2^f, |f| <= 1/2, by a degree-7 polynomial. Below 2^-126 (z < -87.3) it is 0: such a token is
// never drawn (its probability is below 1e-38 of the best one's). The clamp and the zero are selected on the bits
// (for y <= 0 the float order is the reverse of the unsigned one): a float compare-and-select next to the int
// conversion keeps GCC from vectorising loops over a vocabulary (under trapping math it counts as control flow).
// Each multiply and add is rounded on its own (no fused multiply-add): the CUDA twin (exp_nonpositive_cuda.cuh)
// computes the same bits.
inline float exp_nonpositive(float z) {
  const float y = z * 1.44269504f;  // log2(e)
  const std::uint32_t y_bits = std::bit_cast<std::uint32_t>(y), floor_bits = std::bit_cast<std::uint32_t>(-126.f);
  const float yc = std::bit_cast<float>(std::min(y_bits, floor_bits));  // max(y, -126)
  const float n = (yc + 12582912.f) - 12582912.f;  // nearest integer: 1.5 * 2^23 pushes the fraction out
  const float f = yc - n;
  float p = 1.525273380405984e-05f;  // ln2^k / k!, k = 7 .. 0
  p = p * f + 1.5403530393381608e-04f;
  p = p * f + 1.3333558146428443e-03f;
  p = p * f + 9.618129107628477e-03f;
  p = p * f + 5.550410866482158e-02f;
  p = p * f + 2.402265069591007e-01f;
  p = p * f + 6.931471805599453e-01f;
  p = p * f + 1.f;
  const float scale = std::bit_cast<float>((static_cast<std::int32_t>(n) + 127) << 23);
  const std::uint32_t keep = y_bits <= floor_bits ? ~0u : 0u;  // y >= -126
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(p * scale) & keep);
}

}  // namespace day0
