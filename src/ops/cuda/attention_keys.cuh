// What the CUDA attention kernels share: where a key's row is (contiguous or paged), the sink logit's dtype, and
// the KV rows' element type (f32, or bf16 where BackendOptions::kv_cache_dtype says so), read as f32.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>

#include "core/host_device.h"

namespace day0 {

enum SinkKind : int { kNoSink = 0, kSinkF32 = 1, kSinkBf16 = 2, kSinkF16 = 3 };

__device__ __forceinline__ float load_sink(const void* sinks, int kind, int h) {
  switch (kind) {
    case kSinkF32:
      return static_cast<const float*>(sinks)[h];
    case kSinkBf16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(sinks)[h]);
    case kSinkF16:
      return __half2float(static_cast<const __half*>(sinks)[h]);
    default:
      return -INFINITY;
  }
}

#ifdef __CUDACC__
// Four consecutive KV values (16-byte aligned f32, 8-byte aligned bf16) widened exactly to f32.
__device__ __forceinline__ float4 load_kv4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ float4 load_kv4(const __nv_bfloat16* p) {
  const uint2 u = *reinterpret_cast<const uint2*>(p);
  return make_float4(__uint_as_float(u.x << 16), __uint_as_float(u.x & 0xFFFF0000u), __uint_as_float(u.y << 16),
                     __uint_as_float(u.y & 0xFFFF0000u));
}
__device__ __forceinline__ float load_kv(const float* p) { return *p; }
__device__ __forceinline__ float load_kv(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ void store_kv(float* p, float v) { *p = v; }
__device__ __forceinline__ void store_kv(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }
// Four consecutive values, store_kv's roundings (16-byte aligned f32, 8-byte aligned bf16).
__device__ __forceinline__ void store_kv4(float* p, float4 v) { *reinterpret_cast<float4*>(p) = v; }
__device__ __forceinline__ void store_kv4(__nv_bfloat16* p, float4 v) {
  const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y), hi = __floats2bfloat162_rn(v.z, v.w);
  *reinterpret_cast<uint2*>(p) =
      make_uint2(*reinterpret_cast<const std::uint32_t*>(&lo), *reinterpret_cast<const std::uint32_t*>(&hi));
}

// Calls f with a null pointer of a KV pool's element type (bf16 where `bf16`, else f32): the launchers pick their
// kernel instance from its type.
template <class F>
void with_kv_element(bool bf16, F&& f) {
  if (bf16)
    f(static_cast<__nv_bfloat16*>(nullptr));
  else
    f(static_cast<float*>(nullptr));
}
#endif

// Where the keys are: contiguous rows (tables == nullptr), or a paged pool.
struct KeyLayout {
  const std::int32_t* tables = nullptr;  // [B, max_blocks]
  const std::int32_t* q_seq = nullptr;   // [S]
  int max_blocks = 0;
  int block_size = 1;
};

__device__ __forceinline__ std::int64_t key_row(const std::int32_t* table, int block_size, int t) {
  if (!table) return t;
  return static_cast<std::int64_t>(table[t / block_size]) * block_size + t % block_size;
}

#ifdef __CUDACC__
// key_row for a kernel that looks up many keys of one table: a power-of-two block size (the pool's 16) by a shift
// and a mask instead of an integer division (~20 instructions each: ~10% of the tensor-core prefill kernel's
// instructions went to them), others by key_row.
struct KeyRows {
  const std::int32_t* table;
  int block_size, shift;  // shift: log2(block_size) for a power of two, else -1

  __device__ __forceinline__ KeyRows(const std::int32_t* t, int bs) : table(t), block_size(bs), shift(-1) {
    if (bs > 0 && (bs & (bs - 1)) == 0) shift = __ffs(bs) - 1;
  }
  __device__ __forceinline__ std::int64_t operator()(int t) const {
    if (!table) return t;
    if (shift < 0) return key_row(table, block_size, t);
    return (static_cast<std::int64_t>(table[t >> shift]) << shift) | (t & (block_size - 1));
  }
  // The same in 32 bits and two steps, for a pool of at most INT_MAX rows whose table entries the caller has checked
  // against it: entry(t) loads (t's block of a power-of-two size, else the whole row), row32(entry, t) finishes
  // after, so a caller can put the load's latency behind other work.
  __device__ __forceinline__ int entry(int t) const {
    if (!table) return t;
    if (shift < 0) return static_cast<int>(key_row(table, block_size, t));
    return table[t >> shift];
  }
  __device__ __forceinline__ int row32(int entry, int t) const {
    return !table || shift < 0 ? entry : entry << shift | (t & (block_size - 1));
  }
};
#endif

// Split spans are shared out in whole chunks of this many keys where there are enough (every kernel that splits).
constexpr int kSplitChunk = 128;

// How many of a query's `splits` take its keys: the launch sizes the splits for the longest context the block
// tables hold, so a shorter one uses fewer (one a chunk of keys, at least one): the others neither read nor write,
// and the merge reads only these (a 1,024-key query in a table sized for 8,192 keys: 8 splits of 128 keys, not 64
// of 16). With keys_per_split (fixed-length splits), those that hold keys.
D0_HOST_DEVICE int live_splits(int pos, int window, int splits, int keys_per_split) {
  // In 64 bits: the merge asks for a bad query's position too (any int; its live splits all hold NaN).
  const std::int64_t lowest = std::int64_t(pos) - window + 1;
  const std::int64_t first = window > 0 && lowest > 0 ? lowest : 0;
  const std::int64_t n_keys = std::int64_t(pos) - first + 1;
  const int per = keys_per_split > 0 ? keys_per_split : kSplitChunk;
  const std::int64_t want = (n_keys + per - 1) / per;
  return want < 1 ? 1 : want < splits ? static_cast<int>(want) : splits;
}

#ifdef __CUDACC__  // block-level helpers: kernels only (launcher headers include this file from C++)
// Block-uniform: whether query s at `pos` has no keys to read (a position outside [0, T), or a table that points
// outside the pool or holds a negative block among those it needs). Every thread of the block must call it.
__device__ __forceinline__ bool query_is_bad(int pos, int T, const std::int32_t* table, const KeyLayout& layout) {
  bool bad = pos < 0 || (!table && pos >= T) || (table && pos / layout.block_size >= layout.max_blocks);
  if (table && !bad)
    for (int b = threadIdx.x; b <= pos / layout.block_size; b += blockDim.x)
      bad |= table[b] < 0 || (static_cast<std::int64_t>(table[b]) + 1) * layout.block_size > T;
  return __syncthreads_or(bad);
}

// Keys [lo, hi] that split y takes of a query at pos (causal, within the window, which counts the query itself): an
// equal share of its `live` splits (live_splits, which the caller has for its early return), in whole chunks where
// there are enough keys, or keys_per_split each when that is set (fixed-length splits). lo > hi: an empty split
// (y at or past `live`: the live splits' spans cover every key; callers return before asking).
struct KeySpan {
  int lo, hi;
};
__device__ __forceinline__ KeySpan split_keys(int pos, int window, int live, int keys_per_split, int y) {
  const int first = window > 0 ? max(0, pos - window + 1) : 0;
  const int n_keys = pos - first + 1;
  int span = (n_keys + live - 1) / live;
  if (n_keys >= live * kSplitChunk) span = (span + kSplitChunk - 1) / kSplitChunk * kSplitChunk;
  if (keys_per_split > 0) span = keys_per_split;
  const std::int64_t lo64 = first + std::int64_t(y) * span;
  const int lo = lo64 > pos ? pos + 1 : static_cast<int>(lo64);
  const int hi = static_cast<int>(std::int64_t(lo) + span - 1 < pos ? std::int64_t(lo) + span - 1 : pos);
  return {lo, hi};
}
#endif

}  // namespace day0
