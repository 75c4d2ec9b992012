// The warp-specialised MXFP4 grouped expert GEMM on FP8 warpgroup MMAs (sm_90a): the prefill-sized form of
// moe_mxfp4_wgmma_fp8_cuda.h's GEMM, same arguments, same arithmetic (each output the same sum of the same E4M3
// products in the same k32 order), launched by mxfp4_grouped_gemm_wgmma_fp8_cuda for tile_tokens 192.
//
// Persistent, one CTA an SM looping over (token tile, row block) items: two producer warpgroups copy each k-tile's
// weight bytes and token rows (cp.async) kAhead k-tiles early and convert the weights to E4M3 into a ring of
// kStages operand stages; two consumer warpgroups (64 weight rows each) only issue MMAs on up to 192 tokens, at the
// tile's live width. Stages pass between them on mbarriers (full: the producers' arrivals after their copies landed
// and their conversion is fenced; empty: the consumer warps' arrivals once the MMAs that read the stage are done),
// so no CTA-wide barrier sits in the k-loop, and the producers start the next item while the consumers store the
// last. setmaxnreg gives the consumers 168 registers (96 accumulators at 192 tokens), the producers 88.
//
// Measured (H200, bench-moe, down shape, v29): faster than the 2-CTA GEMM's 128-token tiles only where experts hold
// several tiles of tokens (gpt-oss-20b, 512 an expert: 456.5 against 491.0 us); equal at 128 an expert (120b, 4,096
// tokens: 599.8 against 602.5, though it converts each weight row once where the 128-token tiles convert 1.47 times)
// and slower below (384 an expert: 389.0 against 383.3; 96: 568.6 against 428.6). Each k-tile takes ~1.17 us whatever
// the tile's width: the producers' copy-and-convert, not the MMAs, sets the pace.
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
