// Fused MXFP4 expert matmuls for small token counts (decode, issue 7): the routed experts' packed weights are
// read once, straight from where they were uploaded, and decoded in registers, with no conversion pass and no
// per-expert launches. Token-to-expert grouping comes from group_by_expert_cuda, so nothing waits for the host.
//
// One CTA = 4 warps (8 for a single token) on 32 output rows of one routed expert (two tiles of 16 sharing each
// load of the token values; one where out is not a multiple of 32); the warps split K (the 32-value MXFP4
// groups) and sum their partials in a fixed order. Each lane loads one whole 16-byte group of two
// rows (g and g + 8) per 128-value tile and its token's 32 values with it, decodes byte pairs to bf16 (E2M1 ->
// bf16 by bit moves, times 2^(scale - 1) in a bf16x2 multiply: exact, so the weights equal
// mxfp4_experts_to_bf16_cuda's bit for bit) and feeds mma.sync m16n8k16 with the K axis permuted so that a lane's
// group maps onto its fragment slots; tokens are the N axis, 8 per pass: an expert with more makes further passes
// (on the H200 that beat passes of 16 and 32 tokens at every size measured: bench-moe, 20b down, 64 tokens 93.6
// against 104.3 and 127.6 us; 512 tokens 512 against 692 and 670). Accumulation is f32; only the summation order
// differs from the bf16 GEMM path. Prefill-sized calls take the wgmma GEMM of moe_mxfp4_wgmma_cuda.h instead (or,
// where the experts do not fit it, the tiled one of moe_mxfp4_gemm_cuda.h).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/status.h"
#include "core/tensor.h"
#include "ops/expert_weights.h"
#include "ops/ops.h"

namespace day0 {

// group_by_expert_cuda's outputs, on the device (all i32): offsets [E + 1], rows [A], assignments [A],
// experts [E] (routed ascending, then -1: the kernels stop at the first -1, so they need no routed count).
// item_counter: i32 [1], zero, or undefined: lets the warp-specialised FP8 GEMM hand out its items as its CTAs free
// up (moe_mxfp4_ws_fp8_cuda.cuh), which leaves it zero again; launches sharing one run one after another.
struct DeviceExpertGroups {
  Tensor offsets, rows, assignments, experts;
  Tensor item_counter = {};
};

// For every routed expert e and each of its grouped entries p (device data, read by the kernel):
//   v = W_e . x[input row] + bias_e   (f32 accumulation; input row = groups.rows[p] when inputs_are_tokens,
//                                      else p: an earlier fused matmul's grouped output)
// swiglu given (gate/up rows interleaved, as gpt-oss): out bf16 [A, w.out / 2], row p = bf16(swiglu(v));
// swiglu null: out f32 [A, w.out], row groups.assignments[p] = v.
// Whether a call of S tokens splits K over 8 warps instead of 4: fastest for a single token (bench-moe, 20b down:
// 12.8 against 15.3 us), but a different split is a different sum, so never where results must not depend on
// the batch.
inline bool fused_moe_wide_split(std::int64_t S, bool batch_invariant) { return S == 1 && !batch_invariant; }

// Tokens a CTA runs on each decoded weight tile (8 or 16; the same sums either way) for A assignments over
// launch_slots CTAs per row tile: 16 where experts average 8 or more. bench-moe (H200, 20b down shape): 64 tokens
// (8 an expert) 85.6 -> 77.3 us, 128 tokens 139.8 -> 120.4; but 32 tokens (4 an expert) 60.4 -> 68.3: few experts
// see more than 8 there, and the 16-token kernel's 80 registers fit 6 CTAs an SM instead of 8 (with two row tiles
// a CTA, since: 118 registers, 4 CTAs, against 80 and 6 for 8-token passes; not re-measured at 4 an expert).
inline int fused_moe_pass_tokens(std::int64_t A, std::int64_t launch_slots) { return A >= 8 * launch_slots ? 16 : 8; }

// x bf16 [*, w.in]; w MXFP4 in either block order (ExpertStorage::mxfp4 or mxfp4_tiled: the same sums). launch_slots:
// CTAs per row tile, >= the routed experts (min(E, A) always is). pass_tokens: 8, 16, or 0 for
// fused_moe_pass_tokens's choice (the wide split always makes passes of 8).
Status mxfp4_grouped_matmul_cuda(const Tensor& x, bool inputs_are_tokens, const ExpertWeights& w,
                                 const DeviceExpertGroups& groups, bool wide_split,
                                 std::int64_t launch_slots, const SwigluParams* swiglu, Tensor& out,
                                 cudaStream_t stream, int pass_tokens = 0);

// One token's k routed experts (decode at batch 1), without grouping: slot j of `slots` (i32 [1, k], the router's
// ids in pick order) is expert e_j, and row j of out is W_{e_j} . x_j + bias (SwiGLU'd into bf16 [k, out / 2], or
// f32 [k, out]); x is f32 [1, in] (the token, converted to bf16 on the way in) or f32 / bf16 [k, in] (a row per
// slot: the gate_up output). In the bf16 form (TokenForm below) the sums are the grouped kernel's with the wide
// split, bit for bit; the f16-groups form makes the same products and sums them in another order. Either serves
// where fused_moe_wide_split does. An id outside [0, E) sets error_flag and leaves its row unwritten.
// `settled.slots`: no kernel still running when this one is launched writes the ids (they were written two or more
// launches back), so they are read and their weights fetched before the dependent-launch wait, overlapping the
// kernel just before (the down projection: the router's ids, gate_up in between). x is always loaded after the
// wait: the kernel just before writes it (the norm + router, or gate_up).
struct TokenSettledInputs {
  bool slots = false;
};
// How the MMAs take the weights. bf16_tiles: each value pair decoded to bf16 and multiplied by its block scale (the
// grouped kernel's sums, bit for bit). f16_groups: the weights exact in f16 (through E4M3 bits), the token's bf16
// values in f16 scaled by a power of two a group, and the block scales applied to each group's sum: the same
// products, summed in another order, on ~30% fewer instructions a tile (SASS, v43); H200: the one-token MoE block
// 29.3 -> 28.6 us, decode at batch 1 +1.1% (20b) and +1.5% (120b) (v46). Unpacking the weights by byte permutes
// instead of F2FP conversions measured equal on an H100 (v52: 10.1 against 10.2 us on down), so not kept.
enum class TokenForm { bf16_tiles, f16_groups };
// Fits: MXFP4 (16-byte aligned), out a multiple of 16, in a multiple of 32 with the bf16 row in
// kMxfp4TokenMaxInputBytes (a CTA holds 16 weight rows and the row in shared memory).
constexpr std::int64_t kMxfp4TokenMaxInputBytes = 8 * 1024;
bool mxfp4_token_matmul_fits(const ExpertWeights& w);
Status mxfp4_token_matmul_cuda(const Tensor& x, const Tensor& slots, const ExpertWeights& w, const SwigluParams* swiglu,
                               Tensor& out, Tensor& error_flag, cudaStream_t stream, TokenSettledInputs settled = {},
                               TokenForm form = TokenForm::bf16_tiles);

// out f32 [S, H] = sum over j of weights[s, j] * y[s k + j], summed in ascending expert id order (as CpuOps adds its
// experts), each term a separate multiply and add. y f32 [S k, H]; indices i32 / weights f32 [S, k] on the device.
Status moe_combine_cuda(const Tensor& y, const Tensor& indices, const Tensor& weights, Tensor& out,
                        cudaStream_t stream);

}  // namespace day0
