// Ops::draw_tokens on the GPU: token_draw.h's draw, bit for bit. A cluster of 8 CTAs a drawn row (greedy_tokens'
// shape: one CTA a row spent ~45 us on 201,088 exponentials): the warps of the cluster take the row's 2,048-id blocks
// in turn, each lane summing its 64 weights in order and the warp adding the lane sums by shuffles (the tree
// token_draw.h defines) into the first CTA's shared memory; then its warp 0 walks the block sums, recomputes the
// crossing block's lane sums and lane 0 walks the crossing lane. The weights repeat the host's float arithmetic with
// each multiply and add rounded on its own (__fmul_rn / __fadd_rn: no contraction into fused multiply-adds). A row
// with top-k or top-p first finds its cutoff in the same cluster (token_cutoff_cuda.cuh), and the weights past it or
// under min-p are zero. A dependent launch: it waits for greedy_tokens' picks, whose launch it overlaps.
#include <cooperative_groups.h>

#include <climits>
#include <string>
#include <vector>

#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/dependent_launch.h"
#include "ops/cuda/token_cutoff_cuda.cuh"
#include "ops/token_draw.h"

namespace day0 {
namespace {

using namespace draw_cluster;

constexpr int kPerLane = kDrawBlock / kDrawLanes;
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
  const float* x;
  int V;
  float m, inv_t;
  TokenCutoff cut;
  double min_p;
  __device__ __forceinline__ float operator()(int i) const {
    if (i >= V) return 0.f;
    const float xi = x[i];
    if (!cutoff_keeps(cut, logit_key(xi), i)) return 0.f;
    const float w = row_weight_device(xi, m, inv_t);
    return static_cast<double>(w) < min_p ? 0.f : w;
  }
};

__device__ __forceinline__ int lane_id(int b, int l, int k) { return b * kDrawBlock + l + kDrawLanes * k; }

__device__ __forceinline__ double lane_sum(const RowWeights& w, int b, int l) {
  double s = 0.0;
#pragma unroll 8
  for (int k = 0; k < kPerLane; ++k) s += static_cast<double>(w(lane_id(b, l, k)));
  return s;
}

__device__ int last_in_lane(const RowWeights& w, int b, int l) {
  for (int k = kPerLane - 1; k >= 0; --k)
    if (w(lane_id(b, l, k)) > 0.f) return lane_id(b, l, k);
  return -1;
}

__device__ int last_in_block(const RowWeights& w, int b) {
  for (int l = kDrawLanes - 1; l >= 0; --l)
    if (const int i = last_in_lane(w, b, l); i >= 0) return i;
  return -1;
}

__global__ void __launch_bounds__(kThreads) draw_tokens_kernel(const __grid_constant__ DrawArgs a) {
  __shared__ double block_sums[kMaxBlocks];  // the first CTA's: every block's sum
  __shared__ double lane_sums[kDrawLanes];
  __shared__ CutoffShared cutoff_shared;
  begin_dependent_grid();  // greedy_tokens' picks
  const cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  const TokenDraw d = a.draws[blockIdx.x / kClusterBlocks];
  std::int32_t* o = a.out + 2 * static_cast<std::int64_t>(d.row);
  if (o[1] != -1) return;  // greedy_tokens' report stands (the same for every CTA of the cluster)
  const float* x = a.logits + static_cast<std::int64_t>(d.row) * a.V;
  const float m = x[o[0]];
  TokenCutoff cut{};  // token_cutoff's two descents, as the host runs them
  if (d.top_k > 0 && d.top_k < a.V)
    cut = cutoff_in_cluster(cluster, cutoff_shared, {x, a.V, m, d.inv_t, cut, false}, d);
  if (d.top_p < 1.0) cut = cutoff_in_cluster(cluster, cutoff_shared, {x, a.V, m, d.inv_t, cut, true}, d);
  const RowWeights w{x, a.V, m, d.inv_t, cut, d.min_p};
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int blocks = (a.V + kDrawBlock - 1) / kDrawBlock;
  double* sums = cluster.map_shared_rank(block_sums, 0);
  for (int b = rank * kWarps + warp; b < blocks; b += kClusterBlocks * kWarps) {
    double s = lane_sum(w, b, lane);
#pragma unroll
    for (int off = kDrawLanes / 2; off >= 1; off /= 2) s = s + __shfl_down_sync(0xffffffffu, s, off);
    if (lane == 0) sums[b] = s;
  }
  cluster.sync();  // every block's sum is in the first CTA (each CTA stays until then: its writes land there)
  if (rank != 0 || warp != 0) return;
  // The crossing block, by lane 0 (sequential, as the host).
  double cum = 0.0, target = 0.0;
  int b = 0;
  if (lane == 0) {
    double total = 0.0;
    for (int c = 0; c < blocks; ++c) total += block_sums[c];
    target = d.u * total;
    while (b < blocks && !(cum + block_sums[b] > target)) cum += block_sums[b++];
  }
  b = __shfl_sync(0xffffffffu, b, 0);
  int token = -1;
  if (b == blocks) {  // rounding: the last positive weight
    if (lane == 0)
      for (int c = blocks - 1; c >= 0 && token < 0; --c)
        if (block_sums[c] > 0.0) token = last_in_block(w, c);
  } else {
    lane_sums[lane] = lane_sum(w, b, lane);
    __syncwarp();
    if (lane == 0) {
      int l = 0;
      while (l < kDrawLanes && !(cum + lane_sums[l] > target)) cum += lane_sums[l++];
      if (l == kDrawLanes) {
        token = last_in_block(w, b);
      } else {
        for (int k = 0; k < kPerLane && token < 0; ++k) {
          const float v = w(lane_id(b, l, k));
          if (!(v > 0.f)) continue;
          cum += static_cast<double>(v);
          if (cum > target) token = lane_id(b, l, k);
        }
        if (token < 0) token = last_in_lane(w, b, l);
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
  for (std::size_t first = 0; first < draws.size(); first += kMaxDrawsPerLaunch) {
    a.n = static_cast<int>(std::min<std::size_t>(kMaxDrawsPerLaunch, draws.size() - first));
    for (int i = 0; i < a.n; ++i) a.draws[i] = draws[first + i];
    launch_dependent_clusters(draw_tokens_kernel, dim3(static_cast<unsigned>(a.n * kClusterBlocks)), kClusterBlocks,
                              dim3(kThreads), 0, stream, a);
    D0_CUDA_RETURN_IF_LAUNCH_ERROR("draw_tokens_kernel");
  }
  return Status::success();
}

}  // namespace day0
