// The MXFP4 -> FP8 conversion of one 32-value group as the CUDA kernel does it: the group's shift (block exponent
// minus row exponent) fixes an 8-entry table of E4M3 codes, one per E2M1 magnitude, and each nibble is a lookup.
// Host-callable, so a CPU test can hold it against mxfp4_row_to_fp8 for every shift.
#pragma once

#include <cmath>
#include <cstdint>

#include "quant/e4m3_rne.h"

#if defined(__CUDACC__)
#define D0_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define D0_HOST_DEVICE inline
#endif

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

}  // namespace day0

#undef D0_HOST_DEVICE
