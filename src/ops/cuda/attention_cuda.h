// Launcher of the CUDA attention kernel: causal GQA over the whole KV so far, with optional sliding window
// and per-head sink logits, as CpuOps::attention. Validates shapes, dtypes and devices, enqueues on `stream`
// and returns a Status (never throws, never allocates).
#pragma once

#include <cuda_runtime.h>

#include "core/status.h"
#include "core/tensor.h"
#include "ops/ops.h"

namespace day0 {

// The largest head_dim the kernel takes (each of its 128 threads owns up to two output lanes).
inline constexpr int kAttentionMaxHeadDim = 256;

// Split-K over the keys (flash-decoding) for steps with few (query, head) pairs, as decode has: `splits` blocks per
// pair each take an equal contiguous share of that query's keys (found on the device from its position) and
// leave (max, sum, unnormalised output) in `partials`, f32 [attention_partials_floats(...)]; a merge kernel adds
// the sink and writes out. splits = 1: one block per pair writes out itself (partials unused).
// tensor_cores (with splits = 1): the tensor-core prefill kernel (attention_tc_cuda.h) where it fits
// (head_dim 64, enough query rows; the per-query kernel otherwise): CudaOps asks for it on prefill-sized steps.
struct AttentionSplit {
  int splits = 1;
  Tensor partials;
  bool tensor_cores = false;
  // With tensor_cores and a bf16 KV pool: bf16 MMA operands (attention_tc_cuda.h, AttentionTcArgs::bf16_operands).
  bool bf16_operands = false;
  // 0: each query's keys are shared out over the splits. > 0: split y takes keys [y n, (y + 1) n) of the query's
  // range whatever the splits (those past its keys are empty), so its sums do not depend on the other queries.
  int keys_per_split = 0;
  // Defined (bf16 [S, nH*d]): also out rounded to bf16 (convert_f32_to_bf16_cuda's bits), the o projection's GEMM
  // input. The kernel that writes out (the tensor-core or group kernel, or the splits' merge) writes it too; the
  // per-head kernel's rows without splits are converted after.
  Tensor out_bf16;
  // With out_bf16, where a kernel writes it: out_bf16 only, out left unwritten (the o projection reads only the
  // copy: 67 MB of f32 rows a 120b layer at 4,096 tokens not written).
  bool bf16_only = false;
  // Defined (f32 [S, rotary_dim], rope_kv_write_cuda's q_cos_sin): q is unrotated and the tensor-core kernel rotates
  // it as it loads it, the same bits as rotated before. Only where attention_rotates_q says so (else an error).
  Tensor q_cos_sin;
};

// Whether the attention of q over keys k, v (a pool or a matrix) with this split runs on the tensor-core kernel with
// bf16 operands, which can take q unrotated with its cos/sin table (AttentionSplit::q_cos_sin) for this rotary half.
bool attention_rotates_q(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionParams& p,
                         const AttentionSplit& split, std::int64_t rotary_half);

// Batch-invariant attention: fixed-length splits, at least 2 so every query takes the merge (one code path).
// 2,048 keys: a 128K-token context is 64 splits; decode of short contexts gets fewer blocks (slower).
inline constexpr int kAttentionInvariantKeysPerSplit = 2048;
int attention_invariant_splits(const AttentionParams& p, std::int64_t max_keys);

// Blocks over (query, KV head) that serve the whole GQA group (8 query heads per KV head, as gpt-oss) read each
// key and value row once instead of once per query head: the group kernel (attention_group_cuda.h, head_dim 64 or
// 128) at every step size, splits making up the blocks; for other head dims the per-head kernel's whole-group
// form from kAttentionGroupMinQueries queries (batched decode), one block per (query, head) below that.
inline constexpr int kAttentionGroupHeads = 8;
inline constexpr std::int64_t kAttentionGroupMinQueries = 8;
bool attention_reads_kv_once(std::int64_t S, const AttentionParams& p);

// Splits that give about 4 blocks per SM for S queries whose key ranges are at most max_keys long (the window
// bounds them too), never below one 128-key chunk per split.
int attention_splits(std::int64_t S, const AttentionParams& p, std::int64_t max_keys, int sm_count);
std::int64_t attention_partials_floats(std::int64_t S, const AttentionParams& p, int splits);

// q f32 [S, nH*d] at absolute positions q_pos i32 [S] over k, v f32 [T, kvH*d] at positions 0..T-1; query s
// sees keys t with t <= q_pos[s] and (sliding_window == 0 or q_pos[s] - t < sliding_window). sinks f32/bf16/f16
// [nH] (undefined or empty: none) join the softmax max and denominator only. out f32 [S, nH*d]. All on the device.
// Positions live on the device, so the launcher cannot check them: a query whose position is outside [0, T)
// gets a NaN output row (no out-of-bounds read), which the caller's checks will see.
// Prefill (S > 1) and decode (S = 1) alike: one block per (query, head, split), online softmax over key chunks.
Status attention_cuda(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_pos, const Tensor& sinks,
                      const AttentionParams& p, Tensor& out, cudaStream_t stream, const AttentionSplit& split = {});

// The same over a paged pool (k_pool, v_pool f32 [n_slots, kvH*d]): query s sees positions [0, q_pos[s]] of
// sequence kv.q_seq[s] through its row of kv.block_tables (see PagedKv). A query whose table reaches outside
// the pool, or a negative block id among the blocks it needs, gets a NaN output row (no out-of-bounds read).
Status paged_attention_cuda(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool, const Tensor& q_pos,
                            const PagedKv& kv, const Tensor& sinks, const AttentionParams& p, Tensor& out,
                            cudaStream_t stream, const AttentionSplit& split = {});

// k_pool[slots[s]] = k[s] and v_pool[slots[s]] = v[s]; k, v f32 [S, w], slots i32 [S], pools f32 [n_slots, w].
// A slot outside the pool writes nothing and sets error_flag (i32 [1]) to 1.
Status kv_write_cuda(const Tensor& k, const Tensor& v, const Tensor& slots, Tensor& k_pool, Tensor& v_pool,
                     Tensor& error_flag, cudaStream_t stream);

// The KV-writing launchers' shared checks (kv_write_cuda, rope_kv_write_cuda, linear_small_rope_kv_cuda): 2-D pools
// f32 or bf16 [n_slots, width] of one dtype, slots i32 [S], error_flag i32 [1], all on the device; errors name op.
Status check_kv_slot_writes(const char* op, std::int64_t S, std::int64_t width, const Tensor& slots,
                            const Tensor& k_pool, const Tensor& v_pool, const Tensor& error_flag);

}  // namespace day0
