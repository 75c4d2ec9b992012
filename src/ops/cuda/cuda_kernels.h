// Launchers of the CUDA kernels gpt-oss needs besides GEMM and attention: each validates shapes, dtypes and
// devices, enqueues on `stream` and returns a Status (never throws, never allocates). Activations are f32
// [tokens, features] row-major on the device; each kernel sits beside its launcher in a *_cuda.cu file.
#pragma once

#include <cuda_runtime.h>

#include "core/status.h"
#include "core/tensor.h"
#include "ops/ops.h"
#include "ops/token_draw.h"
#include "quant/fp8_row_order.h"

namespace day0 {

// out[s] = table[ids[s]] as f32; table bf16/f32 [V, H], ids i32 [S], out f32 [S, H].
// Ids live on the device, so the launcher cannot check them: an id outside [0, V) is clamped into range
// (no out-of-bounds read) and sets error_flag (i32 [1] on the device) to 1. The kernel never clears the flag:
// the caller zeroes it once per step and reads it back when it syncs, so one flag covers many launches.
Status embedding_cuda(const Tensor& table, const Tensor& ids, Tensor& out, Tensor& error_flag, cudaStream_t stream);
// Ops::greedy_tokens: logits f32 [R, V] -> out i32 [R, 2], and the tokens alone (i32 [R]) where tokens is not null.
// check_pick_operands_cuda: those operands' checks, shared with draw_tokens_cuda.
Status check_pick_operands_cuda(const Tensor& logits, const Tensor& out, const Tensor* tokens, const char* op);
Status greedy_tokens_cuda(const Tensor& logits, Tensor& out, Tensor* tokens, cudaStream_t stream);
// Ops::edit_logits: each edited row of logits f32 [R, V] takes its edits (logit_edits.h), before the picks; a pending
// row's token from tokens (i32 [R] on the device; null where no row has one).
Status edit_logits_cuda(Tensor& logits, const LogitEdits& edits, const Tensor* tokens, cudaStream_t stream);
// Ops::draw_tokens: after greedy_tokens_cuda on the same logits and out, each draw's row gets its drawn token
// (token_draw.h) where the row is usable. Vocabularies up to 1,048,576 ids.
Status draw_tokens_cuda(const Tensor& logits, const std::vector<TokenDraw>& draws, Tensor& out, Tensor* tokens,
                        cudaStream_t stream);
// Ops::row_logprobs: after the picks (out) on the same logits, each request's record (logprob_record.h) into records
// i32 [requests, kLogprobRecordWords] on the device. Vocabularies up to 1,048,576 ids.
Status row_logprobs_cuda(const Tensor& logits, const std::vector<LogprobRequest>& requests, const Tensor& out,
                         Tensor& records, cudaStream_t stream);

// Fused residual add and RMSNorm: x += residual (if residual is defined), then
// out = w * x * rsqrt(mean(x^2) + eps) (plus_one: (1 + w)). x, residual, out f32 [S, H]; w bf16/f32 [H].
// With out_bf16 (bf16 [S, H]), also convert_f32_to_bf16_cuda(out) into it, written with out where it can be.
// A dependent launch: w is read before the kernel waits for the one before it, so that kernel must not write w.
Status rms_norm_residual_cuda(Tensor& x, const Tensor& residual, const Tensor& w, float eps, bool plus_one,
                              Tensor& out, cudaStream_t stream, Tensor* out_bf16 = nullptr);

// rms_norm_residual_cuda with the residual of row s the MoE's weighted expert sum: sum over j, in ascending expert
// order, of weights[s, j] * y[s k + j] (y f32 [S k, H] by assignment, as moe_combine_cuda reads it; indices i32 /
// weights f32 [S, k]). The same bits as moe_combine_cuda into a tensor followed by rms_norm_residual_cuda on it,
// out_bf16 too. With out_bf16, out may be an empty Tensor: only the bf16 rows are written (a prefill's next q/k/v
// GEMMs read nothing else: 47 MB less to write a 120b layer at 4,096 tokens).
Status rms_norm_moe_residual_cuda(Tensor& x, const Tensor& y, const Tensor& indices, const Tensor& weights,
                                  const Tensor& w, float eps, bool plus_one, Tensor& out, cudaStream_t stream,
                                  Tensor* out_bf16 = nullptr);

// out = bf16(in), round to nearest even; in f32, out bf16, same shape (any rank).
Status convert_f32_to_bf16_cuda(const Tensor& in, Tensor& out, cudaStream_t stream);

// In place on x f32 [S, n_heads * head_dim]: half-split rotation of the first 2 * inv_freq.numel() lanes per
// head at positions i32 [S]; inv_freq f32 [rotary_dim / 2] on the device; cos and sin scaled by attention_factor.
Status rope_cuda(Tensor& x, int n_heads, int head_dim, const Tensor& positions, const Tensor& inv_freq,
                 float attention_factor, cudaStream_t stream);

// rope_cuda on q [S, n_heads * head_dim] and k [S, n_kv_heads * head_dim], then k and v into rows slots i32 [S] of
// k_pool, v_pool [n_slots, n_kv_heads * head_dim] (as kv_write_cuda: a slot outside the pool is skipped and raises
// error_flag i32 [1]); one launch. q_cos_sin (or null; f32 [S, rotary_dim], 8-byte aligned): q is left unrotated
// and row s gets (cos, sin) of lane pair i at 2i, 2i + 1, the values that would have rotated it, so the tensor-core
// attention rotates q as it loads it, the same bits (AttentionSplit::q_cos_sin).
Status rope_kv_write_cuda(Tensor& q, int n_heads, Tensor& k, int n_kv_heads, const Tensor& v, int head_dim,
                          const Tensor& positions, const Tensor& inv_freq, float attention_factor, const Tensor& slots,
                          Tensor& k_pool, Tensor& v_pool, Tensor& error_flag, cudaStream_t stream,
                          Tensor* q_cos_sin = nullptr);

// rope_kv_write_cuda on q, k and v read as column ranges of qkv f32 [S, (n_heads + 2 n_kv_heads) * head_dim] (one
// GEMM's output, 16-byte aligned): q rotated into q, k rotated into k and its pool, v into v and its pool; qkv is
// only read. The same bits as the three ranges copied out and rope_kv_write_cuda on them. Takes what
// rope_kv_write_from_qkv_fits says it does (a rotary dim of at most 128, in whole quads of lanes, 16-byte aligned
// rows): that says so before the GEMM runs.
bool rope_kv_write_from_qkv_fits(int n_heads, int n_kv_heads, int head_dim, const Tensor& inv_freq, const Tensor& q,
                                 const Tensor& k, const Tensor& v, const Tensor& k_pool, const Tensor& v_pool);
Status rope_kv_write_from_qkv_cuda(const Tensor& qkv, Tensor& q, int n_heads, Tensor& k, int n_kv_heads, Tensor& v,
                                   int head_dim, const Tensor& positions, const Tensor& inv_freq,
                                   float attention_factor, const Tensor& slots, Tensor& k_pool, Tensor& v_pool,
                                   Tensor& error_flag, cudaStream_t stream);

// out f32 [n, I] from gate_up f32 [n, 2I] (interleaved or split layout), as CpuOps::swiglu_clamped.
Status swiglu_clamped_cuda(const Tensor& gate_up, const SwigluParams& p, Tensor& out, cudaStream_t stream);

// q f8_e4m3 [n, I], scales f32 [n] = gather_quantize_fp8_cuda(swiglu_clamped(fp8_gemm_epilogue(gate_up, sx, sw,
// bias))) in one pass per row, the same bits: gate_up f32 [n, 2I] a unit-scale FP8 GEMM output, sx f32 [n],
// sw f32 [2I], bias f32/bf16 [2I] or undefined.
Status swiglu_quantize_fp8_cuda(const Tensor& gate_up, const Tensor& sx, const Tensor& sw, const Tensor& bias,
                                const SwigluParams& p, Tensor& q, Tensor& scales, cudaStream_t stream);

// q f8_e4m3 [n, I], scales f32 [n] = gather_quantize_fp8_cuda(swiglu_clamped(gate_up), rows), the same bits, in
// one pass: gate_up f32 [S, 2I] (interleaved or split halves, as the GEMM's plain epilogue wrote them); rows i32
// [n] on the device, or undefined for rows 0..S-1; I a multiple of 4 up to 4,096. A row id outside [0, S) is
// clamped and sets error_flag (i32 [1]) to 1.
Status gather_swiglu_quantize_fp8_cuda(const Tensor& gate_up, const Tensor& rows, const SwigluParams& p, Tensor& q,
                                       Tensor& scales, Tensor& error_flag, cudaStream_t stream);

// Top-k over logits f32 [S, E] (descending, lower index first on ties), softmax over the k selected.
// indices i32 [S, k], weights f32 [S, k]. k <= 8, E <= 256 (one warp per token, values in registers).
inline constexpr int kRouterMaxK = 8;
inline constexpr int kRouterMaxExperts = 256;
Status router_topk_softmax_cuda(const Tensor& logits, int k, Tensor& indices, Tensor& weights, cudaStream_t stream);

// Online MXFP4 -> BF16 of the selected experts only (w stored as mxfp4): workspace[j] = decode(w[expert_ids[j]]),
// with expert_ids i32 [n] on the device and workspace bf16 [n, out, in]. Bit-exact with mxfp4_decode_row_bf16.
// An id outside [0, E) is clamped (no out-of-bounds read) and sets error_flag (i32 [1]) to 1, as embedding.
Status mxfp4_experts_to_bf16_cuda(const ExpertWeights& w, const Tensor& expert_ids, Tensor& workspace,
                                  Tensor& error_flag, cudaStream_t stream);

// MXFP4 blocks u8 [..., groups, 16] (row-major, rows = the leading dimensions' product, a multiple of 16) into the
// tiled order of quant/mxfp4_tiles.h: tiled u8 [..., 4 ceil(groups / 4), 16], padding zeros (what placement stores
// for ExpertStorage::mxfp4_tiled). Not in place.
Status mxfp4_to_tiles_cuda(const Tensor& blocks, Tensor& tiled, cudaStream_t stream);

// Online MXFP4 -> FP8 E4M3 of the selected experts, with one power-of-two f32 scale per output row (the rule and
// its exactness are in quant/fp8_experts.h): weights_fp8 f8_e4m3 [n, out, in], row_scales f32 [n, out].
// Bit-exact with mxfp4_row_to_fp8. Bad ids are clamped and flagged as in mxfp4_experts_to_bf16_cuda. When
// inexact_count (u64 [1] on the device) is given, the values that did not convert exactly are added to it.
Status mxfp4_experts_to_fp8_cuda(const ExpertWeights& w, const Tensor& expert_ids, Tensor& weights_fp8,
                                 Tensor& row_scales, Tensor& error_flag, cudaStream_t stream,
                                 Tensor* inexact_count = nullptr);

// Whether rows of x (f32 [., H]) quantise into q in the held-row form the FP8 quantisation kernels share
// (fp8_moe::kRowThreads threads holding float4s, codes stored 4 a word): H a multiple of 4 (of 32 for the staged
// order) up to 4,096, x 16-byte aligned (each row then is), q 4-byte aligned.
bool fp8_held_rows_fit(std::int64_t H, const Tensor& x, const Tensor& q, Fp8RowOrder order);

// q[r] = e4m3 codes of x[rows[r]] / scales[r] with scales[r] = amax(|x[rows[r]]|) / 448 (fp8_quantize_row,
// bit-exact). x f32 [S, H]; rows i32 [n] on the device, or undefined for rows 0..S-1; q f8_e4m3 [n, H];
// scales f32 [n]. A row id outside [0, S) is clamped and sets error_flag (i32 [1]) to 1. order: where q's codes
// go within each row (quant/fp8_row_order.h; staged: H a multiple of 32 up to 4,096).
Status gather_quantize_fp8_cuda(const Tensor& x, const Tensor& rows, Tensor& q, Tensor& scales, Tensor& error_flag,
                                cudaStream_t stream, Fp8RowOrder order = Fp8RowOrder::natural);

// gather_quantize_fp8_cuda(x, rows) by the inverse map, each row of x read and quantised once: q[entries[s, j]] and
// scales[entries[s, j]] from x[s] for every j; an entry of -1 stores nothing (an ungrouped assignment), one at or
// past n (q f8_e4m3 [n, H], scales f32 [n]) stores nothing and sets error_flag (i32 [1]) to 1. Rows no entry names
// are not written. x f32 [S, H] with H a multiple of 4 up to 4,096, entries i32 [S, k] (group_by_expert_cuda's).
Status quantize_scatter_fp8_cuda(const Tensor& x, const Tensor& entries, Tensor& q, Tensor& scales, Tensor& error_flag,
                                 cudaStream_t stream);

// y[m, n] += bias[n]; y f32/bf16 [M, N], bias f32/bf16 [N]. The GEMM's fallback when cuBLASLt's bias epilogue
// does not take this dtype pair.
Status add_bias_cuda(Tensor& y, const Tensor& bias, cudaStream_t stream);

// x += y element-wise; x, y f32 of one shape.
Status add_inplace_cuda(Tensor& x, const Tensor& y, cudaStream_t stream);

// y[m, n] = y[m, n] * sx[m] * sw[n] (+ bias[n]), all f32 but bias (f32/bf16); y [M, N], sx [M], sw [N]. GemmFp8's
// epilogue when cuBLASLt applies no per-row / per-column scales itself.
Status fp8_gemm_epilogue_cuda(Tensor& y, const Tensor& sx, const Tensor& sw, const Tensor& bias, cudaStream_t stream);

}  // namespace day0
