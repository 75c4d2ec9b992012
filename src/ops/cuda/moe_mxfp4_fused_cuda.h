// Fused MXFP4 expert matmuls for small token counts (decode, issue 7): the routed experts' packed weights are
// read once, straight from where they were uploaded, and decoded in registers, with no conversion pass and no
// per-expert launches. Token-to-expert grouping comes from group_by_expert_cuda, so nothing waits for the host.
//
// One CTA = 4 warps (8 for a single token) on 16 output rows of one routed expert; the warps split K (the
// 32-value MXFP4 groups) and sum their partials in a fixed order. Each lane loads one whole 16-byte group of two
// rows (g and g + 8) per 128-value tile (and, at up to 8 tokens per expert, its token's 32 values with it), decodes
// byte pairs to bf16 (E2M1 -> bf16 by bit moves, times 2^(scale - 1) in a bf16x2 multiply: exact, so the weights
// equal mxfp4_experts_to_bf16_cuda's bit for bit) and feeds mma.sync m16n8k16 with the K axis permuted so that a
// lane's group maps onto its fragment slots; tokens are the N axis (8 per MMA, up to 32 per pass), read as bf16 from
// L1. Accumulation is f32; only the summation order differs from the bf16 GEMM path. Prefill-sized calls take the
// tiled GEMM of moe_mxfp4_gemm_cuda.h instead.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/status.h"
#include "core/tensor.h"
#include "ops/expert_weights.h"
#include "ops/ops.h"

namespace day0 {

// group_by_expert_cuda's outputs, on the device (all i32): offsets [E + 1], rows [A], assignments [A],
// experts [E] (routed ascending, then -1: the kernels stop at the first -1, so they need no routed count).
struct DeviceExpertGroups {
  Tensor offsets, rows, assignments, experts;
};

// For every routed expert e and each of its grouped entries p (device data, read by the kernel):
//   v = W_e . x[input row] + bias_e   (f32 accumulation; input row = groups.rows[p] when inputs_are_tokens,
//                                      else p: an earlier fused matmul's grouped output)
// swiglu given (gate/up rows interleaved, as gpt-oss): out bf16 [A, w.out / 2], row p = bf16(swiglu(v));
// swiglu null: out f32 [A, w.out], row groups.assignments[p] = v.
// How one call runs: the tokens of an expert one pass carries (8, 16 or 32; an expert with more makes further
// passes, each decoding its weights again) and whether a pass may split K over 8 warps instead of 4 (fastest at
// one token, but a different split is a different sum: never where results must not depend on the batch).
struct FusedMoePass {
  int tokens = 8;
  bool wide_split = false;
};

// The pass for S tokens routed top-k over E experts: about twice the mean count per expert (uniform routing
// leaves few experts above it: 20b at batch 64, mean 8, takes 16-token passes, not the batch's 64), at most S;
// 8 warps only for a single token and only when batch_invariant is off.
inline FusedMoePass fused_moe_pass(std::int64_t S, std::int64_t k, std::int64_t E, bool batch_invariant) {
  const std::int64_t mean = E > 0 ? (S * k + E - 1) / E : S;
  const std::int64_t want = std::min(S, 2 * mean);
  FusedMoePass p;
  p.tokens = want <= 8 ? 8 : want <= 16 ? 16 : 32;
  p.wide_split = S == 1 && !batch_invariant;
  return p;
}

// x bf16 [*, w.in]. launch_slots: CTAs per row tile, >= the routed experts (min(E, A) always is).
Status mxfp4_grouped_matmul_cuda(const Tensor& x, bool inputs_are_tokens, const ExpertWeights& w,
                                 const DeviceExpertGroups& groups, const FusedMoePass& pass,
                                 std::int64_t launch_slots, const SwigluParams* swiglu, Tensor& out,
                                 cudaStream_t stream);

// out f32 [S, H] = sum over j of weights[s, j] * y[s k + j], summed in ascending expert id order (as CpuOps adds its
// experts), each term a separate multiply and add. y f32 [S k, H]; indices i32 / weights f32 [S, k] on the device.
Status moe_combine_cuda(const Tensor& y, const Tensor& indices, const Tensor& weights, Tensor& out,
                        cudaStream_t stream);

}  // namespace day0
