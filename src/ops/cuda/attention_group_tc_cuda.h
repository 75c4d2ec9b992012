// GQA-group decode attention on tensor cores, for bf16 KV caches (gpt-oss: 64 query heads over 8 KV heads,
// head_dim 64; head_dim 128 too): one block of 4 warps (8 for a lone query) per (query, KV head, split), each warp
// walking its own 16-key steps of the split with no block barrier until the end (8 warps: a 128-key split or window is
// one step a warp). A lone query's first step reads its keys older than itself before the dependent-launch wait.
// Per step a warp loads 16 key and 16 value rows straight into registers (16 bytes a lane, each row read once for the
// whole group), scores them for the 8 heads with mma.sync m16n8k16 (the M dimension holds the 8 heads twice: q's bf16
// high part and its bf16 remainder), takes the online softmax in registers, and accumulates P V the same way (P's high
// part and remainder as the two halves of M, V's transposed fragments built with byte permutes). The warps' states
// merge in a fixed order. Numerics: K and V are exact (bf16 pools); q and P carry ~16 significant bits (high part +
// remainder), products exact, sums in f32: ~2^-17 relative per term against the f32 kernel's 2^-24 (measured in the
// tests), where a bf16 q or P alone would carry 8. Splits leave partials for the merge kernel in attention_cuda.cu's
// layout.
#pragma once

#include <cuda_runtime.h>

#include "core/status.h"
#include "ops/cuda/attention_group_cuda.h"
#include "ops/ops.h"

namespace day0 {

// The group shapes of attention_group_fits, with bf16 K and V (attention_group_cuda calls it for those).
Status attention_group_tc_cuda(const AttentionGroupArgs& a, const AttentionParams& p, cudaStream_t stream);

}  // namespace day0
