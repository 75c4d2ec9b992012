// The warp-specialised MXFP4 grouped expert GEMM on FP8 warpgroup MMAs (sm_90a): the prefill-sized form of
// moe_mxfp4_wgmma_fp8_cuda.h's GEMM, same arguments, same arithmetic (each output the same sum of the same E4M3
// products in the same k32 order), launched by mxfp4_grouped_gemm_wgmma_fp8_cuda for tile_tokens 192.
//
// Persistent, one CTA an SM looping over (token tile, row block) items. One issuer warp brings each k-tile's raw
// weight bytes and token rows with tensor copies (TMA: one instruction a box, no copy instructions in the other
// warps) into a ring of kStages stages, running ahead across items; two converter warpgroups turn the bytes into
// E4M3 A tiles; two consumer warpgroups (64 weight rows each) only issue MMAs on up to 192 tokens, at the tile's live
// width. Every hand-over is an mbarrier, so no CTA-wide barrier sits in the k-loop. setmaxnreg gives the consumers
// 168 registers (96 accumulators at 192 tokens).
//
// The token box needs x8's rows by entry (an expert's tokens contiguous), as the down GEMM's are. The MoE runs both
// GEMMs on it without SwiGLU (moe_cuda.cu: gate_up's halves out in f32, SwiGLU in the quantisation of h). With
// SwiGLU, gate_up ran 1,435.5 us a layer against 1,335.4 for the 2-CTA GEMM on token rows (120b, 4,096 tokens,
// `day0 bench --kernels`, v31; Nsight Compute: 1.74 GB of local traffic from the out-of-line SwiGLU stores'
// register saves, moe_mxfp4_kernels.cuh), without it 850.6 us in bench-moe (v32); this form's SwiGLU epilogue is
// held only by its tests.
//
// Measured (H200, bench-moe, down shape, v30), 20b 4,096 tokens: 338.9 us (802 TFLOP/s), against 457.8 for the
// cp.async form before it (v29: its producers' copies and conversion set the pace, ~1.17 us a k-tile) and 492.0 for
// the 2-CTA GEMM's 128-token tiles; 120b 4,096 tokens 445.9 (610 TFLOP/s) against 601.0 and 602.6.
#pragma once

#include <cuda_runtime.h>

#include "core/status.h"
#include "ops/cuda/moe_mxfp4_kernels.cuh"
#include "ops/cuda/moe_mxfp4_wgmma_fp8_cuda.h"

namespace day0 {

// grid: (w.out / 128 rounded up, launch slots for 192-token tiles); x8 has x8_rows rows by entry (not by token),
// w.in / 32 <= kWsFp8MaxGroups (the stages and two scale blocks fill an SM's shared memory), w.out % 64 == 0.
inline constexpr int kWsFp8MaxGroups = 112;
bool mxfp4_ws_fp8_gemm_fits(bool inputs_are_tokens, int groups);
Status launch_mxfp4_ws_fp8_gemm(const mxfp4_kernels::Fp8KernelArgs& args, std::int64_t x8_rows, int n_experts,
                                dim3 grid, bool swiglu, cudaStream_t stream);

}  // namespace day0
