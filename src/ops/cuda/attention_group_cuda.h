// Decode-shaped attention for GQA groups of 8 query heads (gpt-oss: 64 over 8) and head_dim 64 or 128: one block
// of 128 threads per (query, KV head, split) serves the whole group, so each key and value row is read once. Per
// chunk of 128 keys: one thread per key scores it for the 8 heads (its row read whole, q from shared memory); one
// warp per 2 heads takes the chunk's max and sum with shuffles (the online softmax state lives in shared memory);
// then 8 lanes of keys x 16 slices of the value row accumulate all 8 heads (each value row read once, loads of
// many keys in flight per thread), summed over the key lanes in a fixed order at the end. Numerics: f32
// throughout, as the per-head kernel, in another summation order. Splits leave partials for the merge kernel in
// attention_cuda.cu's layout. This kernel reads f32 K/V; bf16 pools go to the tensor-core form
// (attention_group_tc_cuda.h), which attention_group_cuda calls for them.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "core/status.h"
#include "ops/cuda/attention_cuda.h"
#include "ops/cuda/attention_keys.cuh"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/dependent_launch.h"
#include "ops/ops.h"

namespace day0 {

// The group size and head dims the kernel takes.
bool attention_group_fits(const AttentionParams& p);

// Arguments as attention_cuda / paged_attention_cuda after their checks (device pointers; T key rows in k, v).
// q_pos and the layout's tables and q_seq are read before the kernel's dependent wait (dependent_launch.h): they
// must come from a copy (the step's uploaded inputs), not from a kernel launched just before.
struct AttentionGroupArgs {
  const float* q;
  const void *k, *v;  // f32, or bf16 with kv_bf16 (the tensor-core kernel)
  bool kv_bf16;
  const std::int32_t* q_pos;
  const void* sinks;  // added here only without splits (the merge adds it otherwise)
  int sink_kind;
  float* out;      // null: out_bf16 only (splits == 1; with splits the merge writes them)
  void* out_bf16;  // bf16 [S, n_heads * head_dim] or null: out rounded to bf16 as well (the o projection's input)
  int S, T;
  KeyLayout layout;
  int splits;          // >= 1
  int keys_per_split;  // 0: shared out; > 0: fixed length (AttentionSplit)
  float* partials;     // splits > 1: [S * n_heads * splits][head_dim + 2]
};

Status attention_group_cuda(const AttentionGroupArgs& a, const AttentionParams& p, cudaStream_t stream);
// The launchers' shared checks (group shape, alignment, splits), errors naming `op`.
Status check_attention_group_args(const char* op, const AttentionGroupArgs& a, const AttentionParams& p);

#ifdef __CUDACC__
// A group block's query and heads (blockIdx.x = query s x KV head), its block table, whether it is bad
// (query_is_bad), and its split's keys; idle: the split is past the query's live ones (the block returns at once).
// Positions and tables are the step's uploaded inputs (written by no kernel): read before the dependent wait.
// Every thread of the block calls it.
struct GroupQuery {
  std::int64_t s;
  int h0, pos;
  const std::int32_t* table;
  bool bad, idle;
  KeySpan keys;
};
__device__ __forceinline__ GroupQuery group_query(const AttentionGroupArgs& a, int n_heads, int window) {
  GroupQuery q;
  const int n_kv = n_heads / kAttentionGroupHeads;
  q.s = blockIdx.x / static_cast<unsigned>(n_kv);
  q.h0 = static_cast<int>(blockIdx.x % static_cast<unsigned>(n_kv)) * kAttentionGroupHeads;
  q.pos = a.q_pos[q.s];
  const KeyLayout& L = a.layout;
  q.table = L.tables ? L.tables + static_cast<std::int64_t>(L.q_seq[q.s]) * L.max_blocks : nullptr;
  q.bad = query_is_bad(q.pos, a.T, q.table, L);
  const int live = q.bad ? 0 : live_splits(q.pos, window, a.splits, a.keys_per_split);
  q.idle = !q.bad && static_cast<int>(blockIdx.y) >= live;
  q.keys = q.bad || q.idle ? KeySpan{0, -1} : split_keys(q.pos, window, live, a.keys_per_split, blockIdx.y);
  return q;
}

// Where head h0 + g of query s leaves this split's partial (m, l, unnormalised output of d dims) for the merge.
__device__ __forceinline__ float* group_partial(const AttentionGroupArgs& a, std::int64_t s, int n_heads, int h0,
                                                int g, int d) {
  return a.partials + ((s * n_heads + h0 + g) * a.splits + blockIdx.y) * (d + 2);
}

// Element at of the output rows (splits == 1): to out and, where asked, to out_bf16 (convert_f32_to_bf16_cuda's
// rounding).
__device__ __forceinline__ void store_group_out(const AttentionGroupArgs& a, std::int64_t at, float v) {
  if (a.out) a.out[at] = v;
  if (a.out_bf16) static_cast<__nv_bfloat16*>(a.out_bf16)[at] = __float2bfloat16_rn(v);
}

// A query with no keys to read (query_is_bad) gets NaN rows for its kG heads from h0, or, with splits, a NaN m in
// each partial (the merge turns the row into NaN). Every thread of the block calls it.
template <int kG>
__device__ __forceinline__ void write_bad_query(const AttentionGroupArgs& a, std::int64_t s, int n_heads, int h0,
                                                int d) {
  for (int i = threadIdx.x; i < kG * d; i += blockDim.x) {
    const int g = i / d;
    if (a.splits > 1) {
      if (i % d == 0) group_partial(a, s, n_heads, h0, g, d)[0] = NAN;
    } else {
      store_group_out(a, s * n_heads * d + static_cast<std::int64_t>(h0 + g) * d + i % d, NAN);
    }
  }
}

// Both group kernels' launch: `op`'s checks, then the head_dim 64 or 128 instance over (query, KV head) x splits.
using AttentionGroupKernel = void (*)(AttentionGroupArgs, int, int, float);
inline Status launch_attention_group(const char* op, AttentionGroupKernel d64, AttentionGroupKernel d128, int threads,
                                     const AttentionGroupArgs& a, const AttentionParams& p, cudaStream_t stream) {
  D0_RETURN_IF_ERROR(check_attention_group_args(op, a, p));
  if (a.S == 0) return Status::success();
  const dim3 grid(static_cast<unsigned>(static_cast<std::int64_t>(a.S) * p.n_kv_heads),
                  static_cast<unsigned>(a.splits));
  launch_dependent(p.head_dim == 64 ? d64 : d128, grid, threads, 0, stream, a, p.n_heads, p.sliding_window, p.scale);
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("attention_group_kernel (f32 or tensor-core)");
  return Status::success();
}
#endif

}  // namespace day0
