// The MXFP4 -> FP8 conversion of one 32-value group as the CUDA kernel does it: the group's shift (block exponent
// minus row exponent) fixes an 8-entry table of E4M3 codes, one per E2M1 magnitude, and each nibble is a lookup.
// Host-callable, so a CPU test can hold it against mxfp4_row_to_fp8 for every shift.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/host_device.h"
#include "quant/e4m3_rne.h"

namespace day0 {

struct Mxfp4Fp8Table {
  std::uint64_t codes = 0;    // byte c: E4M3 code of magnitude c * 2^shift (c = 0..7; the sign is added per nibble)
  std::uint32_t inexact = 0;  // bit c: that code does not decode to the exact value
};

// ldexpf is exact down to 2^-126 (E2M1 magnitudes have two significant bits); anything smaller rounds to E4M3
// zero either way, as in the CPU reference, and is inexact however ldexpf rounded it.
D0_HOST_DEVICE Mxfp4Fp8Table mxfp4_fp8_table(int shift) {
  const float magnitudes[8] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};
  Mxfp4Fp8Table t;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int c = 1; c < 8; ++c) {
    const float exact = ldexpf(magnitudes[c], shift);
    const std::uint8_t code = e4m3_rne(exact);
    t.codes |= static_cast<std::uint64_t>(code) << (8 * c);
    // Decode of a finite magnitude code m: m * 2^-9 below 8 (subnormal), else (8 + m % 8) * 2^(m / 8 - 10).
    const float back = code < 8 ? ldexpf(float(code), -9) : ldexpf(float(8 + (code & 7)), (code >> 3) - 10);
    t.inexact |= (back != exact || exact < 0x1p-126f ? 1u : 0u) << c;
  }
  return t;
}

// The E4M3 code of one E2M1 nibble (sign bit 3) under table t.
D0_HOST_DEVICE std::uint32_t mxfp4_fp8_code(std::uint32_t nibble, const Mxfp4Fp8Table& t) {
  return static_cast<std::uint32_t>((t.codes >> (8 * (nibble & 7))) & 0xFF) | ((nibble & 8) << 4);
}

D0_HOST_DEVICE std::uint32_t mxfp4_fp8_inexact(std::uint32_t nibble, const Mxfp4Fp8Table& t) {
  return (t.inexact >> (nibble & 7)) & 1;
}

// Shifts with distinct tables. Below the range every magnitude rounds to E4M3 zero (6 * 2^-15 is under half of
// 2^-9) and is inexact, as at the lowest; above it only all-zero groups occur (the row exponent is the largest
// non-zero block exponent minus 6), whose nibbles use entry 0 of any table. So the kernel clamps.
inline constexpr int kMxfp4Fp8MinShift = -14, kMxfp4Fp8MaxShift = 6;

D0_HOST_DEVICE int mxfp4_fp8_clamped_shift(int shift) {
  return shift < kMxfp4Fp8MinShift ? kMxfp4Fp8MinShift : shift > kMxfp4Fp8MaxShift ? kMxfp4Fp8MaxShift : shift;
}

// A table as byte lookups: codes[c] and inexact[c] (0 or 1) in two words each.
struct Mxfp4Fp8Bytes {
  std::uint32_t codes_lo, codes_hi, inexact_lo, inexact_hi;
};

D0_HOST_DEVICE Mxfp4Fp8Bytes mxfp4_fp8_bytes(const Mxfp4Fp8Table& t) {
  std::uint64_t flags = 0;
  for (int c = 0; c < 8; ++c) flags |= static_cast<std::uint64_t>((t.inexact >> c) & 1) << (8 * c);
  return {static_cast<std::uint32_t>(t.codes), static_cast<std::uint32_t>(t.codes >> 32),
          static_cast<std::uint32_t>(flags), static_cast<std::uint32_t>(flags >> 32)};
}

// PTX prmt in its default mode (the host version for tests): result byte i is byte (selector nibble i & 7) of
// b:a, or that byte's top bit replicated where the nibble's bit 3 is set. Only the selector's low 16 bits count.
D0_HOST_DEVICE std::uint32_t byte_perm(std::uint32_t a, std::uint32_t b, std::uint32_t selector) {
#if defined(__CUDA_ARCH__)
  std::uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(selector));
  return r;
#else
  const std::uint64_t both = (static_cast<std::uint64_t>(b) << 32) | a;
  std::uint32_t r = 0;
  for (int i = 0; i < 4; ++i) {
    const std::uint32_t n = (selector >> (4 * i)) & 0xF;
    std::uint32_t byte = static_cast<std::uint32_t>(both >> (8 * (n & 7))) & 0xFF;
    if (n & 8) byte = (byte & 0x80) ? 0xFF : 0;
    r |= byte << (8 * i);
  }
  return r;
#endif
}

D0_HOST_DEVICE int popcount32(std::uint32_t v) {
#if defined(__CUDA_ARCH__)
  return __popc(v);
#else
  int n = 0;
  for (; v; v &= v - 1) ++n;
  return n;
#endif
}

// Eight nibbles (one packed word: values in nibble order) to their eight E4M3 codes, out_lo holding the first
// four: each lookup is one prmt over four magnitudes. Nibble j's sign bit is the top bit of byte j / 2 of word << 4
// (j even) or of word (j odd), so one prmt replicating those top bits (0xFF or 0x00 a byte) gathers four signs,
// with its selector and the mask as immediates (the form before, a prmt over 0x80808080 and a shift, held that
// constant in a register or rebuilt it at each use). Returns how many are inexact.
D0_HOST_DEVICE int mxfp4_word_to_fp8(std::uint32_t word, const Mxfp4Fp8Bytes& t, std::uint32_t& out_lo,
                                     std::uint32_t& out_hi) {
  const std::uint32_t magnitudes = word & 0x77777777u, shifted = word << 4;
  const std::uint32_t signs_lo = byte_perm(shifted, word, 0xD9C8u);  // nibbles 0..3: bytes 0, 4, 1, 5 replicated
  const std::uint32_t signs_hi = byte_perm(shifted, word, 0xFBEAu);  // nibbles 4..7: bytes 2, 6, 3, 7 replicated
  out_lo = byte_perm(t.codes_lo, t.codes_hi, magnitudes) | (signs_lo & 0x80808080u);
  out_hi = byte_perm(t.codes_lo, t.codes_hi, magnitudes >> 16) | (signs_hi & 0x80808080u);
  return popcount32(byte_perm(t.inexact_lo, t.inexact_hi, magnitudes)) +
         popcount32(byte_perm(t.inexact_lo, t.inexact_hi, magnitudes >> 16));
}

}  // namespace day0
