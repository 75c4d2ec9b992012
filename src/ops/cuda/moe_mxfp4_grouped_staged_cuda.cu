// The fused MXFP4 grouped matmul's 4-warp split with its weights streamed through shared memory (see
// FusedGroupedOptions::staged): persistent CTAs, each looping over items (a block of 16 or 32 rows of one routed
// expert), a producer warp copying the items' weights by tensor copies (TMA) into a ring of stages ahead of four
// consumer warps, across item and pass boundaries, so a CTA's loads never drain between items. The consumers
// decode and multiply as the register form does (moe_mxfp4_fused_cuda.cu): the same tiles to the same warps in the
// same order, so the same sums, bit for bit.
//
// Why a ring: v53's first staged form copied a CTA's rows whole (every stage at once) and ran one item a CTA; the
// CTAs of an SM then loaded together and decoded together, and it ran slower than the register form (H100,
// bench-moe, 20b down shape: 8 tokens 51.2 against 43.8 us, 64 tokens 82.4 against 77.0).
#include <cuda_bf16.h>

#include <algorithm>
#include <climits>
#include <string>

#include "ops/cuda/bulk_copy.cuh"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/dependent_launch.h"
#include "ops/cuda/moe_mxfp4_grouped_staged.cuh"
#include "ops/cuda/mxfp4_staged_rows.cuh"

namespace day0 {
namespace {

using namespace mxfp4_kernels;
using staged_rows::kGroupsPerBox;
using staged_rows::kTileRows;
using staged_rows::staged_row;

constexpr int kConsumers = 4;                    // split-K warps: tile w + 4 i to warp w (the register form's)
constexpr int kThreads = (kConsumers + 1) * 32;  // and the producer warp
constexpr int kTokensPerMma = 8;                 // the MMA's N
constexpr int kGroupsPerStage = kConsumers * kGroupsPerTile;  // a stage: one tile a consumer warp
constexpr int kBoxesPerStage = kGroupsPerStage / kGroupsPerBox;
constexpr int kMaxGroups = 128;  // K up to 4,096: the scale buffers' size
constexpr int kRingBytes = 40 * 1024;

// Dynamic shared memory: barriers (full and empty a ring slot, a scale buffer free), the split-K partials of one
// group of 8 tokens (a float4 a lane), then from the next 1,024-byte boundary (the swizzle's unit) the ring, then two
// scale buffers (an item's rows' scales, copied with its first stage; items alternate between them).
template <int kRowTiles>
struct Ring {
  static constexpr int kRows = kTileRows * kRowTiles;
  static constexpr int kBoxBytes = kRows * kGroupsPerBox * 16;  // a box: 8 groups (128 bytes) of every row
  static constexpr int kStageBytes = kBoxesPerStage * kBoxBytes;
  static constexpr int kSlots = kRingBytes / kStageBytes;  // 5 at 32 rows, 10 at 16
  static constexpr int kFull = 0, kEmpty = 8 * kSlots, kScalesFree = 16 * kSlots;
  static constexpr int kPartials = (kScalesFree + 16 + 15) / 16 * 16;
  static constexpr int kHeader = kPartials + kConsumers * kRowTiles * 32 * 16;
  __host__ __device__ static constexpr int scale_bytes(int groups) { return (kRows * groups + 15) / 16 * 16; }
  __host__ __device__ static constexpr int bytes(int groups) {
    return kHeader + 1024 + kSlots * kStageBytes + 2 * scale_bytes(groups);
  }
};

// Two row tiles: 51,936 bytes at K = 2,880 (54,368 at 4,096), 4 CTAs an SM; 16-token passes hold twice the token
// values: 3 CTAs an SM, for registers.
template <int kPassGroups, int kRowTiles>
constexpr int kCtasPerSm = kPassGroups == 2 ? 3 : 4;

__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 1, %0;" ::"n"(kConsumers * 32) : "memory"); }

// The CTA's items: i = blockIdx.x, + gridDim.x, ...; item i is row block i % row_blocks of routed slot
// i / row_blocks, so the CTAs running at once share few experts (their tokens' rows stay in L2). Slots past the
// routed experts read -1, and so does every later item: the walk stops there.
struct ItemWalk {
  int row_blocks, items;
};

template <bool kSwiglu, int kGroups, int kRowTiles>
__device__ __forceinline__ void run_pass(const KernelArgs& a, int e, int row0, int c0, int p_end,
                                         const unsigned char* ring, const unsigned char* scales, std::uint64_t* full,
                                         std::uint64_t* empty, float4* partial, unsigned& q) {
  using R = Ring<kRowTiles>;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int groups = a.groups, in = groups * 32, tiles = (groups + kGroupsPerTile - 1) / kGroupsPerTile;
  const int stages = (groups + kGroupsPerStage - 1) / kGroupsPerStage;
  const __nv_bfloat16* xrow[kGroups];
#pragma unroll
  for (int n = 0; n < kGroups; ++n) {
    const int p = c0 + kTokensPerMma * n + g;
    xrow[n] = p < p_end ? a.x + static_cast<std::int64_t>(a.inputs_are_tokens ? a.rows[p] : p) * in : nullptr;
  }
  const int sr = staged_row(g);
  float acc[kRowTiles][kGroups][4] = {};
  for (int s = 0; s < stages; ++s, ++q) {
    const int tile = s * kConsumers + warp, grp = tile * kGroupsPerTile + t;
    XTile xt[kGroups];
#pragma unroll
    for (int n = 0; n < kGroups; ++n) xt[n] = load_x_tile(xrow[n], grp, grp < groups);
    const unsigned slot = q % R::kSlots;
    bulk_copy::wait(&full[slot], (q / R::kSlots) & 1);
    TileLoad l[kRowTiles];
#pragma unroll
    for (int r = 0; r < kRowTiles; ++r) {
      l[r] = TileLoad{make_uint4(0, 0, 0, 0), make_uint4(0, 0, 0, 0), 127, 127};
      if (grp < groups) {
        const int row = kTileRows * r + sr, local = grp - s * kGroupsPerStage;
        const unsigned char* at = ring + slot * R::kStageBytes + local / kGroupsPerBox * R::kBoxBytes + row * 128 +
                                  ((local % kGroupsPerBox) ^ (row % 8)) * 16;
        l[r].g = *reinterpret_cast<const uint4*>(at);
        l[r].h = *reinterpret_cast<const uint4*>(at + 8 * 128);
        l[r].sg = scales[row * groups + grp];
        l[r].sh = scales[(row + 8) * groups + grp];
      }
    }
    bulk_copy::arrive(&empty[slot]);  // every consumer thread: its reads of the slot are done (release)
    if (tile >= tiles) continue;      // uniform over the warp
    const auto words = [&](int n, int qq) { return xt[n].v[qq]; };
#pragma unroll
    for (int r = 0; r < kRowTiles; ++r) {
      if (needs_two_multiplies(l[r]))
        mma_tile_groups<true, kGroups>(l[r], words, acc[r]);
      else
        mma_tile_groups<false, kGroups>(l[r], words, acc[r]);
    }
  }

  // Lane (g, t)'s MMA rows g and g + 8 are the staged rows staged_row(g) and that + 8; the summing lane for rows g
  // and g + 8 reads the lane whose MMA row staged row g is.
  const int source = 4 * staged_rows::mma_row(g) + t;
#pragma unroll
  for (int n = 0; n < kGroups; ++n) {
#pragma unroll
    for (int r = 0; r < kRowTiles; ++r)
      partial[(warp * kRowTiles + r) * 32 + lane] = make_float4(acc[r][n][0], acc[r][n][1], acc[r][n][2], acc[r][n][3]);
    consumers_sync();
    if (warp < kRowTiles) {
      const int r = warp;
      float4 sum = partial[r * 32 + source];
#pragma unroll
      for (int w = 1; w < kConsumers; ++w) {
        const float4 u = partial[(w * kRowTiles + r) * 32 + source];
        sum.x += u.x, sum.y += u.y, sum.z += u.z, sum.w += u.w;
      }
      // sum.x, sum.y: row g, entries 2t, 2t + 1 of the group; sum.z, sum.w: row g + 8, the same entries.
      const float v[4] = {sum.x, sum.y, sum.z, sum.w};
      const int p0 = c0 + kTokensPerMma * n + 2 * t, r0 = row0 + kTileRows * r;
      store_outputs<kSwiglu>(a, e, r0 + g, r0 + g + 8, p0, p0 + 1, p_end, v);
    }
    consumers_sync();  // partial[] is rewritten by the next group or pass
  }
}

// The producer: lane 0 of the last warp copies, for each item and each of its passes (an expert with more tokens
// than a pass takes reads its rows again, from L2 mostly), every stage into the next ring slot once the consumers
// have read what it held, and with an item's first stage its scales into the item's scale buffer once the item
// two before has finished with it.
template <int kPassGroups, int kRowTiles>
__device__ __forceinline__ void produce(const KernelArgs& a, bool settled, const ItemWalk& walk, const CUtensorMap* map,
                                        unsigned char* ring, unsigned char* scales0, std::uint64_t* full,
                                        std::uint64_t* empty, std::uint64_t* scales_free) {
  using R = Ring<kRowTiles>;
  const int groups = a.groups, boxes = (groups + kGroupsPerBox - 1) / kGroupsPerBox;
  const int stages = (groups + kGroupsPerStage - 1) / kGroupsPerStage;
  const unsigned scale_bytes = static_cast<unsigned>(R::kRows * groups);
  unsigned q = 0, j = 0;
  for (int i = blockIdx.x; i < walk.items; i += gridDim.x, ++j) {
    const int slot_y = i / walk.row_blocks, block = i % walk.row_blocks;
    const int e = settled ? __ldcg(a.experts + slot_y) : a.experts[slot_y];
    if (e < 0) break;
    const int n =
        (settled ? __ldcg(a.offsets + e + 1) : a.offsets[e + 1]) - (settled ? __ldcg(a.offsets + e) : a.offsets[e]);
    const int passes = (n + kPassGroups * kTokensPerMma - 1) / (kPassGroups * kTokensPerMma);
    const int first_row = e * a.out_rows + block * R::kRows;
    unsigned char* scales = scales0 + (j & 1) * R::scale_bytes(groups);
    bulk_copy::wait(&scales_free[j & 1], ((j >> 1) & 1) ^ 1);
    for (int pass = 0; pass < passes; ++pass) {
      for (int s = 0; s < stages; ++s, ++q) {
        const unsigned slot = q % R::kSlots;
        bulk_copy::wait(&empty[slot], ((q / R::kSlots) & 1) ^ 1);
        const int stage_boxes = min(boxes - s * kBoxesPerStage, kBoxesPerStage);
        const bool with_scales = pass == 0 && s == 0;
        bulk_copy::arrive_expecting(
            &full[slot], static_cast<unsigned>(stage_boxes * R::kBoxBytes) + (with_scales ? scale_bytes : 0u));
        if (with_scales)
          bulk_copy::copy_to_shared(scales, a.scales + static_cast<std::int64_t>(first_row) * groups, scale_bytes,
                                    &full[slot]);
        for (int b = 0; b < stage_boxes; ++b)
          bulk_copy::tensor_copy_2d(ring + slot * R::kStageBytes + b * R::kBoxBytes, map,
                                    (s * kBoxesPerStage + b) * kGroupsPerBox * 16, first_row, &full[slot]);
      }
    }
  }
}

template <bool kSwiglu, int kPassGroups, int kRowTiles>
__global__ void __launch_bounds__(kThreads, (kCtasPerSm<kPassGroups, kRowTiles>))
    mxfp4_grouped_staged_kernel(KernelArgs a, bool settled, ItemWalk walk,
                                const __grid_constant__ CUtensorMap weight_map) {
  using R = Ring<kRowTiles>;
  extern __shared__ __align__(16) unsigned char shared[];
  auto* full = reinterpret_cast<std::uint64_t*>(shared + R::kFull);
  auto* empty = reinterpret_cast<std::uint64_t*>(shared + R::kEmpty);
  auto* scales_free = reinterpret_cast<std::uint64_t*>(shared + R::kScalesFree);
  auto* partial = reinterpret_cast<float4*>(shared + R::kPartials);
  const unsigned at = bulk_copy::shared_address(shared) + R::kHeader;
  unsigned char* ring = shared + R::kHeader + (1024u - at % 1024u) % 1024u;
  unsigned char* scales0 = ring + R::kSlots * R::kStageBytes;
  if (threadIdx.x == 0) {
    for (int s = 0; s < R::kSlots; ++s) {
      bulk_copy::barrier_init(&full[s], 1);
      bulk_copy::barrier_init(&empty[s], kConsumers * 32);
    }
    for (int b = 0; b < 2; ++b) bulk_copy::barrier_init(&scales_free[b], kConsumers * 32);
    bulk_copy::fence_barrier_init();
  }
  __syncthreads();
  const int warp = threadIdx.x / 32;
  if (warp == kConsumers) {
    if (!settled) begin_dependent_grid();
    if (threadIdx.x % 32 == 0)
      produce<kPassGroups, kRowTiles>(a, settled, walk, &weight_map, ring, scales0, full, empty, scales_free);
    return;
  }
  begin_dependent_grid();  // the kernel before writes x
  unsigned q = 0, j = 0;
  for (int i = blockIdx.x; i < walk.items; i += gridDim.x, ++j) {
    const int slot_y = i / walk.row_blocks, row0 = (i % walk.row_blocks) * R::kRows;
    const int e = a.experts[slot_y];
    if (e < 0) break;
    const int p_begin = a.offsets[e], p_end = a.offsets[e + 1];
    const unsigned char* scales = scales0 + (j & 1) * R::scale_bytes(a.groups);
    for (int c0 = p_begin; c0 < p_end; c0 += kPassGroups * kTokensPerMma) {
      if (kPassGroups == 2 && p_end - c0 > kTokensPerMma)
        run_pass<kSwiglu, 2, kRowTiles>(a, e, row0, c0, p_end, ring, scales, full, empty, partial, q);
      else
        run_pass<kSwiglu, 1, kRowTiles>(a, e, row0, c0, p_end, ring, scales, full, empty, partial, q);
    }
    bulk_copy::arrive(&scales_free[j & 1]);  // the item's last reads of its scales are done
  }
}

template <bool kSwiglu, int kPassGroups, int kRowTiles>
Status launch(const KernelArgs& a, bool settled, const ExpertWeights& w, std::int64_t launch_slots, int ctas_cap,
              cudaStream_t stream) {
  using R = Ring<kRowTiles>;
  const auto kernel = mxfp4_grouped_staged_kernel<kSwiglu, kPassGroups, kRowTiles>;
  // Once per process (a process drives one device, CudaContext): more than 48 KB of dynamic shared memory, and how
  // many CTAs an SM holds at the most it takes.
  static const cudaError_t opted_in =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, R::bytes(kMaxGroups));
  D0_CUDA_RETURN_IF_ERROR(opted_in);
  static const int resident = [&] {
    int device = 0, sms = 0, per_sm = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, R::bytes(kMaxGroups));
    return std::max(sms, 1) * std::max(per_sm, 1);
  }();
  CUtensorMap map;
  D0_RETURN_IF_ERROR((staged_rows::Staging<R::kRows, kGroupsPerStage>::tensor_map(w, map)));
  const std::int64_t items = w.out / R::kRows * launch_slots;
  if (items > INT_MAX) return make_error("mxfp4_grouped_staged_matmul_cuda: too many items");
  const ItemWalk walk{static_cast<int>(w.out / R::kRows), static_cast<int>(items)};
  const unsigned ctas = static_cast<unsigned>(std::min(walk.items, ctas_cap > 0 ? ctas_cap : resident));
  const auto bytes = static_cast<std::size_t>(R::bytes(a.groups));
  launch_dependent(kernel, dim3(ctas), dim3(kThreads), bytes, stream, a, settled && dependent_launch_enabled(), walk,
                   map);
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("mxfp4_grouped_staged_kernel");
  return Status::success();
}

template <int kPassGroups, int kRowTiles>
Status launch(const KernelArgs& a, bool swiglu, bool settled, const ExpertWeights& w, std::int64_t launch_slots,
              int ctas, cudaStream_t stream) {
  return swiglu ? launch<true, kPassGroups, kRowTiles>(a, settled, w, launch_slots, ctas, stream)
                : launch<false, kPassGroups, kRowTiles>(a, settled, w, launch_slots, ctas, stream);
}

}  // namespace

static_assert(Ring<2>::bytes(kMaxGroups) <= 227 * 1024 && Ring<1>::bytes(kMaxGroups) <= 227 * 1024);

bool mxfp4_grouped_staged_fits(const ExpertWeights& w) {
  return staged_rows::Staging<kTileRows, kGroupsPerStage>::fits(w, kMaxGroups);
}

Status mxfp4_grouped_staged_matmul_cuda(const KernelArgs& a, const ExpertWeights& w, bool swiglu, int pass_tokens,
                                        bool settled, std::int64_t launch_slots, int ctas, cudaStream_t stream) {
  if (!mxfp4_grouped_staged_fits(w))
    return make_error("mxfp4_grouped_staged_matmul_cuda: the experts do not fit the staged form (" +
                      std::to_string(w.out) + " x " + std::to_string(w.in) + ")");
  const bool sixteen = pass_tokens == 16;
  if (w.out % (2 * kTileRows) == 0)
    return sixteen ? launch<2, 2>(a, swiglu, settled, w, launch_slots, ctas, stream)
                   : launch<1, 2>(a, swiglu, settled, w, launch_slots, ctas, stream);
  return sixteen ? launch<2, 1>(a, swiglu, settled, w, launch_slots, ctas, stream)
                 : launch<1, 1>(a, swiglu, settled, w, launch_slots, ctas, stream);
}

}  // namespace day0
