// Fused MXFP4 grouped expert matmul and the MoE combine: see the header for the scheme.
#include "ops/cuda/moe_mxfp4_fused_cuda.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <climits>
#include <string>

#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/mma_sync.cuh"
#include "ops/cuda/moe_mxfp4_kernels.cuh"

namespace day0 {
namespace {

using namespace mxfp4_kernels;

constexpr int kRowsPerCta = 16;    // the MMA's M
constexpr int kTokensPerMma = 8;   // the MMA's N
constexpr int kGroupsPerTile = 4;  // one 16-byte group per lane t (lane = 4 g + t)
// CTA shape: split-K warps, each with kStages tiles of weights in flight through cp.async into shared memory (the
// loads of register-staged tiles stalled each warp on one tile at a time; staging more in registers cost
// occupancy: 4 x 6 measured 15% slower than 4 x 1).
constexpr int kWarps = 4;
constexpr int kStages = 6;  // a 2880-wide row is 23 tiles: 6 per warp, all in flight at once
constexpr int kStagedBytes = kWarps * kStages * 2 * 32 * 16;
constexpr int kMinCtasPerSm = 5;  // <= 102 registers: 20 warps per SM to cover the token loads' latency  // [warp][stage][row g, g + 8][lane] 16-byte groups

// One lane's share of a tile: group `grp` of rows g and g + 8 (zeros past the last group).
struct TileLoad {
  uint4 g, h;
  std::uint32_t sg, sh;
};

// 16 bytes global -> shared without passing through registers; src_bytes 0 fills zeros (the source is not read).
__device__ __forceinline__ void cp_async16(uint4* smem, const uint4* gmem, int src_bytes) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// Starts this lane's loads of one tile: its two groups into its own shared slots (each lane reads back only what
// it staged, so no barrier), its two scale bytes into one register (row g's in bits 0-7, row g + 8's in 16-23).
__device__ __forceinline__ void stage_tile(const KernelArgs& a, std::int64_t base_g, std::int64_t base_h, int grp,
                                           uint4* slot, int lane, std::uint32_t& scales) {
  const bool ok = grp < a.groups;
  const int gi = ok ? grp : 0;
  cp_async16(slot + lane, a.blocks + base_g + gi, ok ? 16 : 0);
  cp_async16(slot + 32 + lane, a.blocks + base_h + gi, ok ? 16 : 0);
  scales = ok ? __ldg(a.scales + base_g + grp) | (std::uint32_t{__ldg(a.scales + base_h + grp)} << 16) : 0x007F007Fu;
}

// One chunk's B operand of a tile, loaded with the weights (decode: one chunk per pass): the 32 values of group
// grp of this lane's token row, zeros where there is no token or no group.
struct XTile {
  uint4 v[4];
};

// Token values as bf16 pairs: bf16 rows as they are, f32 rows rounded to nearest even (what
// convert_f32_to_bf16_cuda stores), so both give the same bits.
__device__ __forceinline__ std::uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const std::uint32_t*>(&v);
}

// Values 4i..4i+3 of p (16-byte aligned for f32, 8 for bf16) as 4 bf16.
__device__ __forceinline__ uint2 load_x4(const __nv_bfloat16* p) { return __ldg(reinterpret_cast<const uint2*>(p)); }
__device__ __forceinline__ uint2 load_x4(const float* p) {
  const float4 f = __ldg(reinterpret_cast<const float4*>(p));
  return make_uint2(pack_bf16x2(f.x, f.y), pack_bf16x2(f.z, f.w));
}

// Values 0..7 of p as 8 bf16.
__device__ __forceinline__ uint4 load_x8(const __nv_bfloat16* p) { return __ldg(reinterpret_cast<const uint4*>(p)); }
__device__ __forceinline__ uint4 load_x8(const float* p) {
  const uint2 a = load_x4(p), b = load_x4(p + 4);
  return make_uint4(a.x, a.y, b.x, b.y);
}

template <class TIn>
__device__ __forceinline__ XTile load_x_tile(const TIn* xrow, int grp, bool live) {
  XTile x;
#pragma unroll
  for (int i = 0; i < 4; ++i)
    x.v[i] = live && xrow != nullptr ? load_x8(xrow + grp * 32 + 8 * i) : make_uint4(0, 0, 0, 0);
  return x;
}

// Decodes one tile (this lane's group of rows g and g + 8) and runs its 8 k-steps for every chunk of tokens;
// with xpre, the one chunk's B operand comes from registers loaded ahead (load_x_tile).
template <int kChunks, bool kMayBeTwo, class TIn>
__device__ __forceinline__ void mma_tile_scaled(const TileLoad& cur, const GroupScale& fg, const GroupScale& fh,
                                                int grp, bool live, const TIn* const (&xrow)[kChunks],
                                                float (&acc)[kChunks][4], const XTile* xpre) {
  const std::uint32_t wg[4] = {cur.g.x, cur.g.y, cur.g.z, cur.g.w}, wh[4] = {cur.h.x, cur.h.y, cur.h.z, cur.h.w};
#pragma unroll
  for (int q = 0; q < 4; ++q) {  // word q = bytes 4q..4q+3 = values 8q..8q+7 = k-steps 2q, 2q + 1
    const std::uint32_t lo_g = wg[q] & 0x0F0F0F0Fu, hi_g = (wg[q] >> 4) & 0x0F0F0F0Fu;
    const std::uint32_t lo_h = wh[q] & 0x0F0F0F0Fu, hi_h = (wh[q] >> 4) & 0x0F0F0F0Fu;
#pragma unroll
    for (int half = 0; half < 2; ++half) {  // k-step j = 2q + half: bytes 2j, 2j + 1 = values 4j..4j+3
      const int b = 2 * half;
      const std::uint32_t a0 = scaled_if<kMayBeTwo>(e2m1_pair_to_bf16x2_scaled_down(lo_g, hi_g, b), fg);
      const std::uint32_t a1 = scaled_if<kMayBeTwo>(e2m1_pair_to_bf16x2_scaled_down(lo_h, hi_h, b), fh);
      const std::uint32_t a2 = scaled_if<kMayBeTwo>(e2m1_pair_to_bf16x2_scaled_down(lo_g, hi_g, b + 1), fg);
      const std::uint32_t a3 = scaled_if<kMayBeTwo>(e2m1_pair_to_bf16x2_scaled_down(lo_h, hi_h, b + 1), fh);
      const int value = grp * 32 + 8 * q + 4 * half;
#pragma unroll
      for (int n = 0; n < kChunks; ++n) {
        uint2 xv = make_uint2(0, 0);
        if (xpre != nullptr) {
          const uint4& w = xpre->v[q];  // k-step 2q + half: bytes 16q + 8 half of the group
          xv = half == 0 ? make_uint2(w.x, w.y) : make_uint2(w.z, w.w);
        } else if (live && xrow[n] != nullptr) {
          xv = load_x4(xrow[n] + value);
        }
        mma_bf16_16816(acc[n], a0, a1, a2, a3, xv.x, xv.y);
      }
    }
  }
}

// The whole warp calls this (MMAs are warp-wide): one vote picks the one-multiply decode unless a lane's group
// has a scale above 128.
template <int kChunks, class TIn>
__device__ __forceinline__ void mma_tile(const TileLoad& cur, int grp, bool live, const TIn* const (&xrow)[kChunks],
                                         float (&acc)[kChunks][4], const XTile* xpre = nullptr) {
  const GroupScale fg = group_scale(cur.sg), fh = group_scale(cur.sh);
  if (__any_sync(0xffffffffu, fg.two || fh.two))
    mma_tile_scaled<kChunks, true>(cur, fg, fh, grp, live, xrow, acc, xpre);
  else
    mma_tile_scaled<kChunks, false>(cur, fg, fh, grp, live, xrow, acc, xpre);
}

// kChunks MMAs of 8 tokens per pass over K. kWarps warps split K (warp w takes tiles w, w + kWarps, ...), each
// keeping kStages tiles in flight. kSwiglu: bf16 h by grouped entry; else f32 rows by assignment. TIn: the inputs'
// type (f32 tokens are rounded to bf16 as they load).
template <int kChunks, bool kSwiglu, class TIn>
__global__ void __launch_bounds__(kWarps * 32, kMinCtasPerSm) mxfp4_grouped_mma_kernel(KernelArgs a) {
  // experts[] is -1 past the routed ones: a CTA past them stops without reading a routed count first.
  const int e = a.experts[blockIdx.y];
  if (e < 0) return;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int row0 = blockIdx.x * kRowsPerCta;
  const std::int64_t expert_base = static_cast<std::int64_t>(e) * a.out_rows * a.groups;
  const std::int64_t base_g = expert_base + static_cast<std::int64_t>(row0 + g) * a.groups;
  const std::int64_t base_h = base_g + static_cast<std::int64_t>(8) * a.groups;
  const int in = a.groups * 32;
  const int tiles = (a.groups + kGroupsPerTile - 1) / kGroupsPerTile;
  const int n_mine = warp < tiles ? (tiles - warp + kWarps - 1) / kWarps : 0;  // this warp's tiles
  auto grp_of = [&](int j) { return (warp + j * kWarps) * kGroupsPerTile + t; };

  extern __shared__ uint4 staged[];
  uint4* my = staged + warp * kStages * 64;
  std::uint32_t scales[kStages];  // slot s's scale bytes (unrolled loops: register indices)
  // The first tiles' loads go out before the token bookkeeping is read.
#pragma unroll
  for (int s = 0; s < kStages; ++s) {
    if (s < n_mine) stage_tile(a, base_g, base_h, grp_of(s), my + s * 64, lane, scales[s]);
    cp_async_commit();
  }
  const int p_begin = a.offsets[e], p_end = a.offsets[e + 1];

  __shared__ float partial[kWarps][kChunks][32][4];

  for (int c0 = p_begin; c0 < p_end; c0 += kChunks * kTokensPerMma) {
    // This lane's B operand is token g of each chunk.
    const TIn* xrow[kChunks];
#pragma unroll
    for (int n = 0; n < kChunks; ++n) {
      const int p = c0 + n * kTokensPerMma + g;
      xrow[n] = nullptr;
      if (p < p_end)
        xrow[n] = static_cast<const TIn*>(a.x) + static_cast<std::int64_t>(a.inputs_are_tokens ? a.rows[p] : p) * in;
    }
    float acc[kChunks][4];
#pragma unroll
    for (int n = 0; n < kChunks; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
    if (c0 != p_begin) {  // a further pass: the weights again (from L2)
#pragma unroll
      for (int s = 0; s < kStages; ++s) {
        if (s < n_mine) stage_tile(a, base_g, base_h, grp_of(s), my + s * 64, lane, scales[s]);
        cp_async_commit();
      }
    }
    for (int j0 = 0; j0 < n_mine; j0 += kStages) {
#pragma unroll
      for (int s = 0; s < kStages; ++s) {
        const int j = j0 + s;
        if (j < n_mine) {
          const int grp = grp_of(j);
          // Decode: the token's values (L2) load while the weights' wait runs; other warps cover the rest.
          XTile xt{};
          if constexpr (kChunks == 1) xt = load_x_tile(xrow[0], grp, grp < a.groups);
          cp_async_wait<kStages - 1>();  // tile j (the oldest group) has landed
          const TileLoad cur{my[s * 64 + lane], my[s * 64 + 32 + lane], scales[s] & 0xFFu, scales[s] >> 16};
          mma_tile<kChunks>(cur, grp, grp < a.groups, xrow, acc, kChunks == 1 ? &xt : nullptr);
          if (j + kStages < n_mine) stage_tile(a, base_g, base_h, grp_of(j + kStages), my + s * 64, lane, scales[s]);
        }
        cp_async_commit();  // every slot step commits (maybe empty), so the wait count stays kStages - 1
      }
    }
    cp_async_wait<0>();

    // Split-K partials summed in warp order (deterministic); warp n finishes chunk n.
#pragma unroll
    for (int n = 0; n < kChunks; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) partial[warp][n][lane][i] = acc[n][i];
    __syncthreads();
    for (int n = warp; n < kChunks; n += kWarps) {
      float v[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float s = partial[0][n][lane][i];
#pragma unroll
        for (int w = 1; w < kWarps; ++w) s += partial[w][n][lane][i];
        v[i] = s;
      }
      // v[0], v[1]: row g, tokens 2t, 2t + 1; v[2], v[3]: row g + 8, the same tokens.
      const int p0 = c0 + n * kTokensPerMma + 2 * t;
      store_outputs<kSwiglu>(a, e, row0 + g, row0 + g + 8, p0, p0 + 1, p_end, v);
    }
    __syncthreads();  // partial[] is rewritten by the next pass
  }
}

template <int kChunks>
void launch(const KernelArgs& a, bool swiglu, dim3 grid, cudaStream_t stream) {
  if (swiglu && a.x_f32)
    mxfp4_grouped_mma_kernel<kChunks, true, float><<<grid, kWarps * 32, kStagedBytes, stream>>>(a);
  else if (swiglu)
    mxfp4_grouped_mma_kernel<kChunks, true, __nv_bfloat16><<<grid, kWarps * 32, kStagedBytes, stream>>>(a);
  else if (a.x_f32)
    mxfp4_grouped_mma_kernel<kChunks, false, float><<<grid, kWarps * 32, kStagedBytes, stream>>>(a);
  else
    mxfp4_grouped_mma_kernel<kChunks, false, __nv_bfloat16><<<grid, kWarps * 32, kStagedBytes, stream>>>(a);
}

__global__ void moe_combine_kernel(const float* __restrict__ y, const std::int32_t* __restrict__ idx,
                                   const float* __restrict__ wts, std::int64_t S, int k, std::int64_t H,
                                   float* __restrict__ out) {
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
                                 const DeviceExpertGroups& groups, std::int64_t max_tokens_per_expert,
                                 std::int64_t launch_slots, const SwigluParams* swiglu, Tensor& out,
                                 cudaStream_t stream) {
  const char* op = "mxfp4_grouped_matmul_cuda";
  D0_ASSIGN_OR_RETURN(KernelArgs args, grouped_kernel_args(op, x, inputs_are_tokens, w, groups, swiglu, out, true));
  if (w.out % kRowsPerCta != 0)
    return make_error(std::string(op) + ": out must be a multiple of 16, got " + std::to_string(w.out));
  if (launch_slots < 0 || launch_slots > 65535)
    return make_error(std::string(op) + ": launch_slots must be in [0, 65535], got " + std::to_string(launch_slots));
  if (launch_slots == 0 || groups.rows.numel() == 0) return Status::success();
  const dim3 grid(static_cast<unsigned>(w.out / kRowsPerCta), static_cast<unsigned>(launch_slots));
  // One pass carries up to 8, 16 or 32 tokens of an expert; an expert with more makes further passes.
  if (max_tokens_per_expert <= 8)
    launch<1>(args, swiglu != nullptr, grid, stream);
  else if (max_tokens_per_expert <= 16)
    launch<2>(args, swiglu != nullptr, grid, stream);
  else
    launch<4>(args, swiglu != nullptr, grid, stream);
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
  moe_combine_kernel<<<blocks, kThreads, 0, stream>>>(y.data<float>(), indices.data<std::int32_t>(),
                                                     weights.data<float>(), S, static_cast<int>(k), H,
                                                     out.data<float>());
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("moe_combine_kernel");
  return Status::success();
}

}  // namespace day0
