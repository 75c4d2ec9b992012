// The tensor-core prefill attention's small pieces (attention_tc_cuda.cu): f16 block scaling, MMA operand
// packing, the deferred RoPE of a Q row and the softmax's exponential.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "ops/cuda/attention_tc_cuda.h"
#include "ops/cuda/mma_sync.cuh"
#include "ops/cuda/rope_math.cuh"

namespace day0::attention_tc_math {

constexpr int kD = kAttentionTcHeadDim;

// The exponent e that puts a block's largest magnitude m in [2^14, 2^15) once divided by 2^e: f16 then keeps
// 11 significant bits (TF32's) for everything within 2^-28 of m. 0 for zero, inf or NaN (they pass through).
__device__ __forceinline__ int block_exponent(float max_abs) {
  const int biased = static_cast<int>(__float_as_uint(max_abs) >> 23);
  if (biased == 0 || biased >= 255) return 0;
  return min(max(biased - 127 - 14, -100), 100);
}

// 2^e for e in [-126, 127], exactly.
__device__ __forceinline__ float pow2(int e) { return __uint_as_float(static_cast<std::uint32_t>(127 + e) << 23); }

__device__ __forceinline__ std::uint32_t half2_bits(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const std::uint32_t*>(&h);
}

// An MMA operand register of two values: f16 or bf16 (round to nearest even), lo in the low half.
template <bool kBf16>
__device__ __forceinline__ std::uint32_t operand_bits(float lo, float hi) {
  if constexpr (kBf16)
    return pack_bf16x2(lo, hi);
  else
    return half2_bits(lo, hi);
}

template <bool kBf16>
__device__ __forceinline__ void mma_16816(float (&c)[4], std::uint32_t a0, std::uint32_t a1, std::uint32_t a2,
                                          std::uint32_t a3, std::uint32_t b0, std::uint32_t b1) {
  if constexpr (kBf16)
    mma_bf16_16816(c, a0, a1, a2, a3, b0, b1);
  else
    mma_f16_16816(c, a0, a1, a2, a3, b0, b1);
}

// Deferred RoPE on one Q row as loaded (x[c]: dims 8c + 2t, +1): lane pair (i, i + half) is chunk c with chunk
// c + kShift (kShift = half / 8, so both are this thread's), rotated as the rope kernels do (rope_math) by the
// (cos, sin) pairs of i, i + 1 in cos_sin, the row's table; lanes past 2 half are left as they are.
template <int kShift>
__device__ __forceinline__ void rotate_q_row(float2 (&x)[kD / 8], const float* cos_sin, int t) {
#pragma unroll
  for (int c = 0; c < kShift; ++c) {
    // cos i, sin i, cos i + 1, sin i + 1 (i = 8c + 2t)
    const float4 w = *reinterpret_cast<const float4*>(cos_sin + 2 * (8 * c + 2 * t));
    const float2 a = x[c], b = x[c + kShift];
    x[c] = make_float2(rope_math::rotated_first(a.x, b.x, w.x, w.y), rope_math::rotated_first(a.y, b.y, w.z, w.w));
    x[c + kShift] =
        make_float2(rope_math::rotated_second(a.x, b.x, w.x, w.y), rope_math::rotated_second(a.y, b.y, w.z, w.w));
  }
}

__device__ __forceinline__ void rotate_q_row(float2 (&x)[kD / 8], const float* cos_sin, int t, int half) {
  switch (half / 8) {
    case 1: rotate_q_row<1>(x, cos_sin, t); break;
    case 2: rotate_q_row<2>(x, cos_sin, t); break;
    case 3: rotate_q_row<3>(x, cos_sin, t); break;
    default: rotate_q_row<4>(x, cos_sin, t); break;
  }
}

// 2^x by the special-function unit (relative error ~2^-22; flash attention's softmax exponential); 2^-inf = 0.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float max_abs4(float m, float4 v) {
  return fmaxf(fmaxf(m, fmaxf(fabsf(v.x), fabsf(v.y))), fmaxf(fabsf(v.z), fabsf(v.w)));
}

}  // namespace day0::attention_tc_math
