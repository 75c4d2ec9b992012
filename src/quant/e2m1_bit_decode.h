// E2M1 (MXFP4's values) to f16 MMA operands by bit moves, for the one-token kernels' f16-groups forms
// (moe_mxfp4_token_cuda.cu): TokenForm::f16_groups through E4M3 codes (each pair then unpacked by one F2FP, a
// conversion instruction, which sm_90 runs at a fraction of the bit operations' rate), f16_groups_prmt straight to
// f16 bytes (each pair placed by one prmt). Host-callable, so a CPU test checks every nibble in every position
// against the reference decodes.
#pragma once

#include <cstdint>

#include "core/host_device.h"
#include "quant/mxfp4_to_fp8_table.h"

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

// A packed word's E2M1 values as bytes s000'eem0 (sign to bit 7, the 3 magnitude bits to bits 3..1): the low nibbles
// (values 0, 2, 4, 6 of the word, in bytes 0..3) and the high ones (values 1, 3, 5, 7). Seven bit operations for the
// word's eight values.
D0_HOST_DEVICE std::uint32_t e2m1_low_to_f16_bytes(std::uint32_t w) {
  return ((w << 1) & 0x0E0E0E0Eu) | ((w << 4) & 0x80808080u);
}
D0_HOST_DEVICE std::uint32_t e2m1_high_to_f16_bytes(std::uint32_t w) {
  return ((w >> 3) & 0x0E0E0E0Eu) | (w & 0x80808080u);
}

// Bytes 2 kHalf and 2 kHalf + 1 of such a word as the high bytes of an f16x2 (low bytes zero), one prmt: each half
// is its E2M1 value times 2^-14 exactly (the 2-bit exponent lands in the low bits of f16's, so 0.5 is the subnormal
// 2^-15).
template <int kHalf>
D0_HOST_DEVICE std::uint32_t f16_bytes_to_f16x2(std::uint32_t bytes) {
  static_assert(kHalf == 0 || kHalf == 1);
  return byte_perm(bytes, 0u, kHalf == 0 ? 0x1404u : 0x3424u);  // bytes [zero, 2 kHalf, zero, 2 kHalf + 1]
}

}  // namespace day0
