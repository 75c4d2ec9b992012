// The element arithmetic of the MoE's FP8 chain, shared by the kernels that run it step by step (GEMM epilogue,
// per-row quantisation, scatter-add; SwiGLU: swiglu_math.cuh) and the one that fuses them, so both give the same
// bits (a product followed by a sum is rounded explicitly: no contraction into an FMA in one kernel and not the
// other).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "ops/cuda/swiglu_math.cuh"
#include "quant/e4m3_rne.h"
#include "quant/fp8_experts.h"
#include "quant/fp8_row_order.h"

namespace day0::fp8_moe {

__device__ __forceinline__ float widen(float v) { return v; }
__device__ __forceinline__ float widen(__nv_bfloat16 v) { return __bfloat162float(v); }

// A unit-scale FP8 GEMM output y[m, n] scaled by its token's and its weight row's scales, plus the bias.
template <class B>
__device__ __forceinline__ float scaled_output(float y, float sx, float sw, const B* bias, std::int64_t n) {
  const float v = __fmul_rn(__fmul_rn(y, sx), sw);
  return bias ? __fadd_rn(v, widen(bias[n])) : v;
}

// The largest v over a block of kThreads threads (a multiple of 32); scratch holds kThreads / 32 floats. Every
// thread gets it; max is order-free, so any reduction tree gives the same value.
template <int kThreads>
__device__ __forceinline__ float block_max(float v, float* scratch) {
  for (int offset = 16; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, offset));
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  v = scratch[0];
  for (int w = 1; w < kThreads / 32; ++w) v = fmaxf(v, scratch[w]);
  return v;
}

// The rule of fp8_experts.h: a row's scale is amax / 448 when that is a normal f32, else 1.
__device__ __forceinline__ float row_scale(float amax) {
  return amax >= kE4m3Max * 0x1p-126f ? __fdiv_rn(amax, kE4m3Max) : 1.0f;
}

__device__ __forceinline__ std::uint8_t quantize(float x, float scale) {
  const float v = __fdiv_rn(x, scale);
  return isnan(v) ? kE4m3PositiveNaN : e4m3_rne(v);
}

// Two quotients' codes (a in the low byte) by the hardware conversion (round to nearest even, subnormals kept): the
// codes of e4m3_rne wherever |a|, |b| <= 464 (448's rounding boundary), where saturation never acts. One
// instruction for two values against ~25 each for e4m3_rne's integer arithmetic (which it replaces in the
// quantisation kernels: their rows' quotients are at most 448 but for NaN, infinity or a zero scale).
__device__ __forceinline__ std::uint32_t e4m3x2_in_range(float a, float b) {
  return static_cast<std::uint32_t>(__nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3));
}

// Four values' codes in one word, the first in the low byte: quantize's codes, by e4m3x2_in_range where all four
// quotients are in its range.
__device__ __forceinline__ std::uint32_t quantize4(float4 v, float scale) {
  const float a = __fdiv_rn(v.x, scale), b = __fdiv_rn(v.y, scale), c = __fdiv_rn(v.z, scale),
              d = __fdiv_rn(v.w, scale);
  constexpr float kRange = 464.0f;  // false for NaN
  if (fabsf(a) <= kRange && fabsf(b) <= kRange && fabsf(c) <= kRange && fabsf(d) <= kRange)
    return e4m3x2_in_range(a, b) | e4m3x2_in_range(c, d) << 16;
  auto code = [](float q) -> std::uint32_t { return isnan(q) ? kE4m3PositiveNaN : e4m3_rne(q); };
  return code(a) | code(b) << 8 | code(c) << 16 | code(d) << 24;
}

// The source row of output row r of a gather: rows[r] (r without a list), a bad id clamped into [0, n_src) and
// flagged.
__device__ __forceinline__ std::int64_t gathered_row(const std::int32_t* rows, std::int64_t n_src, std::int64_t r,
                                                     std::int32_t* error_flag) {
  std::int64_t src = rows ? rows[r] : r;
  if (src < 0 || src >= n_src) {
    if (threadIdx.x == 0) *error_flag = 1;
    src = src < 0 ? 0 : n_src - 1;
  }
  return src;
}

// One row quantised from the values its block holds in registers: thread t's v[i] are values 4c .. 4c + 3 for
// c = t + i kThreads < n4 (zeros past the row). held_row_scale: the row's scale (from its amax; every thread of
// the block calls it); held_row_codes: this thread's codes (4 a word); store_held_codes: those into q_row (4-byte
// aligned); quantize_held_row: all three, the scale into *scale_out by thread 0.
template <int kThreads, int kVec>
__device__ __forceinline__ float held_row_scale(const float4 (&v)[kVec], float* warp_max) {
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < kVec; ++i)
    amax = fmaxf(fmaxf(amax, fmaxf(fabsf(v[i].x), fabsf(v[i].y))), fmaxf(fabsf(v[i].z), fabsf(v[i].w)));
  return row_scale(block_max<kThreads>(amax, warp_max));
}

template <int kThreads, int kVec>
__device__ __forceinline__ void held_row_codes(const float4 (&v)[kVec], int n4, float scale,
                                               std::uint32_t (&codes)[kVec]) {
#pragma unroll
  for (int i = 0; i < kVec; ++i)
    codes[i] = static_cast<int>(threadIdx.x) + i * kThreads < n4 ? quantize4(v[i], scale) : 0u;
}

template <int kThreads, int kVec, Fp8RowOrder kOrder = Fp8RowOrder::natural>
__device__ __forceinline__ void store_held_codes(const std::uint32_t (&codes)[kVec], int n4, std::uint8_t* q_row) {
  auto* qr = reinterpret_cast<std::uint32_t*>(q_row);
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    const int c = static_cast<int>(threadIdx.x) + i * kThreads;
    if (c < n4) qr[kOrder == Fp8RowOrder::staged ? fp8_staged_piece(c, n4) : c] = codes[i];
  }
}

// The per-row quantisation kernels' block (quantize_fp8_cuda.cu, and the grouping's fused form): 256 threads holding
// 4 float4s each, rows of up to 4,096 values; the block maximum's order, and so the bits, follow from it.
inline constexpr int kRowThreads = 256, kRowVecs = 4;

// This thread's float4s of a row of n4 (zeros past it), as quantize_held_row takes them.
template <int kThreads, int kVec>
__device__ __forceinline__ void load_held_row(const float4* row, int n4, float4 (&v)[kVec]) {
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    const int c = static_cast<int>(threadIdx.x) + i * kThreads;
    v[i] = c < n4 ? row[c] : make_float4(0.f, 0.f, 0.f, 0.f);
  }
}

template <int kThreads, int kVec, Fp8RowOrder kOrder = Fp8RowOrder::natural>
__device__ __forceinline__ void quantize_held_row(const float4 (&v)[kVec], int n4, float* warp_max, std::uint8_t* q_row,
                                                  float* scale_out) {
  const float scale = held_row_scale<kThreads>(v, warp_max);
  if (threadIdx.x == 0) *scale_out = scale;
  std::uint32_t codes[kVec];
  held_row_codes<kThreads>(v, n4, scale, codes);
  store_held_codes<kThreads, kVec, kOrder>(codes, n4, q_row);
}

}  // namespace day0::fp8_moe
