// Rows of one expert's MXFP4 weights staged in shared memory by tensor copies (TMA) for the fused matmuls' tile
// (moe_mxfp4_kernels.cuh): kRows rows (one or two 16-row MMA tiles) over the whole of K, in stages of
// kGroupsPerStage groups, each stage on its own mbarrier, so a warp decodes a tile as soon as its stage lands and no
// registers hold loads in flight. The one-token kernel (8 warps, stages of 32 groups) and the grouped staged kernel
// (4 warps, stages of 16) read them.
#pragma once

#include <cuda.h>

#include <climits>
#include <cstdint>

#include "core/status.h"
#include "ops/cuda/bulk_copy.cuh"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/moe_mxfp4_kernels.cuh"
#include "ops/cuda/tensor_map.h"
#include "ops/expert_weights.h"

namespace day0::staged_rows {

using mxfp4_kernels::TileLoad;

constexpr int kTileRows = 16;  // the MMA's M
// A tensor copy's box: groups [8 b, 8 b + 8) of the kRows rows, 128 bytes a row in the 128-byte swizzle (16-byte
// chunk c of row r at chunk c ^ (r % 8)).
constexpr int kGroupsPerBox = 8;

// Offsets into dynamic shared memory: the boxes from the first 1,024-byte boundary at or after `header` bytes (the
// swizzle's unit; found on the device, where the base address is known), then the rows' scales.
struct Layout {
  int weights, scales, end;
};

// The staged row MMA row g (0-7; g + 8 likewise) reads: rows g = 2q and 2q + 1 of a quarter-warp's 16-byte loads
// land in opposite halves of the swizzle (q and q + 4), so the eight lanes' chunks fall in distinct banks.
__host__ __device__ constexpr int staged_row(int g) { return (g & 1) * 4 + g / 2; }
// Its inverse: the MMA row that reads staged row r.
__host__ __device__ constexpr int mma_row(int r) { return 2 * (r % 4) + r / 4; }

// Thread 0, before a CTA barrier; depends on nothing an earlier kernel writes.
__device__ __forceinline__ void init_stage_barriers(std::uint64_t* bars, int stages) {
  for (int s = 0; s < stages; ++s) bulk_copy::barrier_init(&bars[s], 1);
  bulk_copy::fence_barrier_init();
}

template <int kRows, int kGroupsPerStage>
struct Staging {
  static_assert(kRows % kTileRows == 0 && kGroupsPerStage % kGroupsPerBox == 0);
  static constexpr int kBoxBytes = kRows * kGroupsPerBox * 16;
  static constexpr int kBoxesPerStage = kGroupsPerStage / kGroupsPerBox;

  __host__ __device__ static constexpr int boxes(int groups) { return (groups + kGroupsPerBox - 1) / kGroupsPerBox; }
  __host__ __device__ static constexpr int stages(int groups) {
    return (groups + kGroupsPerStage - 1) / kGroupsPerStage;
  }
  __host__ __device__ static constexpr int scale_bytes(int groups) { return (kRows * groups + 15) / 16 * 16; }
  // Shared-memory bytes of the boxes and scales, with the alignment's worst case.
  __host__ __device__ static constexpr int bytes(int groups) {
    return 1024 + boxes(groups) * kBoxBytes + scale_bytes(groups);
  }

  __device__ __forceinline__ static Layout layout(const unsigned char* shared, int groups, int header) {
    const unsigned at = bulk_copy::shared_address(shared) + static_cast<unsigned>(header);
    const int weights = header + static_cast<int>((1024u - at % 1024u) % 1024u);
    const int scales = weights + boxes(groups) * kBoxBytes;
    return {weights, scales, scales + scale_bytes(groups)};
  }

  // Rows first_row .. first_row + kRows - 1 of the [rows, groups] blocks (`map`: their tensor map, 128-byte boxes of
  // kRows rows) and their scales into shared memory: thread 0 arms each stage's barrier with the bytes it waits for
  // (whole boxes: columns past the row read as zeros; a copy may land first, the phase still needs that arrival)
  // and copies the scales with stage 0, and lane 0 of warp w copies boxes w, w + kWarps, ... One tensor copy a box,
  // where a bulk copy a row and stage cost each lane that issued one ~24 instructions of the loop the compiler
  // serialises them in (v17: 11% of gate_up's instructions). Sources are 16-byte aligned.
  template <int kWarps>
  __device__ __forceinline__ static void issue_copies(const CUtensorMap* map, const std::uint8_t* scales, int first_row,
                                                      int groups, const Layout& layout, unsigned char* shared,
                                                      std::uint64_t* bars) {
    // The warp index through a shuffle from lane 0: ptxas then knows it warp-uniform and keeps the copies' operands
    // in uniform registers.
    const int warp = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x / 32), 0), lane = threadIdx.x % 32;
    const int n_boxes = boxes(groups);
    if (threadIdx.x == 0) {
      for (int s = 0; s < stages(groups); ++s) {
        const int stage_boxes = min(n_boxes - s * kBoxesPerStage, kBoxesPerStage);
        bulk_copy::arrive_expecting(&bars[s], static_cast<unsigned>(stage_boxes * kBoxBytes) +
                                                  (s == 0 ? static_cast<unsigned>(kRows * groups) : 0u));
      }
      bulk_copy::copy_to_shared(shared + layout.scales, scales + static_cast<std::int64_t>(first_row) * groups,
                                static_cast<unsigned>(kRows * groups), &bars[0]);
    }
    if (lane == 0)
      for (int b = warp; b < n_boxes; b += kWarps)
        bulk_copy::tensor_copy_2d(shared + layout.weights + b * kBoxBytes, map, b * kGroupsPerBox * 16, first_row,
                                  &bars[b / kBoxesPerStage]);
  }

  // This lane's share of tile grp / 4 (group grp of MMA rows g and g + 8) of the 16-row tile `row_tile` from the
  // staged rows; zeros past the last group.
  __device__ __forceinline__ static TileLoad tile(const unsigned char* shared, const Layout& layout, int groups,
                                                  int grp, int row_tile = 0) {
    const int r = staged_row((threadIdx.x % 32) / 4) + kTileRows * row_tile;
    TileLoad l{make_uint4(0, 0, 0, 0), make_uint4(0, 0, 0, 0), 127, 127};
    if (grp < groups) {
      const unsigned char* row_r =
          shared + layout.weights + grp / kGroupsPerBox * kBoxBytes + r * 128 + ((grp % kGroupsPerBox) ^ (r % 8)) * 16;
      l.g = *reinterpret_cast<const uint4*>(row_r);
      l.h = *reinterpret_cast<const uint4*>(row_r + 8 * 128);  // row r + 8: the same chunk order
      l.sg = shared[layout.scales + r * groups + grp];
      l.sh = shared[layout.scales + (r + 8) * groups + grp];
    }
    return l;
  }

  // Whether w's rows can be staged: K up to max_groups, out in whole kRows, 16-byte aligned blocks and scales (a
  // kRows-row tile's scales then start at a multiple of 16 bytes too), and every row a 32-bit tensor-copy coordinate.
  static bool fits(const ExpertWeights& w, int max_groups) {
    return w.storage == ExpertStorage::mxfp4 && w.out % kRows == 0 && w.in % 32 == 0 && w.in / 32 <= max_groups &&
           w.n_experts * w.out <= INT_MAX && aligned_to(w.blocks.raw(), 16) && aligned_to(w.scales.raw(), 16);
  }

  // The blocks as a [E x out, in / 2] byte matrix, kRows-row boxes of 128 bytes (8 groups).
  static Status tensor_map(const ExpertWeights& w, CUtensorMap& map) {
    const std::uint64_t row_bytes = static_cast<std::uint64_t>(w.in / 2);
    return byte_matrix_tensor_map(w.blocks.raw(), static_cast<std::uint64_t>(w.n_experts * w.out), row_bytes, row_bytes,
                                  kRows, kGroupsPerBox * 16, TensorMapSwizzle::bytes128, map);
  }
};

}  // namespace day0::staged_rows
