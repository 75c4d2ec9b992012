// MXFP4 grouped expert GEMM on Hopper's warpgroup MMAs (wgmma, sm_90a), for prefill-sized token counts (issue 7,
// item 4). The tiled mma.sync GEMM (moe_mxfp4_gemm_cuda.h) waits on each k-step's loads (~90 TFLOP/s at 512
// tokens); here the weights' packed bytes and the token rows stream into shared memory through a ring of cp.async
// stages, each thread decodes the bytes it copied (the exact E2M1 -> bf16 decode of every MXFP4 kernel) into the
// 128-byte-swizzled A tile of the next k-step while the warpgroups' asynchronous MMAs run on the current one.
// CTA = 2 warpgroups on 128 weight rows x 32, 64 or 128 tokens of one routed expert, K in tiles of 64 (two groups);
// the MMAs run at the tile's live width (16 to the tile, the narrowest covering its tokens).
// Same inputs, outputs and epilogue (bias, SwiGLU of interleaved rows, rows by assignment) as
// mxfp4_grouped_matmul_cuda; f32 sums in another order than the other kernels.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/status.h"
#include "core/tensor.h"
#include "ops/cuda/moe_mxfp4_fused_cuda.h"
#include "ops/expert_weights.h"
#include "ops/ops.h"

namespace day0 {

// Whether the experts fit this kernel: MXFP4, out a multiple of 64, in a multiple of 64 up to 4,096 (the CTA keeps
// its 128 rows' scales in shared memory).
bool mxfp4_wgmma_gemm_fits(const ExpertWeights& w);

// run_fused_moe takes this GEMM from this many assignments per expert on average where the experts fit it (below:
// the fused kernel). bench-moe (H200, 20b down shape): at 16 an expert (128 tokens) the fused kernel on two row
// tiles takes 103.0 us against 114.1 here (32-token tiles); at 32 (256 tokens) 173.3 against ~135 (64-token
// tiles); at 8 (64 tokens) 73.6 against 114.1, and 16-token tiles (tried, removed) did no better (107.0).
inline constexpr std::int64_t kMxfp4WgmmaMinTokensPerExpert = 24;

// Tokens per CTA (32, 64 or 128) for A assignments over E experts, by the experts' average.
int mxfp4_wgmma_tile_tokens(std::int64_t assignments, std::int64_t n_experts);

// CTAs along the token axis covering every (routed expert, token tile) pair.
std::int64_t mxfp4_wgmma_launch_slots(std::int64_t routed_experts_bound, std::int64_t assignments, int tile_tokens);

// As mxfp4_grouped_matmul_cuda (moe_mxfp4_fused_cuda.h); w must fit (above); launch_slots from
// mxfp4_wgmma_launch_slots with the same tile_tokens (at most 65535).
Status mxfp4_grouped_gemm_wgmma_cuda(const Tensor& x, bool inputs_are_tokens, const ExpertWeights& w,
                                     const DeviceExpertGroups& groups, int tile_tokens, std::int64_t launch_slots,
                                     const SwigluParams* swiglu, Tensor& out, cudaStream_t stream);

}  // namespace day0
