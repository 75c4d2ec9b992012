// A drawn row as its cluster of 8 CTAs holds it (draw_tokens_cuda.cu, token_cutoff_cuda.cuh): the row's 2,048-id
// blocks dealt out in turn, block b to CTA b % 8 as its slot b / 8, and each CTA's first kCachedSlots slots copied
// into its shared memory once, so the cutoff's passes and the draw read shared memory, not L2 (v62: v61's lane walks
// of 64 dependent L2 loads made a temperature-only row 62 us; 26 with the cache). Rows up to 393,216 ids are held
// whole; a longer row's later slots are read from global memory. A CTA reads a peer's slot through distributed
// shared memory.
#pragma once

#include <cooperative_groups.h>

#include <cstddef>

#include "ops/token_draw.h"

namespace day0 {
namespace draw_cluster {

namespace cg = cooperative_groups;

inline constexpr int kClusterBlocks = 8;  // the portable cluster size
inline constexpr int kThreads = 1024, kWarps = kThreads / 32;
inline constexpr int kMaxBlocks = 512;    // vocabularies up to 1,048,576 ids
inline constexpr int kCachedSlots = 24;   // 192 KB of a CTA's shared memory
inline constexpr int kPerLane = kDrawBlock / kDrawLanes;

// A CTA's dynamic shared memory for a row of V ids: its cached slots.
inline std::size_t row_cache_bytes(long long V) {
  const long long blocks = (V + kDrawBlock - 1) / kDrawBlock, slots = (blocks + kClusterBlocks - 1) / kClusterBlocks;
  return static_cast<std::size_t>(slots < kCachedSlots ? slots : kCachedSlots) * kDrawBlock * sizeof(float);
}

struct ClusterRow {
  const float* x;  // the row in global memory
  const float* cache;
  int V, blocks;
  int rank, slots, cached;  // this CTA's: its rank, its slots, how many of them are in `cache`

  __device__ __forceinline__ int block_of(int slot) const { return rank + kClusterBlocks * slot; }
  // Slot `slot` of this CTA: element `off` is id block_of(slot) * kDrawBlock + off (read only below V).
  __device__ __forceinline__ const float* slot_ids(int slot) const {
    return slot < cached ? cache + slot * kDrawBlock : x + static_cast<long long>(block_of(slot)) * kDrawBlock;
  }
  // Any block of the row, wherever it is held.
  __device__ __forceinline__ const float* block_ids(const cg::cluster_group& cluster, int b) const {
    const int owner = b % kClusterBlocks, slot = b / kClusterBlocks;
    if (slot >= kCachedSlots) return x + static_cast<long long>(b) * kDrawBlock;
    const float* owner_cache = owner == rank ? cache : cluster.map_shared_rank(cache, owner);
    return owner_cache + slot * kDrawBlock;
  }
};

// Every thread of the CTA: its slots' cached part copied in (ids past V as 0), then a CTA barrier. `cache` is the
// CTA's dynamic shared memory (row_cache_bytes(V)).
__device__ inline ClusterRow load_cluster_row(const cg::cluster_group& cluster, const float* x, int V, float* cache) {
  ClusterRow row{x, cache, V, (V + kDrawBlock - 1) / kDrawBlock, static_cast<int>(cluster.block_rank()), 0, 0};
  row.slots = (row.blocks - row.rank + kClusterBlocks - 1) / kClusterBlocks;
  row.cached = row.slots < kCachedSlots ? row.slots : kCachedSlots;
  const int n = row.cached * kDrawBlock;
#pragma unroll 4
  for (int e = static_cast<int>(threadIdx.x); e < n; e += kThreads) {
    const int id = row.block_of(e / kDrawBlock) * kDrawBlock + e % kDrawBlock;
    cache[e] = id < V ? x[id] : 0.f;
  }
  __syncthreads();
  return row;
}

}  // namespace draw_cluster
}  // namespace day0
