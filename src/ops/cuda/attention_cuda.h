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

// q f32 [S, nH*d] at absolute positions q_pos i32 [S] over k, v f32 [T, kvH*d] at positions 0..T-1; query s
// sees keys t with t <= q_pos[s] and (sliding_window == 0 or q_pos[s] - t < sliding_window). sinks f32/bf16/f16
// [nH] (undefined or empty: none) join the softmax max and denominator only. out f32 [S, nH*d]. All on the device.
// Positions live on the device, so the launcher cannot check them: a query whose position is outside [0, T)
// gets a NaN output row (no out-of-bounds read), which the caller's checks will see.
// Prefill (S > 1) and decode (S = 1) alike: one block per (query, head), online softmax over key chunks.
Status attention_cuda(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_pos, const Tensor& sinks,
                      const AttentionParams& p, Tensor& out, cudaStream_t stream);

}  // namespace day0
