// Fused MXFP4 grouped expert matmul and the MoE combine: see the header for the scheme.
#include "ops/cuda/moe_mxfp4_fused_cuda.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <climits>
#include <string>

#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/dependent_launch.h"
#include "ops/cuda/moe_mxfp4_kernels.cuh"

namespace day0 {
namespace {

using namespace mxfp4_kernels;

constexpr int kRowsPerCta = 16;   // the MMA's M
constexpr int kTokensPerMma = 8;  // the MMA's N
// CTA shape: split-K warps (kWarps, a template parameter) x tiles each warp loads before it decodes. On the H200
// (bench-moe, 20b and 120b down shapes) 4 x 1 was the fastest of 4 x 1, 4 x 6, 8 x 2 and 8 x 3 from 4 tokens on
// (8 x 1: 32.0 / 48.3 / 172.7 us at 4 / 8 / 64 tokens against 30.5 / 44.2 / 128.0); at one token 8 x 1 wins
// (12.8 us against 15.4: twice the warps, each with half the serial round trips, where the grid is under a wave).
constexpr int kInFlight = 1;

// One pass of the kernel below over kGroups groups of 8 tokens from grouped entry c0: every tile of the warp's K
// share (of each of the CTA's kRowTiles row tiles) decoded once for all of them, then the split-K partials summed
// in warp order (deterministic), row tile r by warp r. Lane (g, t)'s B operand in group n is token c0 + 8 n + g;
// it is loaded once per k-tile for all the row tiles. `reload`: buf holds an earlier pass's tiles.
template <int kWarps, bool kSwiglu, int kGroups, int kSlots, int kRowTiles, class LoadRound>
__device__ __forceinline__ void run_pass(const KernelArgs& a, int e, int row0, int c0, int p_end, int first, int tiles,
                                         TileLoad (&buf)[kInFlight][kRowTiles], const LoadRound& load_round,
                                         bool reload, float (&partial)[kWarps][kRowTiles][kSlots][32][4]) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int in = a.groups * 32;
  constexpr int kRound = kWarps * kInFlight;  // tiles between a warp's rounds
  const __nv_bfloat16* xrow[kGroups];
#pragma unroll
  for (int n = 0; n < kGroups; ++n) {
    const int p = c0 + kTokensPerMma * n + g;
    xrow[n] = p < p_end ? a.x + static_cast<std::int64_t>(a.inputs_are_tokens ? a.rows[p] : p) * in : nullptr;
  }
  float acc[kRowTiles][kGroups][4] = {};

  for (int base = first; base < tiles; base += kRound) {
    if (base != first || reload) load_round(base);
    XTile xt[kInFlight][kGroups];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int grp = (base + u) * kGroupsPerTile + t;
#pragma unroll
      for (int n = 0; n < kGroups; ++n) xt[u][n] = load_x_tile(xrow[n], grp, grp < a.groups);
    }
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const auto words = [&](int n, int q) { return xt[u][n].v[q]; };
#pragma unroll
      for (int r = 0; r < kRowTiles; ++r) {
        if (needs_two_multiplies(buf[u][r]))
          mma_tile_groups<true, kGroups>(buf[u][r], words, acc[r]);
        else
          mma_tile_groups<false, kGroups>(buf[u][r], words, acc[r]);
      }
    }
  }

#pragma unroll
  for (int r = 0; r < kRowTiles; ++r)
#pragma unroll
    for (int n = 0; n < kGroups; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) partial[warp][r][n][lane][i] = acc[r][n][i];
  __syncthreads();
  if (warp < kRowTiles) {
    const int r = warp;
#pragma unroll
    for (int n = 0; n < kGroups; ++n) {
      float v[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float s = partial[0][r][n][lane][i];
#pragma unroll
        for (int w = 1; w < kWarps; ++w) s += partial[w][r][n][lane][i];
        v[i] = s;
      }
      // v[0], v[1]: row g, tokens 2t, 2t + 1 of the group; v[2], v[3]: row g + 8, the same tokens.
      const int p0 = c0 + kTokensPerMma * n + 2 * t, r0 = row0 + kRowsPerCta * r;
      store_outputs<kSwiglu>(a, e, r0 + g, r0 + g + 8, p0, p0 + 1, p_end, v);
    }
  }
  __syncthreads();  // partial[] is rewritten by the next pass
}

// Passes of 8 tokens, or of up to 16 with kPassGroups = 2 (one MMA per k-step and 8 tokens; an expert with more
// makes further passes, a pass of at most 8 runs one MMA: the decode, most of the work, is shared by the pass's
// tokens; the sums are those of 8-token passes, bit for bit). kWarps warps split K; each
// takes kInFlight consecutive tiles per round and issues all their loads, its tokens' values with them, before it
// decodes the first. kRowTiles row tiles of 16 per CTA share each load of the token values (the same sums).
// kSwiglu: bf16 h by grouped entry; else f32 rows by assignment.
// Registers capped at 64: 8 CTAs of 4 warps per SM (6-7 at 72-80 uncapped), more weight loads in flight and the
// down projection's 720 decode CTAs in one wave (ptxas: no spills). With 8 warps: 4 CTAs per SM. 16-token passes
// hold twice the token values: capped at 80 (6 CTAs of 4 warps), where 64 spilled. Two row tiles hold two tiles'
// weights and sums: 80 registers with 8-token passes (6 CTAs), 118 with 16 (4 CTAs), no spills.
template <int kWarps, int kPassGroups, int kRowTiles>
constexpr int fused_ctas_per_sm() {
  if (kRowTiles == 1) return (kPassGroups == 1 ? 32 : 24) / kWarps;
  return kPassGroups == 1 ? 6 : 4;
}

// kTiled: the blocks in quant/mxfp4_tiles.h's order (a template argument: the row-major form keeps its registers).
template <int kWarps, bool kSwiglu, int kPassGroups, int kRowTiles, bool kTiled>
__global__ void __launch_bounds__(kWarps * 32, (fused_ctas_per_sm<kWarps, kPassGroups, kRowTiles>()))
    mxfp4_grouped_mma_kernel(KernelArgs a) {
  begin_dependent_grid();
  // experts[] is -1 past the routed ones: a CTA past them stops without reading a routed count first.
  const int e = a.experts[blockIdx.y];
  if (e < 0) return;
  const int warp = threadIdx.x / 32, g = (threadIdx.x % 32) / 4, t = threadIdx.x % 4;
  const int row0 = blockIdx.x * kRowsPerCta * kRowTiles;
  std::int64_t base_g[kRowTiles], base_h[kRowTiles];  // row-major: the rows' blocks and scales; tiled: the scales
  std::int64_t unit_g[kRowTiles];  // tiled: the lane's block of tile 0 for row g (row g + 8's: 32 units on)
#pragma unroll
  for (int r = 0; r < kRowTiles; ++r) {
    const std::int64_t row_g = static_cast<std::int64_t>(e) * a.out_rows + row0 + kRowsPerCta * r + g;
    base_g[r] = row_g * a.groups;
    base_h[r] = base_g[r] + static_cast<std::int64_t>(8) * a.groups;
    if constexpr (kTiled) {
      unit_g[r] = mxfp4_tiled_unit(row_g, t, a.groups);  // group t: tile 0's block of the lane
    }
  }
  const int tiles = (a.groups + kGroupsPerTile - 1) / kGroupsPerTile;
  const int first = warp * kInFlight;

  TileLoad buf[kInFlight][kRowTiles];
  auto load_round = [&](int base) {
#pragma unroll
    for (int u = 0; u < kInFlight; ++u)
#pragma unroll
      for (int r = 0; r < kRowTiles; ++r)
        if constexpr (kTiled)
          buf[u][r] = load_tile_tiled(a.blocks, a.scales, a.groups, unit_g[r], base_g[r], base_h[r],
                                      (base + u) * kGroupsPerTile + t);
        else
          buf[u][r] =
              load_tile(a.blocks, a.scales, a.groups, base_g[r], base_h[r], (base + u) * kGroupsPerTile + t);
  };
  load_round(first);  // the weights' loads go out before the token bookkeeping is read
  const int p_begin = a.offsets[e], p_end = a.offsets[e + 1];

  __shared__ float partial[kWarps][kRowTiles][kPassGroups][32][4];

  for (int c0 = p_begin; c0 < p_end; c0 += kPassGroups * kTokensPerMma) {
    if (kPassGroups == 2 && p_end - c0 > kTokensPerMma)
      run_pass<kWarps, kSwiglu, 2>(a, e, row0, c0, p_end, first, tiles, buf, load_round, c0 != p_begin, partial);
    else
      run_pass<kWarps, kSwiglu, 1>(a, e, row0, c0, p_end, first, tiles, buf, load_round, c0 != p_begin, partial);
  }
}

template <int kWarps, int kPassGroups, int kRowTiles, bool kTiled>
void launch_order(const KernelArgs& a, bool swiglu, dim3 grid, cudaStream_t stream) {
  if (swiglu)
    launch_dependent(mxfp4_grouped_mma_kernel<kWarps, true, kPassGroups, kRowTiles, kTiled>, grid, kWarps * 32, 0,
                     stream, a);
  else
    launch_dependent(mxfp4_grouped_mma_kernel<kWarps, false, kPassGroups, kRowTiles, kTiled>, grid, kWarps * 32, 0,
                     stream, a);
}

template <int kWarps, int kPassGroups, int kRowTiles = 1>
void launch(const KernelArgs& a, bool swiglu, dim3 grid, cudaStream_t stream) {
  grid.x /= kRowTiles;
  if (a.tiled)
    launch_order<kWarps, kPassGroups, kRowTiles, true>(a, swiglu, grid, stream);
  else
    launch_order<kWarps, kPassGroups, kRowTiles, false>(a, swiglu, grid, stream);
}

__global__ void moe_combine_kernel(const float* y, const std::int32_t* idx, const float* wts, std::int64_t S, int k,
                                   std::int64_t H, float* __restrict__ out) {
  begin_dependent_grid();
  const std::int64_t total = S * H;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t s = i / H, c = i % H;
    const std::int32_t* ids = idx + s * k;
    float acc = 0.f;
    int prev_e = INT_MIN, prev_j = -1;
    for (int n = 0; n < k; ++n) {  // next (expert, slot) in ascending order: k is small
      int best_j = -1, best_e = INT_MAX;
      for (int j = 0; j < k; ++j) {
        const int ej = ids[j];
        const bool after = ej > prev_e || (ej == prev_e && j > prev_j);
        if (after && (best_j < 0 || ej < best_e)) best_j = j, best_e = ej;
      }
      acc = __fadd_rn(acc, __fmul_rn(y[(s * k + best_j) * H + c], wts[s * k + best_j]));
      prev_e = best_e;
      prev_j = best_j;
    }
    out[i] = acc;
  }
}

}  // namespace

Status mxfp4_grouped_matmul_cuda(const Tensor& x, bool inputs_are_tokens, const ExpertWeights& w,
                                 const DeviceExpertGroups& groups, bool wide_split, std::int64_t launch_slots,
                                 const SwigluParams* swiglu, Tensor& out, cudaStream_t stream, int pass_tokens) {
  const char* op = "mxfp4_grouped_matmul_cuda";
  D0_ASSIGN_OR_RETURN(KernelArgs args, grouped_kernel_args(op, x, inputs_are_tokens, w, groups, swiglu, out));
  if (w.out % kRowsPerCta != 0)
    return make_error(std::string(op) + ": out must be a multiple of 16, got " + std::to_string(w.out));
  if (launch_slots < 0 || launch_slots > 65535)
    return make_error(std::string(op) + ": launch_slots must be in [0, 65535], got " + std::to_string(launch_slots));
  if (pass_tokens != 0 && pass_tokens != 8 && pass_tokens != 16)
    return make_error(std::string(op) + ": pass_tokens must be 0, 8 or 16, got " + std::to_string(pass_tokens));
  if (launch_slots == 0 || groups.rows.numel() == 0) return Status::success();
  const dim3 grid(static_cast<unsigned>(w.out / kRowsPerCta), static_cast<unsigned>(launch_slots));
  if (pass_tokens == 0) pass_tokens = fused_moe_pass_tokens(groups.rows.numel(), launch_slots);
  // Two row tiles a CTA where out allows: bench-moe (H200, 20b down shape) 8 / 32 / 64 / 128 / 256 tokens 39.9 /
  // 60.5 / 76.7 / 118.2 / 214.6 us on one, 38.8 / 57.0 / 73.6 / 103.0 / 173.3 on two (the same sums).
  const bool swiglu_out = swiglu != nullptr;
  if (wide_split)
    launch<8, 1>(args, swiglu_out, grid, stream);
  else if (w.out % (2 * kRowsPerCta) != 0)
    pass_tokens == 16 ? launch<4, 2>(args, swiglu_out, grid, stream) : launch<4, 1>(args, swiglu_out, grid, stream);
  else
    pass_tokens == 16 ? launch<4, 2, 2>(args, swiglu_out, grid, stream)
                      : launch<4, 1, 2>(args, swiglu_out, grid, stream);
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("mxfp4_grouped_mma_kernel");
  return Status::success();
}

Status moe_combine_cuda(const Tensor& y, const Tensor& indices, const Tensor& weights, Tensor& out,
                        cudaStream_t stream) {
  const char* op = "moe_combine_cuda";
  if (indices.dim() != 2 || out.dim() != 2) return make_error(std::string(op) + ": indices and out must be 2-D");
  const std::int64_t S = indices.size(0), k = indices.size(1), H = out.size(1);
  D0_RETURN_IF_ERROR(check_cuda_tensor(indices, op, "indices", {DType::i32}, {S, k}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(weights, op, "weights", {DType::f32}, {S, k}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(y, op, "y", {DType::f32}, {S * k, H}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(out, op, "out", {DType::f32}, {S, H}));
  if (k <= 0 || k > 64) return make_error(std::string(op) + ": k must be in [1, 64]");
  if (S * H == 0) return Status::success();
  constexpr int kThreads = 256;
  const unsigned blocks = static_cast<unsigned>(std::min<std::int64_t>((S * H + kThreads - 1) / kThreads, 65536));
  launch_dependent(moe_combine_kernel, blocks, kThreads, 0, stream, y.data<float>(), indices.data<std::int32_t>(),
                   weights.data<float>(), S, static_cast<int>(k), H, out.data<float>());
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("moe_combine_kernel");
  return Status::success();
}

}  // namespace day0
