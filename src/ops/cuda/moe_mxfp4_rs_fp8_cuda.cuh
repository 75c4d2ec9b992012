// The decode-sized form of moe_mxfp4_wgmma_fp8_cuda.h's GEMM (tile_tokens 16): the same arguments and weight rule,
// for experts holding a few tokens each (the MoE takes it at 8-23 an expert, kRsFp8MinTokensPerExpert). The 2-CTA
// GEMM converts each k-tile of 128 weight rows into a shared-memory A tile behind a CTA barrier, sized for 32-128
// tokens; here each lane converts its own 16-byte group of two rows (g, g + 8) in registers, E2M1 -> E4M3 by byte
// permutes (9 operations a word of 8 values, against ~19 SASS instructions for the fused kernel's bf16 decode), and
// feeds it to wgmma as the register A operand (m64n16k32): no A tile, no barrier in the k-loop.
//
// A CTA: two warpgroups on 64 weight rows, splitting the k-tiles (even / odd), the token tile of one routed expert
// (up to 16 of its tokens) staged whole in shared memory before the k-loop, each thread's next two k-tiles of
// weights in flight in registers. A lane's group holds 32 consecutive values and wgmma's A fragment takes k 4t ..
// 4t + 3 and 16 + 4t .. 4t + 19 of each k32 step from lane t, so k-step s of a k-tile takes word s of each lane's
// group: the token rows come quantised in that order (Fp8RowOrder::staged, quant/fp8_row_order.h), which the
// staging copies 16 bytes at a time (each sum is over the same products, in another order than the 2-CTA GEMM's).
// The two warpgroups' sums are added in a fixed order.
//
// Measured (H100, bench-moe, 20b down, v67, tokens staged 4 bytes a copy from the natural order): 64 tokens 69.5
// us, the bf16 fused kernel's 69.4 (both ~2.0 TB/s; Nsight Compute: 61.6% of DRAM peak, 45.6 M instructions issued
// at 0.69 a scheduler a cycle, 21% of the stall samples at the staging barrier); 8 tokens 47.6 against 39.4. With
// the staged order (v68; by count ~half the instructions, not profiled): down 70.0 us at 64 tokens (fused 70.3), 47.6
// at 8 (fused 40.1); gate_up 123.8 at 64 (v67: 136.1). So the down GEMM is not paced by its instructions.
#pragma once

#include <cuda_runtime.h>

#include "core/status.h"
#include "ops/cuda/moe_mxfp4_kernels.cuh"
#include "ops/cuda/moe_mxfp4_wgmma_fp8_cuda.h"

namespace day0 {

// grid: (w.out / 64, launch slots for 16-token tiles); w as mxfp4_wgmma_fp8_gemm_fits (out % 64 == 0, groups <= 128);
// x8's rows in the staged order, 16-byte aligned.
Status launch_mxfp4_rs_fp8_gemm(const mxfp4_kernels::Fp8KernelArgs& args, int n_experts, dim3 grid, bool swiglu,
                                cudaStream_t stream);

}  // namespace day0
