// The warp-specialised MXFP4 grouped expert GEMM on FP8 warpgroup MMAs (sm_90a): the prefill-sized form of
// moe_mxfp4_wgmma_fp8_cuda.h's GEMM, same arguments, same arithmetic (each output the same sum of the same E4M3
// products in the same k32 order), launched by mxfp4_grouped_gemm_wgmma_fp8_cuda for tile_tokens 192.
//
// One CTA an SM: a producer warpgroup copies each k-tile's weight bytes and token rows (cp.async) kAhead k-tiles
// early and converts the weights to E4M3 into a ring of kStages operand stages; two consumer warpgroups (64 weight
// rows each) only issue MMAs on up to 192 tokens, at the tile's live width. Stages pass between them on mbarriers
// (full: the producers' 128 arrivals after their copies landed and their conversion is fenced; empty: the 8
// consumer warps' arrivals once the MMAs that read the stage are done), so no CTA-wide barrier sits in the k-loop
// and the conversion of a k-tile runs while the MMAs of the one before it do. Up to 192 tokens a tile also means an
// expert of 129-192 tokens (gpt-oss-120b prefill: ~128 an expert at 4,096 tokens) converts its weights once, not
// twice.
#pragma once

#include <cuda_runtime.h>

#include "core/status.h"
#include "ops/cuda/moe_mxfp4_kernels.cuh"

namespace day0 {

inline constexpr int kWsFp8TileTokens = 192;

// grid: (w.out / 128 rounded up, launch slots for 192-token tiles); w.in / 32 <= kWsFp8MaxGroups.
inline constexpr int kWsFp8MaxGroups = 128;
Status launch_mxfp4_ws_fp8_gemm(const mxfp4_kernels::Fp8KernelArgs& args, int n_experts, dim3 grid, bool swiglu,
                                cudaStream_t stream);

}  // namespace day0
