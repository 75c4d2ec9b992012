// One token's router top-k + softmax by one warp: each lane holds E/32 (<= 8) logits in registers; k rounds of a
// warp arg-max (ties to the lower expert index, as the CPU's stable sort) pick the experts, then lane 0 takes the
// softmax over the k picks in pick order, as CpuOps::router_topk_softmax. Shared by the top-k kernel and the
// router linear's fused epilogue (linear_small_cuda.h), so both give the same bits.
#pragma once

#include <cstdint>

#include "ops/cuda/cuda_kernels.h"

namespace day0 {

// (value, index) a beats b: larger value, or equal value and lower index. NaN logits are read as -inf (picked
// last, weight 0; the CPU's sort is unspecified for NaN), so the sentinel (-inf, INT_MAX) loses to every real
// element and each round finds one.
__device__ __forceinline__ bool router_beats(float va, int ia, float vb, int ib) {
  return va > vb || (va == vb && ia < ib);
}

// Every lane of the warp calls it with the same row: logits [E] (in global memory read through L2, so rows other
// CTAs of the same kernel wrote are seen; kShared: in shared memory), writes indices [k] and weights [k].
// E <= kRouterMaxExperts, 1 <= k <= min(kRouterMaxK, E).
template <bool kShared = false>
__device__ __forceinline__ void router_topk_softmax_warp(const float* row, int E, int k, std::int32_t* indices,
                                                         float* weights) {
  constexpr int kPerLane = kRouterMaxExperts / 32;
  const int lane = threadIdx.x % 32;
  float v[kPerLane];
  unsigned taken = 0;  // bit j: element lane + 32 j is taken (or does not exist)
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int e = lane + 32 * j;
    v[j] = e >= E ? -INFINITY : kShared ? row[e] : __ldcg(row + e);
    if (isnan(v[j])) v[j] = -INFINITY;
    if (e >= E) taken |= 1u << j;
  }
  float picked_v[kRouterMaxK];
  int picked_i[kRouterMaxK];
#pragma unroll
  for (int r = 0; r < kRouterMaxK; ++r) {
    if (r >= k) break;
    // This lane's best untaken element; INT_MAX marks "none" and loses every tie.
    float best_v = -INFINITY;
    int best_i = 0x7fffffff;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int e = lane + 32 * j;
      if (!(taken & (1u << j)) && router_beats(v[j], e, best_v, best_i)) best_v = v[j], best_i = e;
    }
    // Butterfly: every lane ends with the warp's winner.
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, best_v, o);
      const int oi = __shfl_xor_sync(0xffffffffu, best_i, o);
      if (router_beats(ov, oi, best_v, best_i)) best_v = ov, best_i = oi;
    }
    if (best_i % 32 == lane) taken |= 1u << (best_i / 32);
    picked_v[r] = best_v;
    picked_i[r] = best_i;
  }
  if (lane != 0) return;
  const float top = picked_v[0];
  float denom = 0.f;
#pragma unroll
  for (int r = 0; r < kRouterMaxK; ++r)
    if (r < k) denom += expf(picked_v[r] - top);
#pragma unroll
  for (int r = 0; r < kRouterMaxK; ++r)
    if (r < k) {
      indices[r] = picked_i[r];
      weights[r] = expf(picked_v[r] - top) / denom;
    }
}

}  // namespace day0
