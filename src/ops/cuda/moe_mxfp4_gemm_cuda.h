// Tiled MXFP4 grouped expert GEMM for prefill-sized token counts (issue 7, item 4 as bf16 tensor-core MMAs): the
// decode-size fused kernel re-decodes its weights for every 32 tokens; this one decodes each weight tile once per
// 128 tokens into shared memory. CTA = 8 warps on 64 weight rows x 128 tokens of one routed expert, K in steps of
// one MXFP4 group (32 inputs): each step's weights are fetched (a quarter group per thread), decoded exactly to
// bf16 (the same bits as the fused kernel and mxfp4_experts_to_bf16_cuda) and stored with the token inputs in a
// double-buffered stage while the MMAs (mma.sync m16n8k16 on ldmatrix fragments, f32 accumulation) run on the
// other. Same inputs, outputs and epilogue (bias, SwiGLU of interleaved rows, rows by assignment) as
// mxfp4_grouped_matmul_cuda.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/status.h"
#include "core/tensor.h"
#include "ops/cuda/moe_mxfp4_fused_cuda.h"
#include "ops/expert_weights.h"
#include "ops/ops.h"

namespace day0 {

// run_fused_moe takes a GEMM from this many assignments per expert on average (below: the fused kernel): the
// wgmma one (moe_mxfp4_wgmma_cuda.h) where the experts fit it, else this one.
inline constexpr std::int64_t kMxfp4GemmMinTokensPerExpert = 32;

// CTAs along the token axis that cover every (routed expert, 128-token tile) pair: at most one partial tile per
// routed expert plus the full ones.
std::int64_t mxfp4_gemm_launch_slots(std::int64_t routed_experts_bound, std::int64_t assignments);

// MXFP4 experts with out a multiple of 64 (the GEMM's row tile).
bool mxfp4_grouped_gemm_fits(const ExpertWeights& w);

// As mxfp4_grouped_matmul_cuda (moe_mxfp4_fused_cuda.h); w.out a multiple of 64; launch_slots from
// mxfp4_gemm_launch_slots (at most 65535).
Status mxfp4_grouped_gemm_cuda(const Tensor& x, bool inputs_are_tokens, const ExpertWeights& w,
                               const DeviceExpertGroups& groups, std::int64_t launch_slots, const SwigluParams* swiglu,
                               Tensor& out, cudaStream_t stream);

}  // namespace day0
