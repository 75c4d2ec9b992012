// The fused MXFP4 grouped matmul's 4-warp split with its weights staged in shared memory by tensor copies
// (mxfp4_staged_rows.cuh), where the register form (moe_mxfp4_fused_cuda.cu) loads one tile a warp at a time: see
// FusedGroupedOptions::staged. The same tiles to the same warps in the same order, so the same sums, bit for bit.
#include <cuda_bf16.h>

#include <string>

#include "ops/cuda/bulk_copy.cuh"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/dependent_launch.h"
#include "ops/cuda/moe_mxfp4_grouped_staged.cuh"
#include "ops/cuda/mxfp4_staged_rows.cuh"

namespace day0 {
namespace {

using namespace mxfp4_kernels;
using staged_rows::kTileRows;
using staged_rows::Layout;

constexpr int kWarps = 4;         // split-K warps, tile w + 4 i to warp w: the register form's 4-warp split
constexpr int kTokensPerMma = 8;  // the MMA's N
constexpr int kGroupsPerStage = kWarps * kGroupsPerTile;  // a stage: one tile a warp
constexpr int kMaxStages = 8;                             // up to K = 4,096
constexpr int kMaxGroups = kMaxStages * kGroupsPerStage;

template <int kRowTiles>
using Staged = staged_rows::Staging<kTileRows * kRowTiles, kGroupsPerStage>;

// Dynamic shared memory: the stage barriers, the split-K partials of one group of 8 tokens (float4 a lane), then
// the staged rows and scales.
constexpr int kPartials = kMaxStages * 8;
template <int kRowTiles>
constexpr int kHeader = kPartials + kWarps* kRowTiles * 32 * 16;

template <int kRowTiles>
constexpr int shared_bytes(int groups) {
  return kHeader<kRowTiles> + Staged<kRowTiles>::bytes(groups);
}

// Two row tiles (32 rows, K = 2,880): 57,216 bytes, 4 CTAs an SM (with the 1 KB each reserves: 232,960 of 233,472)
// at up to 128 registers; one row tile: 29,152 bytes, 6 CTAs an SM at up to 80 registers (4 at 128 for 16-token
// passes, which spilled at 80 and at 96).
template <int kPassGroups, int kRowTiles>
constexpr int kCtasPerSm = kRowTiles == 2 || kPassGroups == 2 ? 4 : 6;

// One pass over kGroups groups of 8 tokens from grouped entry c0 (the register form's run_pass on staged tiles):
// warp w decodes tiles w, w + 4, ... of each row tile as their stages land, the next tile's token values in flight
// while it decodes this one; then the split-K partials are summed in warp order, row tile r by warp r, a group of
// 8 tokens at a time. Later passes find every stage landed.
template <bool kSwiglu, int kGroups, int kRowTiles>
__device__ __forceinline__ void run_staged_pass(const KernelArgs& a, int e, int row0, int c0, int p_end,
                                                const unsigned char* shared, const Layout& layout, std::uint64_t* bars,
                                                float4* partial) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int groups = a.groups, in = groups * 32, tiles = (groups + kGroupsPerTile - 1) / kGroupsPerTile;
  const __nv_bfloat16* xrow[kGroups];
#pragma unroll
  for (int n = 0; n < kGroups; ++n) {
    const int p = c0 + kTokensPerMma * n + g;
    xrow[n] = p < p_end ? a.x + static_cast<std::int64_t>(a.inputs_are_tokens ? a.rows[p] : p) * in : nullptr;
  }
  float acc[kRowTiles][kGroups][4] = {};
  XTile next[kGroups];
#pragma unroll
  for (int n = 0; n < kGroups; ++n)
    next[n] = load_x_tile(xrow[n], warp * kGroupsPerTile + t, warp * kGroupsPerTile + t < groups);
  for (int tile = warp; tile < tiles; tile += kWarps) {
    XTile cur[kGroups];
#pragma unroll
    for (int n = 0; n < kGroups; ++n) cur[n] = next[n];
    const int grp = tile * kGroupsPerTile + t, ahead = grp + kWarps * kGroupsPerTile;
#pragma unroll
    for (int n = 0; n < kGroups; ++n) next[n] = load_x_tile(xrow[n], ahead, ahead < groups);
    bulk_copy::wait(&bars[tile / kWarps], 0);
    const auto words = [&](int n, int q) { return cur[n].v[q]; };
#pragma unroll
    for (int r = 0; r < kRowTiles; ++r) {
      const TileLoad l = Staged<kRowTiles>::tile(shared, layout, groups, grp, r);
      if (needs_two_multiplies(l))
        mma_tile_groups<true, kGroups>(l, words, acc[r]);
      else
        mma_tile_groups<false, kGroups>(l, words, acc[r]);
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
    __syncthreads();
    if (warp < kRowTiles) {
      const int r = warp;
      float4 s = partial[r * 32 + source];
#pragma unroll
      for (int w = 1; w < kWarps; ++w) {
        const float4 u = partial[(w * kRowTiles + r) * 32 + source];
        s.x += u.x, s.y += u.y, s.z += u.z, s.w += u.w;
      }
      // s.x, s.y: row g, entries 2t, 2t + 1 of the group; s.z, s.w: row g + 8, the same entries.
      const float v[4] = {s.x, s.y, s.z, s.w};
      const int p0 = c0 + kTokensPerMma * n + 2 * t, r0 = row0 + kTileRows * r;
      store_outputs<kSwiglu>(a, e, r0 + g, r0 + g + 8, p0, p0 + 1, p_end, v);
    }
    __syncthreads();  // partial[] is rewritten by the next group or pass
  }
}

// CTA (block of kRowTiles x 16 rows, routed expert slot): the rows of expert experts[slot] staged whole (every
// stage's copies issued at once: ~48 KB in flight a CTA at K = 2,880, where the register form keeps one 1 KB tile a
// warp), then passes of 8 or 16 tokens as in the register form. Where the grouping is settled (written two or more
// launches back), the ids are read and the copies issued before the dependent-launch wait.
template <bool kSwiglu, int kPassGroups, int kRowTiles>
__global__ void __launch_bounds__(kWarps * 32, kCtasPerSm<kPassGroups, kRowTiles>)
    mxfp4_grouped_staged_kernel(KernelArgs a, bool settled, const __grid_constant__ CUtensorMap weight_map) {
  extern __shared__ __align__(16) unsigned char shared[];
  using S = Staged<kRowTiles>;
  const int groups = a.groups;
  const Layout layout = S::layout(shared, groups, kHeader<kRowTiles>);
  auto* bars = reinterpret_cast<std::uint64_t*>(shared);
  auto* partial = reinterpret_cast<float4*>(shared + kPartials);
  if (threadIdx.x == 0) staged_rows::init_stage_barriers(bars, S::stages(groups));
  __syncthreads();
  if (!settled) begin_dependent_grid();
  const int slot = blockIdx.y;
  // experts[] is -1 past the routed ones: a CTA past them stops without reading a routed count first.
  const int e = settled ? __ldcg(a.experts + slot) : a.experts[slot];
  if (e < 0) {
    if (settled) begin_dependent_grid();
    return;
  }
  const int row0 = blockIdx.x * kTileRows * kRowTiles;
  S::template issue_copies<kWarps>(&weight_map, a.scales, e * a.out_rows + row0, groups, layout, shared, bars);
  const int p_begin = settled ? __ldcg(a.offsets + e) : a.offsets[e];
  const int p_end = settled ? __ldcg(a.offsets + e + 1) : a.offsets[e + 1];
  if (settled) begin_dependent_grid();
  for (int c0 = p_begin; c0 < p_end; c0 += kPassGroups * kTokensPerMma) {
    if (kPassGroups == 2 && p_end - c0 > kTokensPerMma)
      run_staged_pass<kSwiglu, 2, kRowTiles>(a, e, row0, c0, p_end, shared, layout, bars, partial);
    else
      run_staged_pass<kSwiglu, 1, kRowTiles>(a, e, row0, c0, p_end, shared, layout, bars, partial);
  }
}

template <bool kSwiglu, int kPassGroups, int kRowTiles>
Status launch(const KernelArgs& a, bool settled, const ExpertWeights& w, std::int64_t launch_slots,
              cudaStream_t stream) {
  const auto kernel = mxfp4_grouped_staged_kernel<kSwiglu, kPassGroups, kRowTiles>;
  static const cudaError_t opted_in =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shared_bytes<kRowTiles>(kMaxGroups));
  D0_CUDA_RETURN_IF_ERROR(opted_in);
  CUtensorMap map;
  D0_RETURN_IF_ERROR(Staged<kRowTiles>::tensor_map(w, map));
  const dim3 grid(static_cast<unsigned>(w.out / (kTileRows * kRowTiles)), static_cast<unsigned>(launch_slots));
  const auto bytes = static_cast<std::size_t>(shared_bytes<kRowTiles>(a.groups));
  launch_dependent(kernel, grid, kWarps * 32, bytes, stream, a, settled && dependent_launch_enabled(), map);
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("mxfp4_grouped_staged_kernel");
  return Status::success();
}

template <int kPassGroups, int kRowTiles>
Status launch(const KernelArgs& a, bool swiglu, bool settled, const ExpertWeights& w, std::int64_t launch_slots,
              cudaStream_t stream) {
  return swiglu ? launch<true, kPassGroups, kRowTiles>(a, settled, w, launch_slots, stream)
                : launch<false, kPassGroups, kRowTiles>(a, settled, w, launch_slots, stream);
}

}  // namespace

static_assert(shared_bytes<2>(kMaxGroups) <= 227 * 1024, "a CTA's shared memory on an H100 / H200");

bool mxfp4_grouped_staged_fits(const ExpertWeights& w) { return Staged<1>::fits(w, kMaxGroups); }

Status mxfp4_grouped_staged_matmul_cuda(const KernelArgs& a, const ExpertWeights& w, bool swiglu, int pass_tokens,
                                        bool settled, std::int64_t launch_slots, cudaStream_t stream) {
  if (!mxfp4_grouped_staged_fits(w))
    return make_error("mxfp4_grouped_staged_matmul_cuda: the experts do not fit the staged form (" +
                      std::to_string(w.out) + " x " + std::to_string(w.in) + ")");
  const bool sixteen = pass_tokens == 16;
  if (Staged<2>::fits(w, kMaxGroups))
    return sixteen ? launch<2, 2>(a, swiglu, settled, w, launch_slots, stream)
                   : launch<1, 2>(a, swiglu, settled, w, launch_slots, stream);
  return sixteen ? launch<2, 1>(a, swiglu, settled, w, launch_slots, stream)
                 : launch<1, 1>(a, swiglu, settled, w, launch_slots, stream);
}

}  // namespace day0
