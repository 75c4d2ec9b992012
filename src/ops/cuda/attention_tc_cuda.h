// Prefill attention on tensor cores (flash-attention 2 style, TF32 MMAs, f32 accumulation and softmax): one CTA
// of 4 warps per (64 query rows, head), each warp 16 rows; key/value tiles of 64 rows staged in shared memory
// (converted to TF32 once), scores S = Q K^T and O += P V with mma.sync m16n8k8, the online softmax in registers.
// P feeds the second MMA straight from the first one's accumulators: inside each 8-key step keys are renamed
// (logical t <-> physical 2t, t + 4 <-> 2t + 1) for P and V alike, which a sum over keys does not notice.
// Rows of one tile may belong to different sequences (a mixed batch): the tile walks each sequence present.
// Numerics: Q, K, V and P rounded to TF32 (10-bit mantissa, relative 2^-11 per element), all sums in f32.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/status.h"
#include "ops/cuda/attention_keys.cuh"
#include "ops/ops.h"

namespace day0 {

inline constexpr int kAttentionTcHeadDim = 64;
// Below this many query rows the per-query kernel (f32 throughout) serves: decode and short prompts.
inline constexpr std::int64_t kAttentionTcMinQueries = 64;
// CudaOps asks for the tensor cores only where steps carry at least this many query rows per sequence on average.
inline constexpr std::int64_t kAttentionTcMinRowsPerSequence = 16;

inline bool attention_tc_fits(std::int64_t S, const AttentionParams& p) {
  return S >= kAttentionTcMinQueries && p.head_dim == kAttentionTcHeadDim;
}

// Arguments as attention_cuda / paged_attention_cuda after their checks (device pointers; T key rows in k, v).
struct AttentionTcArgs {
  const float *q, *k, *v;
  const std::int32_t* q_pos;
  const void* sinks;
  int sink_kind;
  float* out;
  int S, T;
  KeyLayout layout;
};

Status attention_tc_cuda(const AttentionTcArgs& a, const AttentionParams& p, cudaStream_t stream);

}  // namespace day0
