// Routed-expert MoE on the GPU (see moe_cuda.h): host-side grouping, online MXFP4 -> BF16 or FP8 conversion of
// the routed experts only into the planned workspace (or stored bf16 / fp8 experts read in place), per-expert
// gather -> GEMM -> SwiGLU -> GEMM -> scatter-add.
#include "ops/cuda/moe_cuda.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <string>

#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/expert_grouping_cuda.h"
#include "ops/cuda/fp8_moe_math.cuh"
#include "ops/cuda/moe_mxfp4_fused_cuda.h"
#include "ops/cuda/moe_mxfp4_gemm_cuda.h"
#include "ops/cuda/moe_mxfp4_wgmma_cuda.h"
#include "ops/cuda/moe_mxfp4_wgmma_fp8_cuda.h"
#include "ops/registry.h"

namespace day0 {
namespace {

constexpr int kThreads = 256;

unsigned grid_for(std::int64_t total) {
  return static_cast<unsigned>(std::max<std::int64_t>(1, std::min<std::int64_t>((total + kThreads - 1) / kThreads, 65536)));
}

// xs[r, c] = bf16(x[rows[r], c]) for r < n.
__global__ void moe_gather_bf16_kernel(const float* __restrict__ x, const std::int32_t* __restrict__ rows,
                                       std::int64_t n, std::int64_t H, __nv_bfloat16* __restrict__ xs) {
  const std::int64_t total = n * H;
  for (std::int64_t idx = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = idx / H, c = idx % H;
    xs[idx] = __float2bfloat16_rn(x[static_cast<std::int64_t>(rows[r]) * H + c]);
  }
}

// out[rows[r], c] += route[r] * y[r, c], in r order. Within one expert a token appears in consecutive
// assignments only (grouping keeps (token, slot) order), so the first assignment of each run of equal rows
// adds the whole run sequentially: no two threads write the same element, no atomics, deterministic.
// Separate multiply and add (no FMA), as the CPU reference's out += y * w.
// With sy (fp8): y is a unit-scale FP8 GEMM output, scaled by sy[q] and sw[c] and biased here (the GEMM's
// epilogue, fp8_moe::scaled_output, folded into its one reader).
template <class B>
__global__ void moe_scatter_add_kernel(const float* __restrict__ y, const float* __restrict__ sy,
                                       const float* __restrict__ sw, const B* __restrict__ bias,
                                       const std::int32_t* __restrict__ rows, const float* __restrict__ route,
                                       std::int64_t n, std::int64_t H, float* __restrict__ out) {
  const std::int64_t total = n * H;
  for (std::int64_t idx = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = idx / H, c = idx % H;
    const std::int32_t row = rows[r];
    if (r > 0 && rows[r - 1] == row) continue;
    float* dst = out + static_cast<std::int64_t>(row) * H + c;
    float acc = *dst;
    for (std::int64_t q = r; q < n && rows[q] == row; ++q) {
      const float v = sy ? fp8_moe::scaled_output(y[q * H + c], sy[q], sw[c], bias, c) : y[q * H + c];
      acc = __fadd_rn(acc, __fmul_rn(v, route[q]));
    }
    *dst = acc;
  }
}

// out[rows[q]] += route[q] * y[q] for the n rows of one expert chunk; fp8: y unscaled (see the kernel).
Status scatter_add(const Tensor& y, const Tensor& sy, const Tensor& sw, const Tensor& bias, const Tensor& rows,
                   const float* route, Tensor& out, cudaStream_t stream) {
  const std::int64_t n = rows.size(0), H = out.size(1);
  const bool scaled = sy.defined() && sy.numel() > 0;
  const float* sy_p = scaled ? sy.data<float>() : nullptr;
  const float* sw_p = scaled ? sw.data<float>() : nullptr;
  if (scaled && has_values(bias) && bias.dtype() == DType::bf16)
    moe_scatter_add_kernel<__nv_bfloat16><<<grid_for(n * H), kThreads, 0, stream>>>(
        y.data<float>(), sy_p, sw_p, static_cast<const __nv_bfloat16*>(bias.raw()), rows.data<std::int32_t>(), route,
        n, H, out.data<float>());
  else
    moe_scatter_add_kernel<float><<<grid_for(n * H), kThreads, 0, stream>>>(
        y.data<float>(), sy_p, sw_p, scaled && has_values(bias) ? bias.data<float>() : nullptr,
        rows.data<std::int32_t>(), route, n, H, out.data<float>());
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("moe_scatter_add_kernel");
  return Status::success();
}

Status check_bias(const ExpertWeights& w, const char* op, const char* what) {
  if (!has_values(w.bias)) return Status::success();
  return check_cuda_tensor(w.bias, op, what, {DType::f32, DType::bf16}, {w.n_experts, w.out});
}

Tensor bias_row(const ExpertWeights& w, int e) {
  if (!has_values(w.bias)) return Tensor();
  return w.bias.slice_rows(e, e + 1).view({w.out});
}

}  // namespace

Status check_expert_compute(ExpertStorage storage, ExpertCompute compute) {
  if (is_mxfp4(storage)) return Status::success();
  const ExpertCompute stored = storage == ExpertStorage::bf16 ? ExpertCompute::bf16 : ExpertCompute::fp8;
  if (stored == compute) return Status::success();
  return make_error("experts stored as " + std::string(expert_storage_name(storage)) +
                    " (a day0 convert checkpoint) run with --expert-compute " +
                    std::string(expert_compute_name(stored)) + ", not " + std::string(expert_compute_name(compute)));
}

Result<MoeWorkspace> MoeWorkspace::plan(DeviceArena& arena, const MoeWorkspaceShape& s, Tensor error_flag) {
  if (s.n_experts <= 0 || s.k <= 0 || s.k > s.n_experts || s.hidden <= 0 || s.intermediate <= 0 || s.max_tokens <= 0 ||
      s.hidden % 32 != 0 || s.intermediate % 32 != 0)
    return make_error("MoeWorkspace::plan: need E > 0, 0 < k <= E, max_tokens > 0 and H, I positive multiples of 32 "
                      "(E=" + std::to_string(s.n_experts) + " k=" + std::to_string(s.k) + " H=" +
                      std::to_string(s.hidden) + " I=" + std::to_string(s.intermediate) + " max_tokens=" +
                      std::to_string(s.max_tokens) + ")");
  D0_RETURN_IF_ERROR(check_expert_compute(s.storage, s.compute));
  const bool convert = is_mxfp4(s.storage);  // else the GEMMs read the stored experts
  MoeWorkspace ws;
  ws.shape = s;
  const std::int64_t H = s.hidden, I = s.intermediate, T = s.max_tokens, A = s.max_tokens * s.k;
  ws.max_routed = std::min<std::int64_t>(s.n_experts, A);
  const std::size_t before = arena.used_bytes();
  D0_ASSIGN_OR_RETURN(ws.expert_ids, arena.allocate({ws.max_routed}, DType::i32, "moe workspace expert ids"));
  D0_ASSIGN_OR_RETURN(ws.rows, arena.allocate({A}, DType::i32, "moe workspace rows"));
  D0_ASSIGN_OR_RETURN(ws.route, arena.allocate({A}, DType::f32, "moe workspace route"));
  if (error_flag.defined()) {
    if (error_flag.dtype() != DType::i32 || error_flag.numel() != 1)
      return make_error("MoeWorkspace::plan: the error flag must be i32 [1]");
    ws.error_flag = error_flag;
  } else {
    D0_ASSIGN_OR_RETURN(ws.error_flag, arena.allocate({1}, DType::i32, "moe workspace error flag"));
  }
  D0_ASSIGN_OR_RETURN(ws.gu, arena.allocate({T, 2 * I}, DType::f32, "moe workspace gate_up output"));
  D0_ASSIGN_OR_RETURN(ws.y, arena.allocate({T, H}, DType::f32, "moe workspace down output"));
  const std::int64_t R = ws.max_routed;
  if (s.compute == ExpertCompute::bf16) {
    D0_ASSIGN_OR_RETURN(ws.h, arena.allocate({T, I}, DType::f32, "moe workspace swiglu output"));
    if (convert) {
      D0_ASSIGN_OR_RETURN(ws.gate_up_w, arena.allocate({R, 2 * I, H}, DType::bf16, "moe workspace gate_up experts"));
      D0_ASSIGN_OR_RETURN(ws.down_w, arena.allocate({R, H, I}, DType::bf16, "moe workspace down experts"));
    }
    D0_ASSIGN_OR_RETURN(ws.xs, arena.allocate({T, H}, DType::bf16, "moe workspace gathered tokens"));
    D0_ASSIGN_OR_RETURN(ws.h_bf16, arena.allocate({T, I}, DType::bf16, "moe workspace swiglu bf16"));
  } else {
    if (convert) {
      D0_ASSIGN_OR_RETURN(ws.gate_up_w8,
                          arena.allocate({R, 2 * I, H}, DType::f8_e4m3, "moe workspace gate_up fp8 experts"));
      D0_ASSIGN_OR_RETURN(ws.gate_up_scales,
                          arena.allocate({R, 2 * I}, DType::f32, "moe workspace gate_up row scales"));
      D0_ASSIGN_OR_RETURN(ws.down_w8, arena.allocate({R, H, I}, DType::f8_e4m3, "moe workspace down fp8 experts"));
      D0_ASSIGN_OR_RETURN(ws.down_scales, arena.allocate({R, H}, DType::f32, "moe workspace down row scales"));
    }
    D0_ASSIGN_OR_RETURN(ws.xs8, arena.allocate({T, H}, DType::f8_e4m3, "moe workspace gathered fp8 tokens"));
    D0_ASSIGN_OR_RETURN(ws.xs_scales, arena.allocate({T}, DType::f32, "moe workspace token scales"));
    D0_ASSIGN_OR_RETURN(ws.h8, arena.allocate({T, I}, DType::f8_e4m3, "moe workspace swiglu fp8"));
    D0_ASSIGN_OR_RETURN(ws.h_scales, arena.allocate({T}, DType::f32, "moe workspace swiglu scales"));
    D0_ASSIGN_OR_RETURN(ws.fp8_inexact, arena.allocate({1}, DType::u64, "moe workspace fp8 inexact count"));
  }
  // With fp8 compute too: small calls (decode) then read MXFP4 directly in bf16, larger ones (from 8 tokens an
  // expert) in FP8 GEMMs.
  if (convert && s.fused_max_tokens > 0 && s.n_experts <= kGroupingMaxExperts) {
    ws.fused_tokens = std::min(s.max_tokens, s.fused_max_tokens);
    const std::int64_t Af = ws.fused_tokens * s.k, E = s.n_experts;
    if (!ws.xs.defined()) {  // fp8 compute: the fused path still takes its tokens as bf16
      D0_ASSIGN_OR_RETURN(ws.xs, arena.allocate({ws.fused_tokens, H}, DType::bf16, "moe workspace fused tokens"));
    }
    D0_ASSIGN_OR_RETURN(ws.group_counts, arena.allocate({E}, DType::i32, "moe workspace group counts"));
    D0_ASSIGN_OR_RETURN(ws.group_offsets, arena.allocate({E + 1}, DType::i32, "moe workspace group offsets"));
    D0_ASSIGN_OR_RETURN(ws.group_rows, arena.allocate({Af}, DType::i32, "moe workspace group rows"));
    D0_ASSIGN_OR_RETURN(ws.group_assignments, arena.allocate({Af}, DType::i32, "moe workspace group assignments"));
    D0_ASSIGN_OR_RETURN(ws.group_experts, arena.allocate({E}, DType::i32, "moe workspace group experts"));
    D0_ASSIGN_OR_RETURN(ws.group_n_routed, arena.allocate({1}, DType::i32, "moe workspace group count"));
    D0_ASSIGN_OR_RETURN(ws.fused_h, arena.allocate({Af, I}, DType::bf16, "moe workspace fused swiglu output"));
    D0_ASSIGN_OR_RETURN(ws.fused_y, arena.allocate({Af, H}, DType::f32, "moe workspace fused down output"));
    if (s.compute == ExpertCompute::fp8) {
      D0_ASSIGN_OR_RETURN(ws.group_entries, arena.allocate({Af}, DType::i32, "moe workspace group entries"));
      D0_ASSIGN_OR_RETURN(ws.fused_x8, arena.allocate({Af, H}, DType::f8_e4m3, "moe workspace fused fp8 tokens"));
      D0_ASSIGN_OR_RETURN(ws.fused_sx, arena.allocate({Af}, DType::f32, "moe workspace fused token scales"));
      D0_ASSIGN_OR_RETURN(ws.fused_gu, arena.allocate({Af, 2 * I}, DType::f32, "moe workspace fused f32 gate_up"));
      D0_ASSIGN_OR_RETURN(ws.fused_h8, arena.allocate({Af, I}, DType::f8_e4m3, "moe workspace fused fp8 swiglu"));
      D0_ASSIGN_OR_RETURN(ws.fused_sh, arena.allocate({Af}, DType::f32, "moe workspace fused swiglu scales"));
      D0_ASSIGN_OR_RETURN(ws.group_item_counter, arena.allocate({1}, DType::i32, "moe workspace gemm item claims"));
    }
  }
  ws.device_bytes = arena.used_bytes() - before;
  ws.host_indices.resize(A);
  ws.host_weights.resize(A);
  ws.host_rows.resize(A);
  ws.host_route.resize(A);
  ws.host_expert_ids.resize(ws.max_routed);
  ws.host_begin.resize(s.n_experts + 1);
  return ws;
}

Result<std::size_t> moe_workspace_bytes(const MoeWorkspaceShape& shape) {
  // Addresses are only counted, never dereferenced: any aligned non-null base will do.
  auto arena = DeviceArena::over(reinterpret_cast<void*>(DeviceArena::kAlignment), std::size_t(1) << 62, Device::cpu);
  D0_ASSIGN_OR_RETURN(MoeWorkspace ws, MoeWorkspace::plan(*arena, shape));
  return arena->used_bytes();
}

namespace {

// The GEMM operands of one routed expert (id e, workspace slot j): [out, in] weights and, for fp8, [out] row scales.
// Converted experts sit in workspace slot j; stored ones are expert e's slice of the stored tensors (no copy).
struct ExpertOperands {
  Tensor gate_up, gate_up_scales, down, down_scales;
};

Tensor expert_slice(const Tensor& t, std::int64_t i, const Shape& shape) { return t.slice_rows(i, i + 1).view(shape); }

ExpertOperands expert_operands(const MoeWorkspace& ws, const ExpertWeights& gate_up, const ExpertWeights& down,
                               std::int64_t j, int e) {
  const std::int64_t H = ws.shape.hidden, I = ws.shape.intermediate;
  const bool fp8 = ws.shape.compute == ExpertCompute::fp8;
  if (!is_mxfp4(gate_up.storage))
    return {expert_slice(gate_up.values, e, {2 * I, H}), fp8 ? expert_slice(gate_up.row_scales, e, {2 * I}) : Tensor(),
            expert_slice(down.values, e, {H, I}), fp8 ? expert_slice(down.row_scales, e, {H}) : Tensor()};
  if (fp8)
    return {expert_slice(ws.gate_up_w8, j, {2 * I, H}), expert_slice(ws.gate_up_scales, j, {2 * I}),
            expert_slice(ws.down_w8, j, {H, I}), expert_slice(ws.down_scales, j, {H})};
  return {expert_slice(ws.gate_up_w, j, {2 * I, H}), Tensor(), expert_slice(ws.down_w, j, {H, I}), Tensor()};
}

// One chunk of n assignments of one expert: gather -> GEMM -> SwiGLU -> GEMM; y [n, H] f32 out.
Status expert_chunk_bf16(const Tensor& x, const Tensor& rows, const ExpertOperands& w, const Tensor& b_gu,
                         const Tensor& b_down, const SwigluParams& p, MoeWorkspace& ws, GemmBf16& gemm, Tensor& y,
                         cudaStream_t stream) {
  const std::int64_t n = rows.size(0), H = ws.shape.hidden;
  Tensor xs = ws.xs.slice_rows(0, n), gu = ws.gu.slice_rows(0, n), h = ws.h.slice_rows(0, n);
  Tensor hb = ws.h_bf16.slice_rows(0, n);
  moe_gather_bf16_kernel<<<grid_for(n * H), kThreads, 0, stream>>>(x.data<float>(), rows.data<std::int32_t>(), n, H,
                                                                  static_cast<__nv_bfloat16*>(xs.raw()));
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("moe_gather_bf16_kernel");
  D0_RETURN_IF_ERROR(gemm.run(xs, w.gate_up, b_gu, gu));
  D0_RETURN_IF_ERROR(swiglu_clamped_cuda(gu, p, h, stream));
  D0_RETURN_IF_ERROR(convert_f32_to_bf16_cuda(h, hb, stream));
  return gemm.run(hb, w.down, b_down, y);
}

// The fp8 chunk: gather + quantise, gate_up GEMM (unit scales), its epilogue + SwiGLU + quantise in one kernel,
// down GEMM (unit scales). y [n, H] is left unscaled: the scatter-add applies sh (ws.h_scales), the down row
// scales and bias. The same bits as GEMMs with their own epilogues, two f32 passes and three launches fewer.
Status expert_chunk_fp8(const Tensor& x, const Tensor& rows, const ExpertOperands& w, const Tensor& b_gu,
                        const SwigluParams& p, MoeWorkspace& ws, GemmFp8& gemm, Tensor& y, cudaStream_t stream) {
  const std::int64_t n = rows.size(0);
  Tensor xs = ws.xs8.slice_rows(0, n), sx = ws.xs_scales.slice_rows(0, n);
  Tensor gu = ws.gu.slice_rows(0, n);
  Tensor h8 = ws.h8.slice_rows(0, n), sh = ws.h_scales.slice_rows(0, n);
  D0_RETURN_IF_ERROR(gather_quantize_fp8_cuda(x, rows, xs, sx, ws.error_flag, stream));
  D0_RETURN_IF_ERROR(gemm.run_unscaled(xs, w.gate_up, gu));
  D0_RETURN_IF_ERROR(swiglu_quantize_fp8_cuda(gu, sx, w.gate_up_scales, b_gu, p, h8, sh, stream));
  return gemm.run_unscaled(h8, w.down, y);
}

// The experts' storage against the workspace: one storage for both matrices, stored ones in their own compute,
// MXFP4 ones only with conversion buffers; stored tensors on the device, 16-byte aligned (GEMM operands).
Status check_storage(const ExpertWeights& gate_up, const ExpertWeights& down, const MoeWorkspace& ws, const char* op) {
  if (gate_up.storage != down.storage)
    return make_error(std::string(op) + ": gate_up experts are " + std::string(expert_storage_name(gate_up.storage)) +
                      " but down experts are " + std::string(expert_storage_name(down.storage)));
  if (is_mxfp4(gate_up.storage)) {
    if (!is_mxfp4(ws.shape.storage))
      return make_error(std::string(op) + ": MXFP4 experts need a workspace planned for them (this one was planned "
                        "for stored " + std::string(expert_storage_name(ws.shape.storage)) + " experts)");
    return Status::success();
  }
  D0_RETURN_IF_ERROR(check_expert_compute(gate_up.storage, ws.shape.compute));
  for (const ExpertWeights* w : {&gate_up, &down}) {
    D0_RETURN_IF_ERROR(check_expert_weights(*w, op, Device::cuda));
    if (!aligned_to(w->values.raw(), 16) || (has_values(w->row_scales) && !aligned_to(w->row_scales.raw(), 16)))
      return make_error(std::string(op) + ": stored expert values and row scales must be 16-byte aligned");
  }
  return Status::success();
}

// fp8 compute, prefill-sized: the inputs quantised, the FP8 wgmma gate_up GEMM, SwiGLU, its output quantised by
// grouped entry, the FP8 wgmma down GEMM into y by assignment. The arithmetic of expert_chunk_fp8's chain (the same
// epilogue, SwiGLU and quantisation) grouped over experts on the device, f32 sums in MMA order and the row exponent
// from all groups (moe_mxfp4_wgmma_fp8_cuda.h): both routes below give the same bits. Nothing is counted (the GEMMs
// convert as they go): fp8_inexact keeps the last converting call's count (no fill here: 36 launches of 1 us a
// 120b prefill, each with the idle before it).
// Where experts average enough tokens for the warp-specialised form, gate_up runs on it without SwiGLU (inputs
// quantised once a token into their entries' rows, both halves out in f32 by assignment) and SwiGLU joins the
// quantisation of h: 120b, 4,096 tokens, H200, a layer's gate_up, SwiGLU and quantisations 1,764 us (the inputs
// then quantised by entry, 95 us where now 25) against 1,970 on the 2-CTA GEMM with SwiGLU in its epilogue (`day0
// bench --kernels`, v32). Below that, the 2-CTA GEMM on token rows (tokens quantised once each) with SwiGLU in its
// epilogue, f32 halves by entry, or below kMxfp4WgmmaMinTokensPerExpert its decode-sized form (the same route).
// gate_up_tile: mxfp4_wgmma_fp8_tile_tokens(A, gate_up), which picks the route; on the token-row route the caller
// has quantised the tokens into ws.fused_x8 / fused_sx in its row order (with the grouping, one launch).
Status grouped_fp8_experts(const Tensor& x, const Tensor& rows, const Tensor& entries, const DeviceExpertGroups& groups,
                           const ExpertWeights& gate_up, const ExpertWeights& down, const SwigluParams& p,
                           MoeWorkspace& ws, std::int64_t slots, int gate_up_tile, Tensor& y, cudaStream_t stream) {
  const std::int64_t A = rows.numel(), S = x.size(0);
  Tensor h8 = ws.fused_h8.slice_rows(0, A), sh = ws.fused_sh.slice_rows(0, A);
  const int down_tile = mxfp4_wgmma_fp8_tile_tokens(A, down);  // its inputs are quantised in its order
  const std::int64_t gate_up_slots = mxfp4_wgmma_launch_slots(slots, A, gate_up_tile);
  if (gate_up_tile == kWsFp8TileTokens) {
    Tensor x8 = ws.fused_x8.slice_rows(0, A), sx = ws.fused_sx.slice_rows(0, A);
    D0_RETURN_IF_ERROR(quantize_scatter_fp8_cuda(x, entries, x8, sx, ws.error_flag, stream));
    Tensor gu = ws.fused_gu.slice_rows(0, A);
    D0_RETURN_IF_ERROR(mxfp4_grouped_gemm_wgmma_fp8_cuda(x8, sx, false, gate_up, groups, gate_up_tile,
                                                         gate_up_slots, nullptr, gu, stream));
    D0_RETURN_IF_ERROR(gather_swiglu_quantize_fp8_cuda(gu, groups.assignments, p, h8, sh, ws.error_flag, stream));
  } else {
    const Tensor x8 = ws.fused_x8.slice_rows(0, S), sx = ws.fused_sx.slice_rows(0, S);
    Tensor hf = ws.fused_gu.view({2 * ws.fused_gu.size(0), gate_up.out / 2}).slice_rows(0, A);
    D0_RETURN_IF_ERROR(mxfp4_grouped_gemm_wgmma_fp8_cuda(x8, sx, true, gate_up, groups, gate_up_tile,
                                                         gate_up_slots, &p, hf, stream));
    D0_RETURN_IF_ERROR(gather_quantize_fp8_cuda(hf, Tensor(), h8, sh, ws.error_flag, stream,
                                                mxfp4_wgmma_fp8_row_order(down_tile)));
  }
  return mxfp4_grouped_gemm_wgmma_fp8_cuda(h8, sh, false, down, groups, down_tile,
                                           mxfp4_wgmma_launch_slots(slots, A, down_tile), nullptr, y, stream);
}

// The fused MXFP4 path (moe_mxfp4_fused_cuda.h): x to bf16, grouping on the device, gate_up + SwiGLU, down, and
// the weighted sum in expert order (one token: the token kernels on the router's ids, the same products). Bad expert
// ids are left ungrouped (unwritten) and raise ws.error_flag (reported at sync).
// With `norm`, the weighted sum goes into its residual add and RMSNorm instead of `out` (one kernel).
Status run_fused_moe(const Tensor& x, const Tensor& indices, const Tensor& weights, const ExpertWeights& gate_up,
                     const ExpertWeights& down, const SwigluParams& p, MoeWorkspace& ws, Tensor& out,
                     const MoeNormAfter* norm, cudaStream_t stream) {
  auto combine = [&](const Tensor& y) {
    return norm ? rms_norm_moe_residual_cuda(*norm->x, y, indices, weights, norm->w, norm->eps, norm->plus_one,
                                             *norm->out, stream, norm->out_bf16)
                : moe_combine_cuda(y, indices, weights, out, stream);
  };
  const std::int64_t S = x.size(0), A = S * ws.shape.k;
  if (fused_moe_wide_split(S, ws.shape.batch_invariant) && mxfp4_token_matmul_fits(gate_up) &&
      mxfp4_token_matmul_fits(down)) {  // one token: its k experts straight from the router's ids, no grouping
    Tensor h = ws.fused_h.slice_rows(0, A), y = ws.fused_y.slice_rows(0, A);
    constexpr TokenForm form = TokenForm::f16_groups;  // the same products as the grouped kernel's, fewer instructions
    D0_RETURN_IF_ERROR(mxfp4_token_matmul_cuda(x, indices, gate_up, &p, h, ws.error_flag, stream, {}, form));
    // The router wrote the ids two launches before down.
    D0_RETURN_IF_ERROR(
        mxfp4_token_matmul_cuda(h, indices, down, nullptr, y, ws.error_flag, stream, {.slots = true}, form));
    return combine(y);
  }
  Tensor rows = ws.group_rows.slice_rows(0, A), assignments = ws.group_assignments.slice_rows(0, A);
  // fp8 compute: the inverse too, for quantising each token once into its entries' rows
  Tensor entries = ws.group_entries.defined() ? ws.group_entries.slice_rows(0, A).view({S, ws.shape.k}) : Tensor();
  const std::int64_t slots = std::min<std::int64_t>(ws.shape.n_experts, A);
  Tensor h = ws.fused_h.slice_rows(0, A), y = ws.fused_y.slice_rows(0, A);
  const bool any_order = !ws.shape.batch_invariant;  // batch-invariant mode keeps the fused kernel's sums
  // Experts no GEMM fits (out not a multiple of 64) stay on the fused kernel at any size.
  const bool prefill_sized = any_order && A >= kMxfp4GemmMinTokensPerExpert * ws.shape.n_experts &&
                             mxfp4_grouped_gemm_fits(gate_up) && mxfp4_grouped_gemm_fits(down);
  // fp8 compute: FP8 MMAs from kRsFp8MinTokensPerExpert an expert (below kMxfp4WgmmaMinTokensPerExpert on the
  // form converting weights in registers, moe_mxfp4_rs_fp8_cuda.cuh); fewer take the bf16 kernels below.
  const bool fp8_grouped = ws.shape.compute == ExpertCompute::fp8 && any_order &&
                           A >= kRsFp8MinTokensPerExpert * ws.shape.n_experts && mxfp4_wgmma_fp8_gemm_fits(gate_up) &&
                           mxfp4_wgmma_fp8_gemm_fits(down);
  // Where gate_up reads token rows (grouped_fp8_experts' second route), their quantisation joins the grouping's
  // launch: neither reads the other's outputs (decode, up to 256 assignments: one kernel fewer a layer).
  const int gate_up_tile = fp8_grouped ? mxfp4_wgmma_fp8_tile_tokens(A, gate_up) : 0;
  const bool tokens_with_grouping = fp8_grouped && gate_up_tile != kWsFp8TileTokens;
  Tensor* entries_out = entries.defined() ? &entries : nullptr;
  if (tokens_with_grouping) {
    Tensor x8 = ws.fused_x8.slice_rows(0, S), sx = ws.fused_sx.slice_rows(0, S);
    D0_RETURN_IF_ERROR(group_by_expert_quantize_fp8_cuda(
        indices, ws.shape.n_experts, ws.group_counts, ws.group_offsets, rows, assignments, ws.group_experts,
        ws.group_n_routed, ws.error_flag, x, x8, sx, mxfp4_wgmma_fp8_row_order(gate_up_tile), stream, entries_out));
  } else {
    D0_RETURN_IF_ERROR(group_by_expert_cuda(indices, ws.shape.n_experts, ws.group_counts, ws.group_offsets, rows,
                                            assignments, ws.group_experts, ws.group_n_routed, ws.error_flag, stream,
                                            entries_out));
  }
  const DeviceExpertGroups groups{ws.group_offsets, rows, assignments, ws.group_experts, ws.group_item_counter};
  if (fp8_grouped) {
    D0_RETURN_IF_ERROR(
        grouped_fp8_experts(x, rows, entries, groups, gate_up, down, p, ws, slots, gate_up_tile, y, stream));
    return combine(y);
  }
  Tensor xb = ws.xs.slice_rows(0, S);  // the bf16 paths' inputs (the FP8 one quantises x itself)
  D0_RETURN_IF_ERROR(convert_f32_to_bf16_cuda(x, xb, stream));
  if (any_order && A >= kMxfp4WgmmaMinTokensPerExpert * ws.shape.n_experts && mxfp4_wgmma_gemm_fits(gate_up) &&
      mxfp4_wgmma_gemm_fits(down)) {
    const int tile = mxfp4_wgmma_tile_tokens(A, ws.shape.n_experts);
    const std::int64_t tiles = mxfp4_wgmma_launch_slots(slots, A, tile);
    D0_RETURN_IF_ERROR(mxfp4_grouped_gemm_wgmma_cuda(xb, true, gate_up, groups, tile, tiles, &p, h, stream));
    D0_RETURN_IF_ERROR(mxfp4_grouped_gemm_wgmma_cuda(h, false, down, groups, tile, tiles, nullptr, y, stream));
  } else if (prefill_sized) {
    const std::int64_t tiles = mxfp4_gemm_launch_slots(slots, A);
    D0_RETURN_IF_ERROR(mxfp4_grouped_gemm_cuda(xb, true, gate_up, groups, tiles, &p, h, stream));
    D0_RETURN_IF_ERROR(mxfp4_grouped_gemm_cuda(h, false, down, groups, tiles, nullptr, y, stream));
  } else {
    const bool wide = fused_moe_wide_split(S, ws.shape.batch_invariant);
    D0_RETURN_IF_ERROR(mxfp4_grouped_matmul_cuda(xb, true, gate_up, groups, wide, slots, &p, h, stream));
    D0_RETURN_IF_ERROR(mxfp4_grouped_matmul_cuda(h, false, down, groups, wide, slots, nullptr, y, stream));
  }
  return combine(y);
}

// The body of both entry points: exactly one of bf16 / fp8 is given, matching ws.shape.compute.
// With `norm` (moe_experts_add_rms_norm_cuda) only the fused path runs.
Status run_moe_experts(const Tensor& x, const Tensor& indices, const Tensor& weights, const ExpertWeights& gate_up,
                       const ExpertWeights& down, const SwigluParams& p, MoeWorkspace& ws, GemmBf16* bf16,
                       GemmFp8* fp8, Tensor& out, const MoeNormAfter* norm, cudaStream_t stream) {
  const char* op = "moe_experts_cuda";
  const MoeWorkspaceShape& s = ws.shape;
  const bool use_fp8 = s.compute == ExpertCompute::fp8;
  if (use_fp8 ? fp8 == nullptr : bf16 == nullptr)
    return make_error(std::string(op) + ": the workspace was planned for " + (use_fp8 ? "fp8" : "bf16") +
                      " experts but no Gemm" + (use_fp8 ? "Fp8" : "Bf16") + " was given (pass MoeGemms)");
  if (x.dim() != 2 || indices.dim() != 2)
    return make_error(std::string(op) + ": x and indices must be 2-D");
  const std::int64_t S = x.size(0), H = s.hidden, I = s.intermediate, k = indices.size(1);
  if (S > s.max_tokens)
    return make_error(std::string(op) + ": " + std::to_string(S) + " tokens exceed the workspace's max_tokens " +
                      std::to_string(s.max_tokens));
  if (k != s.k) return make_error(std::string(op) + ": k = " + std::to_string(k) + " but the workspace was planned for k = " + std::to_string(s.k));
  if (gate_up.n_experts != s.n_experts || down.n_experts != s.n_experts || gate_up.in != H || gate_up.out != 2 * I ||
      down.in != I || down.out != H)
    return make_error(std::string(op) + ": expert shapes (gate_up " + std::to_string(gate_up.out) + "x" +
                      std::to_string(gate_up.in) + ", down " + std::to_string(down.out) + "x" + std::to_string(down.in) +
                      ", E " + std::to_string(gate_up.n_experts) + ") do not match the workspace (H " + std::to_string(H) +
                      ", I " + std::to_string(I) + ", E " + std::to_string(s.n_experts) + ")");
  D0_RETURN_IF_ERROR(check_cuda_tensor(x, op, "x", {DType::f32}, {S, H}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(out, op, "out", {DType::f32}, {S, H}));
  D0_RETURN_IF_ERROR(check_storage(gate_up, down, ws, op));
  D0_RETURN_IF_ERROR(check_bias(gate_up, op, "gate_up bias"));
  D0_RETURN_IF_ERROR(check_bias(down, op, "down bias"));
  if (indices.dtype() != DType::i32 || indices.shape() != Shape{S, k} || !indices.is_contiguous())
    return make_error(std::string(op) + ": indices must be a contiguous i32 tensor [S, k]");
  if (weights.dtype() != DType::f32 || weights.shape() != Shape{S, k} || !weights.is_contiguous())
    return make_error(std::string(op) + ": weights must be a contiguous f32 tensor [S, k]");
  if (indices.device() != weights.device())
    return make_error(std::string(op) + ": indices and weights must live on the same device");

  // The flag is zeroed once; afterwards only whoever reads it (CudaOps::synchronize) clears it, so a bad id in
  // one layer is not forgotten by the next.
  if (!ws.error_flag_zeroed) {
    D0_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(ws.error_flag.raw(), 0, sizeof(std::int32_t), stream));
    if (ws.group_item_counter.defined())
      D0_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(ws.group_item_counter.raw(), 0, sizeof(std::int32_t), stream));
    ws.error_flag_zeroed = true;
  }
  const std::int64_t A = S * k;
  if (moe_takes_fused_path(ws, S, indices, gate_up, p))
    return run_fused_moe(x, indices, weights, gate_up, down, p, ws, out, norm, stream);
  if (norm)
    return make_error(std::string(op) + ": the residual add and norm fold into the fused MXFP4 path only "
                      "(moe_takes_fused_path)");
  if (s.batch_invariant)
    return make_error(std::string(op) + ": batch-invariant mode runs MoE on the fused MXFP4 kernel only (MXFP4 "
                      "experts, bf16 compute, interleaved gate/up, router on the device); this call needs another path");
  D0_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out.raw(), 0, out.nbytes(), stream));
  if (A == 0) return Status::success();

  // 1. Indices and weights on the host (copied back, one stream sync, when they live on the device).
  const std::int32_t* idx = indices.data<std::int32_t>();
  const float* wts = weights.data<float>();
  if (indices.device() == Device::cuda) {
    D0_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(ws.host_indices.data(), idx, A * sizeof(std::int32_t), cudaMemcpyDeviceToHost, stream));
    D0_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(ws.host_weights.data(), wts, A * sizeof(float), cudaMemcpyDeviceToHost, stream));
    D0_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    idx = ws.host_indices.data();
    wts = ws.host_weights.data();
  }
  // Counting sort by expert, stable in (token, slot) order: the CPU reference's order within an expert.
  const int E = s.n_experts;
  std::fill(ws.host_begin.begin(), ws.host_begin.end(), 0);
  for (std::int64_t a = 0; a < A; ++a) {
    const int e = idx[a];
    if (e < 0 || e >= E) return make_error(std::string(op) + ": expert id " + std::to_string(e) + " out of range [0, " + std::to_string(E) + ")");
    ++ws.host_begin[e + 1];
  }
  for (int e = 0; e < E; ++e) ws.host_begin[e + 1] += ws.host_begin[e];
  // host_begin[e] is used as a cursor below and restored afterwards (it ends at begin[e + 1]).
  for (std::int64_t a = 0; a < A; ++a) {
    const std::int64_t pos = ws.host_begin[idx[a]]++;
    ws.host_rows[pos] = static_cast<std::int32_t>(a / k);
    ws.host_route[pos] = wts[a];
  }
  for (int e = E; e > 0; --e) ws.host_begin[e] = ws.host_begin[e - 1];
  ws.host_begin[0] = 0;
  std::int64_t n_routed = 0;
  for (int e = 0; e < E; ++e)
    if (ws.host_begin[e + 1] > ws.host_begin[e]) ws.host_expert_ids[n_routed++] = e;

  // Pageable host -> device copies return once the source has been staged, so the host vectors may be
  // reused by the next call.
  D0_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(ws.rows.raw(), ws.host_rows.data(), A * sizeof(std::int32_t), cudaMemcpyHostToDevice, stream));
  D0_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(ws.route.raw(), ws.host_route.data(), A * sizeof(float), cudaMemcpyHostToDevice, stream));
  D0_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(ws.expert_ids.raw(), ws.host_expert_ids.data(), n_routed * sizeof(std::int32_t),
                                          cudaMemcpyHostToDevice, stream));

  // 2. Online conversion of the routed experts only (stored experts need none; fp8_inexact then stays 0).
  const Tensor ids = ws.expert_ids.slice_rows(0, n_routed);
  if (use_fp8) D0_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(ws.fp8_inexact.raw(), 0, sizeof(std::uint64_t), stream));
  const bool convert = is_mxfp4(gate_up.storage);
  if (convert && use_fp8) {
    Tensor gu_w = ws.gate_up_w8.slice_rows(0, n_routed), gu_s = ws.gate_up_scales.slice_rows(0, n_routed);
    Tensor down_w = ws.down_w8.slice_rows(0, n_routed), down_s = ws.down_scales.slice_rows(0, n_routed);
    D0_RETURN_IF_ERROR(mxfp4_experts_to_fp8_cuda(gate_up, ids, gu_w, gu_s, ws.error_flag, stream, &ws.fp8_inexact));
    D0_RETURN_IF_ERROR(mxfp4_experts_to_fp8_cuda(down, ids, down_w, down_s, ws.error_flag, stream, &ws.fp8_inexact));
  } else if (convert) {
    Tensor gu_ws = ws.gate_up_w.slice_rows(0, n_routed), down_ws = ws.down_w.slice_rows(0, n_routed);
    D0_RETURN_IF_ERROR(mxfp4_experts_to_bf16_cuda(gate_up, ids, gu_ws, ws.error_flag, stream));
    D0_RETURN_IF_ERROR(mxfp4_experts_to_bf16_cuda(down, ids, down_ws, ws.error_flag, stream));
  }

  // 3. Per routed expert, ascending id, in chunks of at most max_tokens assignments.
  for (std::int64_t j = 0; j < n_routed; ++j) {
    const int e = ws.host_expert_ids[j];
    const Tensor b_gu = bias_row(gate_up, e), b_down = bias_row(down, e);
    const ExpertOperands w = expert_operands(ws, gate_up, down, j, e);
    for (std::int64_t c0 = ws.host_begin[e]; c0 < ws.host_begin[e + 1]; c0 += s.max_tokens) {
      const std::int64_t n = std::min<std::int64_t>(s.max_tokens, ws.host_begin[e + 1] - c0);
      const Tensor rows = ws.rows.slice_rows(c0, c0 + n);
      Tensor y = ws.y.slice_rows(0, n);
      if (use_fp8) {
        D0_RETURN_IF_ERROR(expert_chunk_fp8(x, rows, w, b_gu, p, ws, *fp8, y, stream));
        D0_RETURN_IF_ERROR(scatter_add(y, ws.h_scales.slice_rows(0, n), w.down_scales, b_down, rows,
                                       ws.route.data<float>() + c0, out, stream));
      } else {
        D0_RETURN_IF_ERROR(expert_chunk_bf16(x, rows, w, b_gu, b_down, p, ws, *bf16, y, stream));
        D0_RETURN_IF_ERROR(
            scatter_add(y, Tensor(), Tensor(), Tensor(), rows, ws.route.data<float>() + c0, out, stream));
      }
    }
  }
  return Status::success();
}

}  // namespace

Status moe_experts_cuda(const Tensor& x, const Tensor& indices, const Tensor& weights, const ExpertWeights& gate_up,
                        const ExpertWeights& down, const SwigluParams& p, MoeWorkspace& ws, MoeGemms& gemms,
                        Tensor& out, cudaStream_t stream) {
  return run_moe_experts(x, indices, weights, gate_up, down, p, ws, &gemms.bf16, &gemms.fp8, out, nullptr, stream);
}

bool moe_takes_fused_path(const MoeWorkspace& ws, std::int64_t S, const Tensor& indices, const ExpertWeights& gate_up,
                          const SwigluParams& p) {
  return S > 0 && S <= ws.fused_tokens && is_mxfp4(gate_up.storage) && p.interleaved &&
         indices.device() == Device::cuda;
}

Status moe_experts_add_rms_norm_cuda(const Tensor& x, const Tensor& indices, const Tensor& weights,
                                     const ExpertWeights& gate_up, const ExpertWeights& down, const SwigluParams& p,
                                     MoeWorkspace& ws, MoeGemms& gemms, const MoeNormAfter& norm,
                                     cudaStream_t stream) {
  if (norm.x == nullptr || norm.out == nullptr)
    return make_error("moe_experts_add_rms_norm_cuda: the norm needs its residual x and its out");
  Tensor unused = *norm.x;  // shape-checked as the MoE's out; the fused path never writes it
  return run_moe_experts(x, indices, weights, gate_up, down, p, ws, &gemms.bf16, &gemms.fp8, unused, &norm, stream);
}

Status moe_experts_cuda(const Tensor& x, const Tensor& indices, const Tensor& weights, const ExpertWeights& gate_up,
                        const ExpertWeights& down, const SwigluParams& p, MoeWorkspace& ws, GemmBf16& gemm, Tensor& out,
                        cudaStream_t stream) {
  return run_moe_experts(x, indices, weights, gate_up, down, p, ws, &gemm, nullptr, out, nullptr, stream);
}

}  // namespace day0
