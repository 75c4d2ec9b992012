// Ops::draw_tokens on the GPU: token_draw.h's draw, bit for bit. A cluster of 8 CTAs a drawn row (greedy_tokens'
// shape: one CTA a row spent ~45 us on 201,088 exponentials), holding the row in shared memory
// (draw_cluster_row_cuda.cuh). A row with top-k or top-p first finds its cutoff in the cluster
// (token_cutoff_cuda.cuh), and the weights past it or under min-p are zero. Then each CTA's warps take its blocks,
// each lane summing its 64 weights in order and the warp adding the lane sums by shuffles (the tree token_draw.h
// defines); the block sums go into every CTA. Every CTA's warp 0 runs the block sums in order (lane 0, the host's
// additions) and finds the crossing block; its owner walks the block's lane sums and the crossing lane's weights.
// The weights repeat the host's float arithmetic with each multiply and add rounded on its own (__fmul_rn /
// __fadd_rn: no contraction into fused multiply-adds). A dependent launch: it waits for greedy_tokens' picks, whose
// launch it overlaps.
#include <cooperative_groups.h>

#include <climits>
#include <string>
#include <vector>

#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/dependent_launch.h"
#include "ops/cuda/draw_cluster_row_cuda.cuh"
#include "ops/cuda/token_cutoff_cuda.cuh"
#include "ops/token_draw.h"

namespace day0 {
namespace {

using namespace draw_cluster;

constexpr int kMaxDrawsPerLaunch = 64;  // 2.5 KB of the kernel's parameters

struct DrawArgs {
  const float* logits;
  int V;
  std::int32_t* out;     // [R, 2]: greedy_tokens' picks, the drawn rows' token replaced
  std::int32_t* tokens;  // [R] or null
  int n;
  TokenDraw draws[kMaxDrawsPerLaunch];
};

// The host's Weights (token_draw.cpp): zero past the cutoff or under min_p.
struct RowWeights {
  int V;
  float m, inv_t;
  TokenCutoff cut;
  double min_p;
  // Id `off` of block b, its logits at `ids`.
  __device__ __forceinline__ float operator()(const float* ids, int b, int off) const {
    const int i = b * kDrawBlock + off;
    if (i >= V) return 0.f;
    const float xi = ids[off];
    if (!cutoff_keeps(cut, logit_key(xi), i)) return 0.f;
    const float w = row_weight_device(xi, m, inv_t);
    return static_cast<double>(w) < min_p ? 0.f : w;
  }
};

__device__ __forceinline__ double lane_sum(const RowWeights& w, const float* ids, int b, int lane) {
  double s = 0.0;
#pragma unroll 8
  for (int k = 0; k < kPerLane; ++k) s += static_cast<double>(w(ids, b, lane + kDrawLanes * k));
  return s;
}

// Warp: the last positive weight of block b (the lanes from the last, in a lane its ids from the last), or -1.
__device__ int last_in_block(const RowWeights& w, const float* ids, int b, int lane) {
  int last = -1;
#pragma unroll 8
  for (int k = 0; k < kPerLane; ++k)
    if (w(ids, b, lane + kDrawLanes * k) > 0.f) last = k;
  const unsigned holders = __ballot_sync(0xffffffffu, last >= 0);
  if (holders == 0) return -1;
  const int l = 31 - __clz(static_cast<int>(holders));
  return b * kDrawBlock + l + kDrawLanes * __shfl_sync(0xffffffffu, last, l);
}

__global__ void __launch_bounds__(kThreads) draw_tokens_kernel(const __grid_constant__ DrawArgs a) {
  extern __shared__ float4 row_cache[];      // this CTA's slots of the row
  __shared__ double block_sums[kMaxBlocks];  // every block's, from its owner
  __shared__ double running[kMaxBlocks];     // their running sums, in the host's order
  __shared__ double cached_lane_sums[kCachedSlots][kDrawLanes];
  __shared__ double walk[kDrawLanes];
  __shared__ float lane_weights[kPerLane];
  __shared__ CutoffShared cutoff_shared;
  begin_dependent_grid();  // greedy_tokens' picks
  const cg::cluster_group cluster = cg::this_cluster();
  const TokenDraw d = a.draws[blockIdx.x / kClusterBlocks];
  std::int32_t* o = a.out + 2 * static_cast<std::int64_t>(d.row);
  if (o[1] != -1) return;  // greedy_tokens' report stands (the same for every CTA of the cluster)
  const float* x = a.logits + static_cast<std::int64_t>(d.row) * a.V;
  const float m = x[o[0]];
  const ClusterRow row = load_cluster_row(cluster, x, a.V, reinterpret_cast<float*>(row_cache));
  TokenCutoff cut{};  // token_cutoff's two descents, as the host runs them
  if (d.top_k > 0 && d.top_k < a.V) cut = cutoff_in_cluster(cluster, cutoff_shared, {row, m, d.inv_t, cut, false}, d);
  if (d.top_p < 1.0) cut = cutoff_in_cluster(cluster, cutoff_shared, {row, m, d.inv_t, cut, true}, d);
  const RowWeights w{a.V, m, d.inv_t, cut, d.min_p};
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  for (int slot = warp; slot < row.slots; slot += kWarps) {
    const int b = row.block_of(slot);
    double s = lane_sum(w, row.slot_ids(slot), b, lane);
    if (slot < kCachedSlots) cached_lane_sums[slot][lane] = s;
#pragma unroll
    for (int off = kDrawLanes / 2; off >= 1; off /= 2) s = s + __shfl_down_sync(0xffffffffu, s, off);
    s = __shfl_sync(0xffffffffu, s, 0);
    if (lane < kClusterBlocks) cluster.map_shared_rank(block_sums, lane)[b] = s;
  }
  cluster.sync();  // every block's sum is in every CTA; no CTA reads a peer's shared memory after this
  if (warp != 0) return;
  // The running sums by lane 0 (sequential, as the host), then the first block whose running sum passes u x total.
  if (lane == 0) {
    double cum = 0.0;
#pragma unroll 8
    for (int c = 0; c < row.blocks; ++c) running[c] = cum += block_sums[c];
  }
  __syncwarp();
  const double target = d.u * running[row.blocks - 1];
  int b = row.blocks;
  for (int c0 = 0; c0 < row.blocks && b == row.blocks; c0 += 32) {
    const unsigned passes = __ballot_sync(0xffffffffu, c0 + lane < row.blocks && running[c0 + lane] > target);
    if (passes != 0) b = c0 + __ffs(static_cast<int>(passes)) - 1;
  }
  bool last_positive = false;  // rounding: the draw falls to the last positive weight of block b
  if (b == row.blocks) {
    last_positive = true;
    b = -1;
    for (int c0 = (row.blocks - 1) / 32 * 32; c0 >= 0 && b < 0; c0 -= 32) {
      const unsigned positive = __ballot_sync(0xffffffffu, c0 + lane < row.blocks && block_sums[c0 + lane] > 0.0);
      if (positive != 0) b = c0 + 31 - __clz(static_cast<int>(positive));
    }
    if (b < 0) return;  // no positive weight
  }
  if (b % kClusterBlocks != row.rank) return;  // the block's owner draws
  const int slot = b / kClusterBlocks;
  const float* ids = row.slot_ids(slot);
  int token = -1;
  if (last_positive) {
    token = last_in_block(w, ids, b, lane);
  } else {
    // The lanes in order, by lane 0 (the host's additions), from the running sum before block b.
    walk[lane] = slot < kCachedSlots ? cached_lane_sums[slot][lane] : lane_sum(w, ids, b, lane);
    __syncwarp();
    double cum = b > 0 ? running[b - 1] : 0.0;
    int l = kDrawLanes;
    if (lane == 0) {
#pragma unroll
      for (int j = 0; j < kDrawLanes; ++j) {
        const double next = cum + walk[j];
        if (l == kDrawLanes) {
          if (next > target)
            l = j;
          else
            cum = next;
        }
      }
    }
    l = __shfl_sync(0xffffffffu, l, 0);
    if (l == kDrawLanes) {
      token = last_in_block(w, ids, b, lane);
    } else {
      // Lane l's 64 weights by the warp, then its ids in order by lane 0.
      lane_weights[lane] = w(ids, b, l + kDrawLanes * lane);
      lane_weights[lane + 32] = w(ids, b, l + kDrawLanes * (lane + 32));
      __syncwarp();
      if (lane == 0) {
        int crossing = -1, last = -1;
#pragma unroll 8
        for (int k = 0; k < kPerLane; ++k) {
          const float v = lane_weights[k];
          if (!(v > 0.f)) continue;
          last = k;
          if (crossing < 0) {
            cum += static_cast<double>(v);
            if (cum > target) crossing = k;
          }
        }
        const int k = crossing >= 0 ? crossing : last;  // rounding: the lane's last positive weight
        token = k >= 0 ? b * kDrawBlock + l + kDrawLanes * k : -1;
      }
    }
  }
  if (lane == 0 && token >= 0) {
    o[0] = token;
    if (a.tokens) a.tokens[d.row] = token;
  }
}

}  // namespace

Status draw_tokens_cuda(const Tensor& logits, const std::vector<TokenDraw>& draws, Tensor& out, Tensor* tokens,
                        cudaStream_t stream) {
  const char* op = "draw_tokens_cuda";
  D0_RETURN_IF_ERROR(check_pick_operands_cuda(logits, out, tokens, op));
  const std::int64_t R = logits.size(0), V = logits.size(1);
  if (V > static_cast<std::int64_t>(kMaxBlocks) * kDrawBlock)
    return make_error(std::string(op) + ": a vocabulary of " + std::to_string(V) + " ids exceeds " +
                      std::to_string(kMaxBlocks * kDrawBlock));
  D0_RETURN_IF_ERROR(check_token_draws(draws, R, op));
  DrawArgs a{logits.data<float>(),
             static_cast<int>(V),
             out.data<std::int32_t>(),
             tokens ? tokens->data<std::int32_t>() : nullptr,
             0,
             {}};
  const std::size_t cache_bytes = row_cache_bytes(V);
  static const cudaError_t opted_in = cudaFuncSetAttribute(
      draw_tokens_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(row_cache_bytes(INT_MAX)));
  if (opted_in != cudaSuccess)
    return make_error(std::string(op) + ": the row cache's shared memory: " + cudaGetErrorString(opted_in));
  for (std::size_t first = 0; first < draws.size(); first += kMaxDrawsPerLaunch) {
    a.n = static_cast<int>(std::min<std::size_t>(kMaxDrawsPerLaunch, draws.size() - first));
    for (int i = 0; i < a.n; ++i) a.draws[i] = draws[first + i];
    launch_dependent_clusters(draw_tokens_kernel, dim3(static_cast<unsigned>(a.n * kClusterBlocks)), kClusterBlocks,
                              dim3(kThreads), cache_bytes, stream, a);
    D0_CUDA_RETURN_IF_LAUNCH_ERROR("draw_tokens_kernel");
  }
  return Status::success();
}

}  // namespace day0
