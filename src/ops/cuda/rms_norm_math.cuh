// RMSNorm's arithmetic on the GPU, shared by the norm kernels (rms_norm_cuda.cu), the fused norm + router
// (norm_router_cuda.cu) and the MoE norm inside the small-M linear (linear_small_cuda.cu), so a row normalises to
// the same bits in each: the vector form's layout (thread i holds
// float4s i, i + kNormThreads, ...), squares summed in x, y, z, w order, a fixed-order block sum.
#pragma once

#include <cuda_bf16.h>

#include <climits>
#include <cstdint>

namespace day0::rms_norm_math {

constexpr int kNormThreads = 256;  // the vector form's block: rows of up to 4 * kNormVecPerThread * 256 values
constexpr int kNormVecPerThread = 4;

__device__ __forceinline__ float widen(float v) { return v; }
__device__ __forceinline__ float widen(__nv_bfloat16 v) { return __bfloat162float(v); }

__device__ __forceinline__ float4 load_weights4(const float* w, int i) { return reinterpret_cast<const float4*>(w)[i]; }
__device__ __forceinline__ float4 load_weights4(const __nv_bfloat16* w, int i) {
  const uint2 raw = reinterpret_cast<const uint2*>(w)[i];
  const __nv_bfloat162 lo = *reinterpret_cast<const __nv_bfloat162*>(&raw.x);
  const __nv_bfloat162 hi = *reinterpret_cast<const __nv_bfloat162*>(&raw.y);
  return make_float4(__low2float(lo), __high2float(lo), __low2float(hi), __high2float(hi));
}

__device__ __forceinline__ void add_squares(float& sum_sq, const float4& v) {
  sum_sq += v.x * v.x;
  sum_sq += v.y * v.y;
  sum_sq += v.z * v.z;
  sum_sq += v.w * v.w;
}

__device__ __forceinline__ float4 normalised(const float4& w, float w_offset, const float4& v, float inv_rms) {
  return make_float4((w.x + w_offset) * (v.x * inv_rms), (w.y + w_offset) * (v.y * inv_rms),
                     (w.z + w_offset) * (v.z * inv_rms), (w.w + w_offset) * (v.w * inv_rms));
}

// Same expression as the CPU reference: IEEE division and sqrt (nvcc's defaults without fast-math).
__device__ __forceinline__ float inverse_rms(float sum_sq, float n, float eps) {
  return 1.0f / sqrtf(sum_sq / n + eps);
}

// block_sum over kGroups groups of kWarps consecutive warps at once (several rows a block): each thread gets its own
// group's sum (warps past the last group: the last group's), in warp order; every thread of the block calls it (a CTA
// barrier). warp_sums: kWarps * kGroups.
template <int kWarps, int kGroups>
__device__ __forceinline__ float group_sum(float v, float* warp_sums) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0 && warp < kWarps * kGroups) warp_sums[warp] = v;
  __syncthreads();
  const float* group = warp_sums + min(warp / kWarps, kGroups - 1) * kWarps;
  float total = 0.f;
  for (int w = 0; w < kWarps; ++w) total += group[w];  // same order in every thread
  return total;
}

// The sum of v over the block's first kWarps warps (any others pass 0 and are not added), in warp order; every
// thread of the block calls it (a CTA barrier) and gets the result.
template <int kWarps>
__device__ __forceinline__ float block_sum(float v, float* warp_sums) {
  return group_sum<kWarps, 1>(v, warp_sums);
}

// ---- A token's k <= kMoeFastSlots expert rows, weighted and summed in ascending expert order (ties by slot), as
// moe_combine_kernel sums them: separate multiplies and adds. Each thread orders the slots itself in registers, so
// the rows, ids and weights can all be loaded together (one round of memory latency).
constexpr int kMoeFastSlots = 4;

template <class T>
__device__ __forceinline__ T pick(const T (&v)[kMoeFastSlots], int j) {  // v[j] without local memory
  return j == 0 ? v[0] : j == 1 ? v[1] : j == 2 ? v[2] : v[3];
}

__device__ __forceinline__ void add_product(float4& acc, const float4& v, float w) {
  acc.x = __fadd_rn(acc.x, __fmul_rn(v.x, w));
  acc.y = __fadd_rn(acc.y, __fmul_rn(v.y, w));
  acc.z = __fadd_rn(acc.z, __fmul_rn(v.z, w));
  acc.w = __fadd_rn(acc.w, __fmul_rn(v.w, w));
}

// The token's slots in summation order with their routing weights (k <= kMoeFastSlots; order[n] = -1 past k).
struct MoeFastSlots {
  int order[kMoeFastSlots];
  float route[kMoeFastSlots];
  int k;
};

__device__ __forceinline__ MoeFastSlots moe_fast_slots(const std::int32_t* ids_row, const float* route_row, int k) {
  MoeFastSlots m;
  m.k = k;
  int ids[kMoeFastSlots];
#pragma unroll
  for (int n = 0; n < kMoeFastSlots; ++n) {
    ids[n] = n < k ? ids_row[n] : 0;
    m.route[n] = n < k ? route_row[n] : 0.f;
  }
  int prev_e = INT_MIN, prev_j = -1;
#pragma unroll
  for (int n = 0; n < kMoeFastSlots; ++n) {
    int best_j = -1, best_e = INT_MAX;
#pragma unroll
    for (int j = 0; j < kMoeFastSlots; ++j) {
      const bool after = ids[j] > prev_e || (ids[j] == prev_e && j > prev_j);
      if (j < k && after && (best_j < 0 || ids[j] < best_e)) best_j = j, best_e = ids[j];
    }
    m.order[n] = best_j;
    prev_e = best_e;
    prev_j = best_j;
  }
  return m;
}

// The weighted sum of one float4 of the slots' rows (ys[n]: slot n's, loaded by the caller).
__device__ __forceinline__ float4 moe_weighted_sum4(const float4 (&ys)[kMoeFastSlots], const MoeFastSlots& m) {
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
  for (int n = 0; n < kMoeFastSlots; ++n)
    if (n < m.k) add_product(acc, pick(ys, m.order[n]), pick(m.route, m.order[n]));
  return acc;
}

}  // namespace day0::rms_norm_math
