// MXFP4 (OCP microscaling FP4): 32 E2M1 values share one E8M0 scale. Layout as gpt-oss publishes it:
// per row, groups of 32 inputs = 16 bytes (element 2b in the low nibble of byte b) + one scale byte.
#pragma once

#include <cstdint>

#include "core/status.h"

namespace day0 {

inline constexpr int kMxfp4GroupSize = 32;
inline constexpr int kMxfp4GroupBytes = 16;

// Decodes one row of `n_in` values (n_in % 32 == 0) to f32: value = FP4[nibble] * 2^(scale - 127).
// Exact wherever the value is in f32 range (and so in bf16); the largest scale codes (>= 253) can overflow to +-inf.
void mxfp4_decode_row(const std::uint8_t* blocks, const std::uint8_t* scales, std::int64_t n_in, float* out);
void mxfp4_decode_row_bf16(const std::uint8_t* blocks, const std::uint8_t* scales, std::int64_t n_in,
                           std::uint16_t* out);

// Quantises one row: per group the smallest power-of-two scale with max|x| / scale <= 6, then
// round-to-nearest-even onto the E2M1 grid. Used to build checkpoints (`synth`, tests).
void mxfp4_encode_row(const float* x, std::int64_t n_in, std::uint8_t* blocks, std::uint8_t* scales);

// CUDA: decode `rows` rows of `n_in` values into bf16 on `stream` (a cudaStream_t, 0 for the default).
// Device pointers. Returns an error naming the CUDA failure or the bad argument.
Status mxfp4_decode_bf16_cuda(const std::uint8_t* blocks, const std::uint8_t* scales, std::int64_t rows,
                              std::int64_t n_in, std::uint16_t* out, void* stream);
// True if a CUDA device is present and usable (tests skip visibly otherwise).
bool cuda_device_available();

}  // namespace day0
