// Routed-expert MoE on the GPU with online MXFP4 -> BF16 or FP8 conversion of the routed experts, or over experts
// `day0 convert` stored already converted (bf16, or fp8 with row scales: ExpertStorage).
//
// MoeWorkspace is planned ONCE (at start-up) from the DeviceArena, sized for one layer's routed experts at the
// largest batch: min(E, max_tokens * k) converted experts x (gate_up [2I, H] + down [H, I]) in bf16, or in E4M3
// with one f32 scale per output row (ExpertCompute::fp8, half the bytes), plus the per-expert token buffers.
// For stored bf16 / fp8 experts the converted-expert buffers are left out: the GEMMs read the stored tensors.
// Every layer reuses it; moe_experts_cuda never allocates (arena or host heap).
//
// moe_experts_cuda, per call:
//   1. groups the (token, slot) assignments by expert ON THE HOST: indices and weights are small, so this
//      version reads them on the host (when they live on the device it copies them back, which synchronises
//      the stream once per call). A device-side grouping kernel can replace this later without changing the API.
//   2. MXFP4 experts: converts ONLY the routed experts' gate_up and down matrices into the workspace (one launch
//      each of mxfp4_experts_to_bf16_cuda or mxfp4_experts_to_fp8_cuda), in ascending expert id order.
//      Stored bf16 / fp8 experts: nothing; step 3 points the GEMMs at expert e's slice of the stored tensors (no
//      copy). The conversion kernels are bit-exact with the codecs the converter used, so both give the GEMMs the
//      same bytes and the outputs are bit-identical;
//   3. per routed expert, in ascending id order (as CpuOps::moe_experts, so accumulation order is
//      deterministic and the same as the CPU's), in chunks of at most max_tokens assignments:
//      bf16: gather its tokens (x f32 -> bf16), GemmBf16 gate_up (+bias, f32 out), clamped SwiGLU (f32),
//            convert to bf16, GemmBf16 down (+bias, f32 out), out[token] += weight * y (a kernel; no atomics);
//      fp8:  gather + quantise its tokens (E4M3, one amax/448 scale per token), GemmFp8 gate_up with unit
//            scales, then one kernel for its scales + bias, SwiGLU and the per-token quantisation
//            (swiglu_quantize_fp8_cuda), GemmFp8 down with unit scales, and the scatter-add applying the down
//            GEMM's scales + bias (the same bits as GEMMs with their own epilogues: fp8_moe_math.cuh).
//   Conversion and quantisation rules, with their exactness: quant/fp8_experts.h.
// Calls of S <= fused_max_tokens (MXFP4 experts, device routing) instead group on the device and run the fused
// MXFP4 matmuls of moe_mxfp4_fused_cuda.h (decode sizes, bf16 compute whatever the workspace's) or a grouped GEMM:
// the tiled one of moe_mxfp4_gemm_cuda.h, the bf16 wgmma one (moe_mxfp4_wgmma_cuda.h), or with fp8 compute the FP8
// wgmma one (moe_mxfp4_wgmma_fp8_cuda.h): 5 launches per layer and no stream sync (one token: the two token
// kernels on the router's ids and the combine, no grouping).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "ops/cuda/device_arena.h"
#include "ops/cuda/gemm_bf16.h"
#include "ops/cuda/gemm_fp8.h"
#include "ops/ops.h"

namespace day0 {

struct MoeWorkspaceShape {
  int n_experts = 0;           // E
  int k = 0;                   // experts per token
  std::int64_t hidden = 0;     // H (gate_up.in == down.out)
  std::int64_t intermediate = 0;  // I (gate_up.out == 2I, down.in == I)
  std::int64_t max_tokens = 0;    // the largest S a call may pass
  ExpertCompute compute = ExpertCompute::bf16;
  ExpertStorage storage = ExpertStorage::mxfp4;  // bf16 / fp8_rowwise: no conversion buffers (must match compute)
  // Calls of at most this many tokens take the fused MXFP4 path (moe_mxfp4_fused_cuda.h: no conversion, no host
  // sync; bf16 compute whatever `compute` says, but FP8 MMAs at prefill sizes with fp8) when the experts are MXFP4
  // and the router's choices on the device; 0 turns it off.
  std::int64_t fused_max_tokens = 0;
  // Every call on the fused kernel (never the tiled GEMM, whose sums differ); other paths are an error.
  bool batch_invariant = false;
};

// Stored experts run in the compute their storage is: bf16 with bf16, fp8_rowwise with fp8 (MXFP4 with either).
// The error names both and the option that fixes it.
Status check_expert_compute(ExpertStorage storage, ExpertCompute compute);

struct MoeWorkspace {
  MoeWorkspaceShape shape;
  std::int64_t max_routed = 0;  // min(E, max_tokens * k)

  // Device, carved from the arena by plan(). Shared by both compute modes:
  Tensor expert_ids;  // i32 [max_routed]           routed expert ids, ascending
  Tensor rows;        // i32 [max_tokens * k]       token row of each assignment, grouped by expert
  Tensor route;       // f32 [max_tokens * k]       routing weight of each assignment
  Tensor error_flag;  // i32 [1]                    set on a bad id by the conversion kernel (never: the host path
                      //                            checks ids) or the device grouping (fused path)
  bool error_flag_zeroed = false;  // zeroed by the first call
  Tensor gu;          // f32 [max_tokens, 2I]
  Tensor y;           // f32 [max_tokens, H]
  // ExpertCompute::bf16 only (undefined for fp8; gate_up_w and down_w also for stored experts):
  Tensor h;           // f32 [max_tokens, I]        SwiGLU output (fp8 quantises it in the kernel that makes it)
  Tensor gate_up_w;   // bf16 [max_routed, 2I, H]   converted routed experts, slot j = j-th routed expert
  Tensor down_w;      // bf16 [max_routed, H, I]
  Tensor xs;          // bf16 [max_tokens, H]       gathered tokens of one expert chunk
  Tensor h_bf16;      // bf16 [max_tokens, I]
  // ExpertCompute::fp8 only (undefined for bf16; the four converted-expert tensors also for stored experts):
  Tensor gate_up_w8;      // f8_e4m3 [max_routed, 2I, H]  converted routed experts
  Tensor gate_up_scales;  // f32 [max_routed, 2I]         their power-of-two row scales
  Tensor down_w8;         // f8_e4m3 [max_routed, H, I]
  Tensor down_scales;     // f32 [max_routed, H]
  Tensor xs8;             // f8_e4m3 [max_tokens, H]      gathered, quantised tokens of one expert chunk
  Tensor xs_scales;       // f32 [max_tokens]             their per-token scales
  Tensor h8;              // f8_e4m3 [max_tokens, I]      quantised SwiGLU output
  Tensor h_scales;        // f32 [max_tokens]
  Tensor fp8_inexact;     // u64 [1]  weight values of the last converting call's experts that were not exact
                          //          (0 for stored experts: day0 convert counted theirs; the grouped FP8
                          //          GEMMs count none and leave it)
  // The fused path only (fused_tokens > 0), for Af = fused_tokens * k assignments: group_by_expert_cuda's
  // outputs (i32) and the two matmuls' outputs.
  std::int64_t fused_tokens = 0;  // min(max_tokens, fused_max_tokens) where the path applies, else 0
  Tensor group_counts, group_offsets, group_rows, group_assignments, group_experts, group_n_routed;
  Tensor group_entries;  // fp8 compute: [Af] the grouped entry of each assignment (the inverse of assignments)
  Tensor fused_h;  // bf16 [Af, I]  SwiGLU output by grouped entry
  Tensor fused_y;  // f32 [Af, H]   down output by assignment
  // fp8 compute: prefill-sized fused calls run the FP8 wgmma GEMMs (moe_mxfp4_wgmma_fp8_cuda.h) on these: quantised
  // inputs (by token or by grouped entry) and their scales; gate_up's f32 output, [Af, 2I] by assignment without
  // SwiGLU or the first [Af, I] with it by grouped entry; the SwiGLU output quantised by grouped entry, its scales.
  Tensor fused_x8, fused_sx, fused_gu, fused_h8, fused_sh;
  Tensor group_item_counter;  // fp8 compute: i32 [1], the FP8 GEMMs' item claims (DeviceExpertGroups), zeroed with
                              // the error flag

  // Host staging, reserved by plan() so a call does not touch the heap either.
  std::vector<std::int32_t> host_indices, host_rows, host_expert_ids;
  std::vector<float> host_weights, host_route;
  std::vector<std::int64_t> host_begin;  // [E + 1] assignment offsets per expert (counting sort)

  // Bytes this workspace took from the arena (for the memory report: once, not per layer).
  std::size_t device_bytes = 0;

  // Carves everything from `arena`; call once at start-up. A given `error_flag` (i32 [1]) is used instead of one
  // of its own: CudaOps keeps both fault flags side by side, read in one copy.
  static Result<MoeWorkspace> plan(DeviceArena& arena, const MoeWorkspaceShape& shape, Tensor error_flag = {});
};

// The arena bytes plan() takes for `shape`, found by planning into a bookkeeping-only arena: answerable without
// a GPU (day0 inspect --backend cuda).
Result<std::size_t> moe_workspace_bytes(const MoeWorkspaceShape& shape);

// The GEMMs of the expert path, made on one context: `bf16` serves ExpertCompute::bf16 workspaces, `fp8` fp8 ones.
// Plans are cached per shape, so one MoeGemms serves every layer.
struct MoeGemms {
  explicit MoeGemms(CudaContext& ctx, Fp8Scaling fp8_scaling = Fp8Scaling::automatic)
      : bf16(ctx), fp8(ctx, fp8_scaling) {}
  GemmBf16 bf16;
  GemmFp8 fp8;
};

// out f32 [S, H] = sum_j weights[s, j] * down_e(swiglu(gate_up_e(x[s]))), e = indices[s, j].
// x f32 [S, H] on the device; indices i32 [S, k] and weights f32 [S, k] on the host or the device (see above);
// gate_up / down: experts on the device, both of one storage (bias [E, out] f32 or bf16, optional); out f32 [S, H]
// on the device (overwritten). S <= ws.shape.max_tokens and the expert shapes must match the plan; the workspace's
// compute mode picks the path. MXFP4 experts need a workspace planned for them (storage mxfp4); stored ones run
// with any workspace of their compute. `stream` must be the stream of the context the GEMMs were made with.
// Precision (fp32 accumulation and f32 outputs in both): bf16 rounds x and the SwiGLU output to bf16 before
// their GEMMs; fp8 quantises them to E4M3 per token (ExpertCompute above).
// With dependent launches, x must not be written by the kernel launched just before this call (the router, which
// reads x to make `indices`, sits between them): the one-token path loads x before its dependent-launch wait.
Status moe_experts_cuda(const Tensor& x, const Tensor& indices, const Tensor& weights, const ExpertWeights& gate_up,
                        const ExpertWeights& down, const SwigluParams& p, MoeWorkspace& ws, MoeGemms& gemms,
                        Tensor& out, cudaStream_t stream);

// The residual add and RMSNorm that follow a MoE block: x += the MoE's output, out = rms_norm(x) (as
// rms_norm_residual_cuda).
struct MoeNormAfter {
  Tensor* x = nullptr;  // f32 [S, H], the residual stream
  Tensor w;             // the norm's weight [H]
  float eps = 0.f;
  bool plus_one = false;
  Tensor* out = nullptr;  // f32 [S, H]; may be the MoE's input, or an empty Tensor with out_bf16 (those rows alone)
  Tensor* out_bf16 = nullptr;  // or bf16 [S, H]: out rounded to bf16 as well (rms_norm_moe_residual_cuda)
};

// Whether moe_experts_cuda takes the fused MXFP4 path for this call (S tokens, device routing, MXFP4 experts).
bool moe_takes_fused_path(const MoeWorkspace& ws, std::int64_t S, const Tensor& indices, const ExpertWeights& gate_up,
                          const SwigluParams& p);

// moe_experts_cuda followed by norm's residual add and RMSNorm, with the experts' weighted sum done inside the
// norm's kernel (rms_norm_moe_residual_cuda: one launch fewer, the same bits). Fused path only
// (moe_takes_fused_path); other calls are an error.
Status moe_experts_add_rms_norm_cuda(const Tensor& x, const Tensor& indices, const Tensor& weights,
                                     const ExpertWeights& gate_up, const ExpertWeights& down, const SwigluParams& p,
                                     MoeWorkspace& ws, MoeGemms& gemms, const MoeNormAfter& norm,
                                     cudaStream_t stream);

// The same for a bf16 workspace only, with a lone GemmBf16 (an fp8 workspace is an error: pass MoeGemms).
Status moe_experts_cuda(const Tensor& x, const Tensor& indices, const Tensor& weights, const ExpertWeights& gate_up,
                        const ExpertWeights& down, const SwigluParams& p, MoeWorkspace& ws, GemmBf16& gemm, Tensor& out,
                        cudaStream_t stream);

}  // namespace day0
