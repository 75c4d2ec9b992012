// Small-M dense linear on tensor cores: see the header for the scheme.
#include "ops/cuda/linear_small_cuda.h"

#include <cooperative_groups.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <string>

#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/dependent_launch.h"
#include "ops/cuda/mma_sync.cuh"

namespace day0 {
namespace {

constexpr int kRowsPerCta = 16;   // the MMA's M
constexpr int kTokensPerMma = 8;  // the MMA's N
// CTA shapes: split-K warps x 32-wide k blocks whose weights a lane loads before it multiplies. Many row tiles
// (lm_head): 8 x 4, several CTAs per SM. Some hundreds (q/k/v, o): a cluster of two 4 x 4 CTAs per tile, each on
// half of K: 320 or 180 tiles of 8 warps left SMs with 2 or 3 CTAs (1 or 2 for o) side by side, where a tile's
// two halves spread over every SM in one wave. A few (the router: 2 tiles of 16 experts at 20b): 16 x 8 on one
// SM each, so a row tile of K = 2,880 is a single round of loads, issued before the dependent wait.
constexpr int kWarps = 8, kInFlight = 4;
constexpr int kSplitWarps = 4;
constexpr std::int64_t kSplitMaxTiles = 1024;
constexpr int kWideWarps = 16, kWideInFlight = 8;
constexpr std::int64_t kWideMaxTiles = 16;

enum BiasKind : int { kNoBias = 0, kBiasF32 = 1, kBiasBf16 = 2 };

struct Target {
  const __nv_bfloat16* w;
  const void* bias;
  float* out;
  int bias_kind;
  int n;           // output rows
  int tile_begin;  // first CTA of this target
};

struct Args {
  const float* x;
  int m, k;
  int n_targets;
  Target t[kLinearSmallMaxTargets];
};

// Weights are read once per step: keep them out of L1, where x lives.
__device__ __forceinline__ uint4 load_streaming(const uint4* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

__device__ __forceinline__ float bias_value(const Target& t, int row) {
  if (t.bias_kind == kBiasF32) return static_cast<const float*>(t.bias)[row];
  if (t.bias_kind == kBiasBf16) return __bfloat162float(static_cast<const __nv_bfloat16*>(t.bias)[row]);
  return 0.f;
}

// kTiles MMAs of 8 tokens: M <= 8 kTiles. Lane (g, t) of a warp owns, in every 32-wide k block, the 8 contiguous
// values 8t..8t+7 of weight rows g and g + 8 and of token g of each tile; the first MMA takes values 8t..8t+3,
// the second 8t+4..8t+7 (a fixed renaming of k, the same for A and B).
// kSplit CTAs (a cluster) share a row tile, CTA r on the r-th part of the k blocks; CTA 0 adds the others'
// sums to its own in rank order (deterministic: the shape follows N only).
// Registers capped so 4 CTAs of 8 warps (one token tile) or 3 (two) fit an SM, 8 or 6 of 4 warps: q/k/v's 320
// CTAs in one wave instead of 264 + 56 at the uncapped 110 registers (ptxas: no spills at 64 and 80). The wide
// shape takes a whole SM.
template <int kTiles, int kWarps, int kInFlight, int kSplit>
__global__ void __launch_bounds__(kWarps * 32, kWarps <= 8 ? (kTiles == 1 ? 32 : 24) / kWarps : 1)
    linear_small_kernel(Args a) {
  const int tile_index = static_cast<int>(blockIdx.x) / kSplit, part = static_cast<int>(blockIdx.x) % kSplit;
  Target tg = a.t[0];
#pragma unroll
  for (int i = 1; i < kLinearSmallMaxTargets; ++i)
    if (i < a.n_targets && tile_index >= a.t[i].tile_begin) tg = a.t[i];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int row0 = (tile_index - tg.tile_begin) * kRowsPerCta;
  const int chunks = a.k / 8;  // 16-byte pieces of a row
  const int part_blocks = ((chunks + 3) / 4 + kSplit - 1) / kSplit;
  const int kb_begin = part * part_blocks, k_blocks = min((chunks + 3) / 4, kb_begin + part_blocks);
  // Rows past N read the last row (in bounds) and are not stored.
  const uint4* w_lo = reinterpret_cast<const uint4*>(tg.w + static_cast<std::int64_t>(min(row0 + g, tg.n - 1)) * a.k);
  const uint4* w_hi =
      reinterpret_cast<const uint4*>(tg.w + static_cast<std::int64_t>(min(row0 + g + 8, tg.n - 1)) * a.k);
  // Rows beyond 16 come in slices of 16 (grid.y), each computed as if it were the whole call.
  const int token0 = static_cast<int>(blockIdx.y) * kLinearSmallMaxRows;
  const float* x_row[kTiles];
#pragma unroll
  for (int i = 0; i < kTiles; ++i) {
    const int token = token0 + i * kTokensPerMma + g;
    x_row[i] = token < a.m ? a.x + static_cast<std::int64_t>(token) * a.k : nullptr;
  }
  float acc[kTiles][4];
#pragma unroll
  for (int i = 0; i < kTiles; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;

  uint4 lo[kInFlight], hi[kInFlight];
  auto load_weights = [&](int kb0) {
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int c = (kb0 + u) * 4 + t;
      lo[u] = hi[u] = make_uint4(0, 0, 0, 0);
      if (c < chunks && kb0 + u < k_blocks) {
        lo[u] = load_streaming(w_lo + c);
        hi[u] = load_streaming(w_hi + c);
      }
    }
  };
  // No kernel writes weights during a step: the first round's loads go out before waiting for the kernel before.
  const int first = kb_begin + warp * kInFlight;
  load_weights(first);
  begin_dependent_grid();
  for (int kb0 = first; kb0 < k_blocks; kb0 += kWarps * kInFlight) {
    if (kb0 != first) load_weights(kb0);
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int c = (kb0 + u) * 4 + t;
#pragma unroll
      for (int i = 0; i < kTiles; ++i) {
        std::uint32_t b[4] = {0, 0, 0, 0};
        if (x_row[i] != nullptr && c < chunks && kb0 + u < k_blocks) {
          const float4 p = __ldg(reinterpret_cast<const float4*>(x_row[i]) + 2 * c);
          const float4 q = __ldg(reinterpret_cast<const float4*>(x_row[i]) + 2 * c + 1);
          b[0] = pack_bf16x2(p.x, p.y);
          b[1] = pack_bf16x2(p.z, p.w);
          b[2] = pack_bf16x2(q.x, q.y);
          b[3] = pack_bf16x2(q.z, q.w);
        }
        mma_bf16_16816(acc[i], lo[u].x, hi[u].x, lo[u].y, hi[u].y, b[0], b[1]);
        mma_bf16_16816(acc[i], lo[u].z, hi[u].z, lo[u].w, hi[u].w, b[2], b[3]);
      }
    }
  }

  // Split-K partials summed in warp order (deterministic); warp i finishes token tile i.
  __shared__ float partial[kWarps][kTiles][32][4];
#pragma unroll
  for (int i = 0; i < kTiles; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) partial[warp][i][lane][j] = acc[i][j];
  __syncthreads();
  const int tile = min(warp, kTiles - 1);
  float v[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    float s = partial[0][tile][lane][j];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) s += partial[w][tile][lane][j];
    v[j] = s;
  }
  if constexpr (kSplit > 1) {  // every thread takes part in the cluster barriers
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    __shared__ float sums[kTiles][32][4];
    if (warp < kTiles)
#pragma unroll
      for (int j = 0; j < 4; ++j) sums[tile][lane][j] = v[j];
    cluster.sync();  // every CTA's sums are written
    if (part == 0 && warp < kTiles)
      for (int r = 1; r < kSplit; ++r) {
        const float* other = cluster.map_shared_rank(&sums[tile][lane][0], r);
#pragma unroll
        for (int j = 0; j < 4; ++j) v[j] += other[j];
      }
    cluster.sync();  // the others' shared memory stays until CTA 0 has read it
    if (part != 0) return;
  }
  if (warp >= kTiles) return;
  // v[0], v[1]: row g, tokens 2t, 2t + 1; v[2], v[3]: row g + 8, the same tokens.
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int row = row0 + g + (j < 2 ? 0 : 8), token = token0 + tile * kTokensPerMma + 2 * t + j % 2;
    if (row < tg.n && token < a.m) tg.out[static_cast<std::int64_t>(token) * tg.n + row] = v[j] + bias_value(tg, row);
  }
}

}  // namespace

bool linear_small_fits(const Tensor& x, const std::vector<LinearTarget>& targets, std::int64_t max_rows) {
  if (x.dim() != 2 || x.size(0) < 1 || x.size(0) > std::min(max_rows, kLinearSmallMaxSlicedRows) || x.size(1) % 8 != 0)
    return false;
  if (targets.empty() || targets.size() > static_cast<size_t>(kLinearSmallMaxTargets)) return false;
  for (const LinearTarget& t : targets)
    if (t.w.dtype() != DType::bf16) return false;
  return true;
}

Status linear_small_cuda(const Tensor& x, const std::vector<LinearTarget>& targets, cudaStream_t stream, int k_split) {
  const char* op = "linear_small_cuda";
  if (!linear_small_fits(x, targets, kLinearSmallMaxSlicedRows))
    return make_error(std::string(op) + ": needs x f32 [M <= " + std::to_string(kLinearSmallMaxSlicedRows) +
                      ", K % 8 == 0] and 1..4 bf16 weights, got x " + shape_to_string(x.shape()) + " and " +
                      std::to_string(targets.size()) + " weights");
  const std::int64_t M = x.size(0), K = x.size(1);
  D0_RETURN_IF_ERROR(check_cuda_tensor(x, op, "x", {DType::f32}, {M, K}));
  if (!aligned_to(x.raw(), 16)) return make_error(std::string(op) + ": x must be 16-byte aligned");
  Args a{};
  a.x = x.data<float>();
  a.m = static_cast<int>(M);
  a.k = static_cast<int>(K);
  a.n_targets = static_cast<int>(targets.size());
  std::int64_t tiles = 0;
  for (size_t i = 0; i < targets.size(); ++i) {
    const LinearTarget& lt = targets[i];
    if (lt.w.dim() != 2) return make_error(std::string(op) + ": weight " + std::to_string(i) + " must be [N, K]");
    const std::int64_t N = lt.w.size(0);
    D0_RETURN_IF_ERROR(check_cuda_tensor(lt.w, op, "weight", {DType::bf16}, {N, K}));
    D0_RETURN_IF_ERROR(check_cuda_tensor(lt.out, op, "out", {DType::f32}, {M, N}));
    if (!aligned_to(lt.w.raw(), 16)) return make_error(std::string(op) + ": weights must be 16-byte aligned");
    Target& t = a.t[i];
    t.w = static_cast<const __nv_bfloat16*>(lt.w.raw());
    Tensor out = lt.out;  // a handle: the target's storage
    t.out = out.data<float>();
    t.n = static_cast<int>(N);
    t.tile_begin = static_cast<int>(tiles);
    if (has_values(lt.bias)) {
      D0_RETURN_IF_ERROR(check_cuda_tensor(lt.bias, op, "bias", {DType::f32, DType::bf16}, {N}));
      t.bias = lt.bias.raw();
      t.bias_kind = lt.bias.dtype() == DType::f32 ? kBiasF32 : kBiasBf16;
    }
    tiles += (N + kRowsPerCta - 1) / kRowsPerCta;
    if (N < 1 || tiles > 2147483647) return make_error(std::string(op) + ": N must be in [1, 2^31 * 16)");
  }
  if (k_split < 0 || k_split > 2)
    return make_error(std::string(op) + ": k_split must be 0 (by shape), 1 or 2, got " + std::to_string(k_split));
  if (k_split == 0) k_split = tiles > kWideMaxTiles && tiles <= kSplitMaxTiles ? 2 : 1;
  const std::int64_t slices = (M + kLinearSmallMaxRows - 1) / kLinearSmallMaxRows;
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(slices)), block(kWarps * 32);
  static_assert(kLinearSmallMaxRows <= 2 * kTokensPerMma, "one or two token tiles");
  const bool one_tile = M <= kTokensPerMma;
  // The shape follows N only: a token's sums do not depend on the batch around it.
  if (k_split == 2) {
    const dim3 split_grid(static_cast<unsigned>(2 * tiles), static_cast<unsigned>(slices)),
        split_block(kSplitWarps * 32);
    if (one_tile)
      launch_dependent_clusters(linear_small_kernel<1, kSplitWarps, kInFlight, 2>, split_grid, split_block, 2, 0,
                                stream, a);
    else
      launch_dependent_clusters(linear_small_kernel<2, kSplitWarps, kInFlight, 2>, split_grid, split_block, 2, 0,
                                stream, a);
  } else if (tiles <= kWideMaxTiles) {
    const dim3 wide_block(kWideWarps * 32);
    if (one_tile)
      launch_dependent(linear_small_kernel<1, kWideWarps, kWideInFlight, 1>, grid, wide_block, 0, stream, a);
    else
      launch_dependent(linear_small_kernel<2, kWideWarps, kWideInFlight, 1>, grid, wide_block, 0, stream, a);
  } else if (one_tile) {
    launch_dependent(linear_small_kernel<1, kWarps, kInFlight, 1>, grid, block, 0, stream, a);
  } else {
    launch_dependent(linear_small_kernel<2, kWarps, kInFlight, 1>, grid, block, 0, stream, a);
  }
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("linear_small_kernel");
  return Status::success();
}

}  // namespace day0
