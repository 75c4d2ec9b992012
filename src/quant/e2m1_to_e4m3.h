// E2M1 (MXFP4's values) to E4M3 codes by bit moves, for the one-token kernels' f16-groups decode
// (moe_mxfp4_token_cuda.cu: the codes then unpack to f16 with one F2FP a pair). Host-callable, so a CPU test checks
// every nibble in every position against the reference decodes.
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace day0 {

// A packed word's E2M1 values as E4M3 codes holding value * 2^-6, exact (sign to bit 7, the 3 magnitude bits to
// bits 4..2: E2M1's 2-bit exponent in the low bits of E4M3's, its 0.5 E4M3's subnormal 2^-7): the low nibbles
// (values 0, 2, 4, 6 of the word, in bytes 0..3) and the high ones (values 1, 3, 5, 7). Seven bit operations for
// the word's eight values.
D0_HOST_DEVICE std::uint32_t e2m1_low_to_e4m3x4(std::uint32_t w) {
  return ((w << 2) & 0x1C1C1C1Cu) | ((w << 4) & 0x80808080u);
}
D0_HOST_DEVICE std::uint32_t e2m1_high_to_e4m3x4(std::uint32_t w) {
  return ((w >> 2) & 0x1C1C1C1Cu) | (w & 0x80808080u);
}

}  // namespace day0
