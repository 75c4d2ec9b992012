// The small-M linear's CTA body (linear_small_cuda.h): 16 weight rows against up to 16 tokens on mma.sync, K split
// between the warps and summed in warp order. Shared by linear_small_kernel and the fused norm + router kernel
// (norm_router_cuda.h), so a row's sums are the same bits in both.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "ops/cuda/cp_async.cuh"
#include "ops/cuda/mma_sync.cuh"

namespace day0::small_m {

constexpr int kRowsPerCta = 16;   // the MMA's M
constexpr int kTokensPerMma = 8;  // the MMA's N

// Weights are read once per step: keep them out of L1, where x lives. A warp reads 64 bytes of each of 16 rows and
// the CTA's other warps the next blocks of the same rows at about the same time: the L2 fetches 256 bytes at once.
__device__ __forceinline__ uint4 load_streaming(const uint4* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

// One lane's loads of a round: kInFlight 32-wide k blocks of weight rows g (lo) and g + 8 (hi). Lane (g, t) of a
// warp owns, in every k block, the 8 contiguous values 8t..8t+7 of both rows.
template <int kInFlight>
struct WeightRound {
  uint4 lo[kInFlight], hi[kInFlight];
};

// The lane's two weight rows of the CTA's 16 (rows past n read the last row, in bounds, and are not stored).
struct WeightRows {
  const uint4* lo;
  const uint4* hi;
  int chunks;  // 16-byte pieces of a row: K / 8
};

__device__ __forceinline__ WeightRows weight_rows_at(const __nv_bfloat16* w, int n, int k, int lo, int hi) {
  return {reinterpret_cast<const uint4*>(w + static_cast<std::int64_t>(min(lo, n - 1)) * k),
          reinterpret_cast<const uint4*>(w + static_cast<std::int64_t>(min(hi, n - 1)) * k), k / 8};
}

// Rows row0 + g and row0 + g + 8: the CTA's 16 consecutive rows.
__device__ __forceinline__ WeightRows weight_rows(const __nv_bfloat16* w, int n, int k, int row0, int g) {
  return weight_rows_at(w, n, k, row0 + g, row0 + g + 8);
}

template <int kInFlight>
__device__ __forceinline__ void load_round(WeightRound<kInFlight>& r, const WeightRows& w, int kb0) {
  const int t = threadIdx.x % 4;
#pragma unroll
  for (int u = 0; u < kInFlight; ++u) {
    const int c = (kb0 + u) * 4 + t;
    r.lo[u] = r.hi[u] = make_uint4(0, 0, 0, 0);
    if (c < w.chunks) {
      r.lo[u] = load_streaming(w.lo + c);
      r.hi[u] = load_streaming(w.hi + c);
    }
  }
}

// A lane's B operand for one k block: its token's values 8t..8t+7 (piece c of the row, f32, from global memory
// through __ldca or, kSharedX, from shared memory) as bf16 pairs; zeros where there is no token or no piece c.
template <bool kSharedX>
__device__ __forceinline__ uint4 token_values(const float* x_row, int c, int chunks) {
  if (x_row == nullptr || c >= chunks) return make_uint4(0, 0, 0, 0);
  const float4* x4 = reinterpret_cast<const float4*>(x_row) + 2 * c;
  const float4 p = kSharedX ? x4[0] : __ldca(x4), q = kSharedX ? x4[1] : __ldca(x4 + 1);
  return make_uint4(pack_bf16x2(p.x, p.y), pack_bf16x2(p.z, p.w), pack_bf16x2(q.x, q.y), pack_bf16x2(q.z, q.w));
}

// One k block's two MMAs: weight rows g (lo) and g + 8 (hi), the values 8t..8t+3 first, then 8t+4..8t+7.
__device__ __forceinline__ void mma_block(float (&acc)[4], const uint4& lo, const uint4& hi, const uint4& b) {
  mma_bf16_16816(acc, lo.x, hi.x, lo.y, hi.y, b.x, b.y);
  mma_bf16_16816(acc, lo.z, hi.z, lo.w, hi.w, b.z, b.w);
}

// The warp's split-K sums: its rounds of k blocks (warp, warp + kWarps, ... in units of kInFlight), the first
// already loaded into `round` (before the dependent wait). x_row[i]: token tile i's token g (f32 [K]: in global
// memory, read coherently (__ldca: a kernel just before wrote it, dependent_launch.h), or with kSharedX in shared
// memory), null where it does not exist. acc[i]: the MMA accumulators of tile i (rows g, g + 8; tokens 2t, 2t + 1),
// zeroed by the caller.
template <int kTiles, int kWarps, int kInFlight, bool kSharedX = false>
__device__ __forceinline__ void split_k_sums(float (&acc)[kTiles][4], WeightRound<kInFlight>& round,
                                             const WeightRows& w, const float* const (&x_row)[kTiles]) {
  const int warp = threadIdx.x / 32, t = threadIdx.x % 4;
  const int k_blocks = (w.chunks + 3) / 4;
  for (int kb0 = warp * kInFlight; kb0 < k_blocks; kb0 += kWarps * kInFlight) {
    if (kb0 != warp * kInFlight) load_round(round, w, kb0);
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int c = (kb0 + u) * 4 + t;
#pragma unroll
      for (int i = 0; i < kTiles; ++i)
        mma_block(acc[i], round.lo[u], round.hi[u], token_values<kSharedX>(x_row[i], c, w.chunks));
    }
  }
}

// ---- The ring form (linear_small_kernel's many-tile shapes): the lane's weight loads land in shared memory
// through cp.async, kStages k blocks a warp in flight and each refilled as soon as it is used, where the register
// form holds kInFlight blocks a round and issues the next round only after it (the kernel is bound by DRAM latency
// and bytes in flight: its weights from L2 ran 1.8x faster, v23).
// A slot holds one k block of the CTA's 16 rows, row r's 64 bytes at 64 r. Lane (g, t) copies and reads the same
// 16 bytes of rows g and g + 8 (a quarter-warp's 128-bit reads cover 128 contiguous bytes: no bank conflict), so a
// lane waits only for its own copies.
constexpr int kRingBlockBytes = kRowsPerCta * 64;

// The warp's i-th k block in the register form's order (rounds of kGroup consecutive blocks, warp-strided): the
// same MMAs in the same order, so the same bits.
template <int kWarps, int kGroup>
__device__ __forceinline__ int warp_block(int i) {
  return ((i / kGroup) * kWarps + static_cast<int>(threadIdx.x) / 32) * kGroup + i % kGroup;
}

__device__ __forceinline__ void copy_block(unsigned char* slot, const WeightRows& w, int kb) {
  const int g = (threadIdx.x % 32) / 4, t = threadIdx.x % 4, c = kb * 4 + t;
  const bool live = c < w.chunks;
  cp_async::copy_16_l2_256(slot + g * 64 + t * 16, live ? w.lo + c : w.lo, live ? 16u : 0u);
  cp_async::copy_16_l2_256(slot + (g + 8) * 64 + t * 16, live ? w.hi + c : w.hi, live ? 16u : 0u);
}

// The warp's blocks kFrom..kTo - 1 into its ring (kStages x kRingBlockBytes): blocks 0..kStages - 1 in order,
// before ring_split_k_sums, one commit group each (empty past the last block: every lane counts the same groups).
template <int kWarps, int kGroup, int kFrom, int kTo>
__device__ __forceinline__ void ring_prologue(unsigned char* ring, const WeightRows& w) {
  const int k_blocks = (w.chunks + 3) / 4;
#pragma unroll
  for (int i = kFrom; i < kTo; ++i) {
    const int kb = warp_block<kWarps, kGroup>(i);
    if (kb < k_blocks) copy_block(ring + i * kRingBlockBytes, w, kb);
    cp_async::copy_commit();
  }
}

// split_k_sums over the ring ring_prologue filled: the same sums, bit for bit.
template <int kTiles, int kWarps, int kGroup, int kStages>
__device__ __forceinline__ void ring_split_k_sums(float (&acc)[kTiles][4], unsigned char* ring, const WeightRows& w,
                                                  const float* const (&x_row)[kTiles]) {
  const int g = (threadIdx.x % 32) / 4, t = threadIdx.x % 4;
  const int k_blocks = (w.chunks + 3) / 4;
  for (int i = 0;; ++i) {
    const int kb = warp_block<kWarps, kGroup>(i);
    if (kb >= k_blocks) break;
    const int c = kb * 4 + t;
    uint4 b[kTiles];
#pragma unroll
    for (int j = 0; j < kTiles; ++j) b[j] = token_values<false>(x_row[j], c, w.chunks);  // latency under the wait
    cp_async::copy_wait<kStages - 1>();  // block i, this lane's copies
    unsigned char* slot = ring + (i % kStages) * kRingBlockBytes;
    const uint4 lo = *reinterpret_cast<const uint4*>(slot + g * 64 + t * 16);
    const uint4 hi = *reinterpret_cast<const uint4*>(slot + (g + 8) * 64 + t * 16);
#pragma unroll
    for (int j = 0; j < kTiles; ++j) mma_block(acc[j], lo, hi, b[j]);
    // The slot is free once the MMAs have its values (they read the registers the loads filled).
    const int next = warp_block<kWarps, kGroup>(i + kStages);
    if (next < k_blocks) copy_block(slot, w, next);
    cp_async::copy_commit();
  }
}

// The warps' partials summed in warp order (deterministic): after it, warp i < kTiles holds tile i's sums in v
// (v[0], v[1]: row g, tokens 2t, 2t + 1; v[2], v[3]: row g + 8, the same tokens). Returns whether this warp holds
// a tile. Every thread calls it (a CTA barrier).
template <int kTiles, int kWarps>
__device__ __forceinline__ bool reduce_split_k(const float (&acc)[kTiles][4], float (*partial)[kTiles][32][4],
                                               float (&v)[4]) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
  for (int i = 0; i < kTiles; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) partial[warp][i][lane][j] = acc[i][j];
  __syncthreads();
  if (warp >= kTiles) return false;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    float s = partial[0][warp][lane][j];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) s += partial[w][warp][lane][j];
    v[j] = s;
  }
  return true;
}

}  // namespace day0::small_m
