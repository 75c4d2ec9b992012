// MXFP4 grouped expert GEMM on FP8 warpgroup MMAs (wgmma e4m3, sm_90a; issue 7 item 4: MXFP4 -> FP8 online, FP8
// tensor-core matmuls grouped over experts), for prefill-sized token counts. The structure of the bf16 GEMM
// (moe_mxfp4_wgmma_cuda.h: 2 warpgroups on 128 weight rows x 32, 64 or 128 tokens, the MMAs at the live width,
// each thread converting the bytes it copied while the MMAs run, 2 CTAs an SM) with k-tiles of 128 values (four
// groups): twice the MMA rate, half the operand bytes a value, and a conversion of three byte permutes a word.
//
// Weight rule: a row's exponent R is the largest of its groups' exponents minus 6 (fp8_experts.h's rule without
// skipping all-zero groups, which this kernel would have to read first), each value becomes e4m3_rne(v * 2^(b_g -
// R)) (quant/mxfp4_to_fp8_table.h), exact for groups within 14 binades of the row's largest, and the row scale is
// 2^R. Inputs arrive quantised (gather_quantize_fp8_cuda: e4m3 codes and an f32 scale a row), a row per token
// (entry p reads row groups.rows[p], as mxfp4_grouped_gemm_wgmma_cuda's inputs_are_tokens) or per grouped entry.
// Outputs as mxfp4_grouped_gemm_wgmma_cuda's, each value v = fp8_moe::scaled_output(sum_k x8[p, k] w8[r, k], sx[p],
// 2^R(r), bias): f32 rows by assignment, or with SwiGLU the halves in f32 by grouped entry (for the quantisation
// of the down GEMM's inputs). The sums accumulate in the MMAs' order at Hopper's FP8 accumulation precision (about
// 14 bits a 32-deep step, not promoted: ~4e-4 relative at K = 2,880 on the H200).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/status.h"
#include "core/tensor.h"
#include "ops/cuda/moe_mxfp4_fused_cuda.h"
#include "ops/expert_weights.h"
#include "quant/fp8_row_order.h"

namespace day0 {

// MXFP4 experts with out a multiple of 64 and in a multiple of 32 up to 4,096.
bool mxfp4_wgmma_fp8_gemm_fits(const ExpertWeights& w);

// Tokens per CTA for A assignments over w's experts: the decode-sized form's 16 below kMxfp4WgmmaMinTokensPerExpert
// an expert; for a GEMM without SwiGLU whose inputs are rows by entry (the down GEMM) the warp-specialised form's
// 192 where experts average kWsFp8MinTokensPerExpert or more and w.in fits it; else as the bf16 GEMM
// (mxfp4_wgmma_tile_tokens). bench-moe, H200, down shape, us (v30), 192 against 128:
// 20b 4,096 tokens (512 an expert) 338.9 / 492.0, 3,072 (384) 285.7 / 385.8; 120b 4,096 (128) 445.9 / 602.6,
// 3,072 (96) 411.0 / 428.9. Fewer tokens an expert were not measured.
inline constexpr std::int64_t kWsFp8MinTokensPerExpert = 96;
// The MoE (fp8 compute) takes the FP8 GEMMs from this many assignments an expert on average, the decode-sized form
// below kMxfp4WgmmaMinTokensPerExpert; below this, the bf16 fused kernel. H100, 20b, with the tokens staged 16
// bytes a copy (v68), two rounds against the bf16 fused kernel at 8 an expert: decode B64 8,697.9 / 8,732.8
// against 8,445.4 / 8,440.3 tok/s (+3.0 / +3.5%, the two quantisation kernels it adds included; bench-moe: down
// 70.0 against 70.3 us, gate_up 123.8 against v67's 136.1). Fewer an expert were not measured.
inline constexpr std::int64_t kRsFp8MinTokensPerExpert = 8;
inline constexpr int kWsFp8TileTokens = 192;  // the warp-specialised form's tile
inline constexpr int kRsFp8TileTokens = 16;   // the decode-sized form's tile
int mxfp4_wgmma_fp8_tile_tokens(std::int64_t assignments, const ExpertWeights& w);

// The order x8's rows come in for a tile: the decode-sized form stages them 16 bytes a copy from the staged order
// (quant/fp8_row_order.h); the others read the natural one.
constexpr Fp8RowOrder mxfp4_wgmma_fp8_row_order(int tile_tokens) {
  return tile_tokens == kRsFp8TileTokens ? Fp8RowOrder::staged : Fp8RowOrder::natural;
}

// x8 f8_e4m3 [rows, w.in] and sx f32 [>= rows]: quantised token rows (inputs_are_tokens) or the grouped entries'
// (rows >= A), each in mxfp4_wgmma_fp8_row_order(tile_tokens) (16-byte aligned for the staged one);
// tile_tokens 16 for the decode-sized form (moe_mxfp4_rs_fp8_cuda.cuh), 32, 64 or 128, or 192 for the
// warp-specialised form (moe_mxfp4_ws_fp8_cuda.cuh: rows by entry only, w.in <= 32 kWsFp8MaxGroups), and
// launch_slots as for mxfp4_grouped_gemm_wgmma_cuda (mxfp4_wgmma_launch_slots). out: f32 [A, w.out] by
// assignment, or with swiglu (interleaved rows) f32 [A, w.out / 2] by grouped entry.
Status mxfp4_grouped_gemm_wgmma_fp8_cuda(const Tensor& x8, const Tensor& sx, bool inputs_are_tokens,
                                         const ExpertWeights& w, const DeviceExpertGroups& groups, int tile_tokens,
                                         std::int64_t launch_slots, const SwigluParams* swiglu, Tensor& out,
                                         cudaStream_t stream);

}  // namespace day0
