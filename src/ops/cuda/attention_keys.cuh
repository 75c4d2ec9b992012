// What the CUDA attention kernels share: where a key's row is (contiguous or paged) and the sink logit's dtype.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>

namespace day0 {

enum SinkKind : int { kNoSink = 0, kSinkF32 = 1, kSinkBf16 = 2, kSinkF16 = 3 };

__device__ __forceinline__ float load_sink(const void* sinks, int kind, int h) {
  switch (kind) {
    case kSinkF32: return static_cast<const float*>(sinks)[h];
    case kSinkBf16: return __bfloat162float(static_cast<const __nv_bfloat16*>(sinks)[h]);
    case kSinkF16: return __half2float(static_cast<const __half*>(sinks)[h]);
    default: return -INFINITY;
  }
}

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

}  // namespace day0
