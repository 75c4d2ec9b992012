// The MoE block's norm and router in one launch for one token (batch-1 decode): x += y, out = rms_norm(x), logits =
// out W^T + b, then the top-k experts and their softmax weights. The same bits as rms_norm_residual_cuda's vector
// form followed by linear_small_router_cuda (shared code: rms_norm_math.cuh, linear_small_tile.cuh,
// router_topk.cuh), one kernel and one dependent wait fewer on the decode chain: a thread-block cluster of one
// CTA per 16 experts, each normalising the row itself (its weights loaded before the wait), the logits gathered in
// the first CTA's shared memory (no fence, counter and second trip through L2 as the unfused router's last CTA).
#pragma once

#include <cuda_runtime.h>

#include "core/status.h"
#include "core/tensor.h"
#include "ops/ops.h"

namespace day0 {

inline constexpr int kNormRouterMaxExperts = 128;  // 8 CTAs: the portable cluster size
inline constexpr std::int64_t kNormRouterMaxHidden = 4096;

// Whether norm_router_cuda takes this call: x f32 [1, H] with H % 8 == 0 and H <= kNormRouterMaxHidden, norm weight
// [H] (bf16 or f32), router w bf16 [E, H] with E <= kNormRouterMaxExperts, 1 <= k <= min(kRouterMaxK, E), and every
// tensor the kernel reads as vectors 16-byte aligned.
bool norm_router_fits(const Tensor& x, const Tensor& y, const Tensor& norm_w, Tensor& out, const LinearTarget& router,
                      int k);

// x += y and out = rms_norm(x) * (norm_w (+ 1 when plus_one)) as rms_norm_residual_cuda; router.out [1, E] =
// out W^T (+ bias) as linear_small_cuda; indices i32 [1, k] and weights f32 [1, k] as router_topk_softmax_cuda.
// A dependent launch: the router and norm weights are loaded before the wait.
Status norm_router_cuda(Tensor& x, const Tensor& y, const Tensor& norm_w, float eps, bool plus_one, Tensor& out,
                        const LinearTarget& router, int k, Tensor& indices, Tensor& weights, cudaStream_t stream);

}  // namespace day0
