// The MoE block's norm and router in one launch for decode steps (up to 128 tokens): x += y, out = rms_norm(x), logits
// = out W^T + b, then the top-k experts and their softmax weights. The same bits as rms_norm_residual_cuda's vector
// form followed by linear_small_router_cuda (shared code: rms_norm_math.cuh, linear_small_tile.cuh,
// router_topk.cuh), one kernel and one dependent wait fewer on the decode chain: a thread-block cluster of one
// CTA per 16 experts for each two tokens, each CTA normalising the two rows itself (its weights loaded before the
// wait), the logits gathered in the first CTA's shared memory (no fence, counter and second trip through L2 as the
// unfused router's last CTA). Batch 64 at 20b: 32 clusters of 2 CTAs, where the two launches gave the router 8.
#pragma once

#include <cuda_runtime.h>

#include "core/status.h"
#include "core/tensor.h"
#include "ops/ops.h"

namespace day0 {

inline constexpr int kNormRouterMaxExperts = 128;  // 8 CTAs: the portable cluster size
inline constexpr std::int64_t kNormRouterMaxHidden = 4096;
inline constexpr int kNormRouterRowsPerCluster = 2;  // a row for each 256 of a CTA's 512 threads
inline constexpr std::int64_t kNormRouterMaxRows = 128;

// Whether norm_router_cuda takes this call: x f32 [M <= kNormRouterMaxRows, H] with H % 8 == 0 and H <=
// kNormRouterMaxHidden, norm weight [H] (bf16 or f32), router w bf16 [E, H] with E <= kNormRouterMaxExperts, 1 <= k <=
// min(kRouterMaxK, E), and every tensor the kernel reads as vectors 16-byte aligned.
bool norm_router_fits(const Tensor& x, const Tensor& y, const Tensor& norm_w, Tensor& out, const LinearTarget& router,
                      int k);

// A cluster's CTAs for E experts (each CTA's 16 experts are one row tile of the small-M kernel's MMAs), and the CTAs
// norm_router_cuda launches for M rows: a cluster for each two rows.
inline constexpr std::int64_t kNormRouterExpertsPerCta = 16;
inline std::int64_t norm_router_cluster_ctas(std::int64_t E) {
  return (E + kNormRouterExpertsPerCta - 1) / kNormRouterExpertsPerCta;
}
inline std::int64_t norm_router_ctas(std::int64_t M, std::int64_t E) {
  return (M + kNormRouterRowsPerCluster - 1) / kNormRouterRowsPerCluster * norm_router_cluster_ctas(E);
}

// x += y and out = rms_norm(x) * (norm_w (+ 1 when plus_one)) as rms_norm_residual_cuda; router.out [M, E] =
// out W^T (+ bias) as linear_small_cuda; indices i32 [M, k] and weights f32 [M, k] as router_topk_softmax_cuda.
// A dependent launch: the router and norm weights are loaded before the wait.
Status norm_router_cuda(Tensor& x, const Tensor& y, const Tensor& norm_w, float eps, bool plus_one, Tensor& out,
                        const LinearTarget& router, int k, Tensor& indices, Tensor& weights, cudaStream_t stream);

}  // namespace day0
