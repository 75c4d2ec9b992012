// Prefill attention on tensor cores (flash-attention 2 style, f16 MMAs, f32 accumulation and softmax): one CTA
// of 8 warps per (128 query rows, head), each warp 16 rows; key/value tiles of 64 rows staged in shared memory as
// f16 (converted once per CTA), scores S = Q K^T and O += P V with mma.sync m16n8k16 fed by ldmatrix, the online
// softmax in registers (in log2 units: one FFMA and one ex2.approx a weight; tiles every row of a warp sees whole
// skip the mask), P to the second MMA straight from the first one's accumulators.
// Numerics as the TF32 kernel this replaced: f16 carries TF32's 11 significant bits; its range is made up by a
// power of two per Q row and per K and V tile (largest magnitude into [2^14, 2^15)), divided out exactly after
// the sums. So Q, K, V and P are rounded to 11 bits (relative 2^-11; elements 2^28 below their block's largest
// lose more, absolutely negligible), all sums in f32; twice TF32's MMA rate and a quarter of its shared loads.
// Rows of one tile may belong to different sequences (a mixed batch): the tile walks each sequence present.
// With a bf16 KV cache and bf16_operands, the MMAs take bf16 operands instead: K and V tiles copied raw (cp.async,
// two tiles ahead over four buffers), Q and P rounded to bf16, no scales (8 significant bits, as a bf16 model's own
// attention; the default, `--f16-attention` the other). That form runs on warpgroup MMAs (wgmma, sm_90a): each
// warpgroup's 64 rows take S = Q K^T from its Q tile and the K tile in shared memory, and O += P V with P from
// registers and V read N-major, in FA3's order (the next tile's S issued with this tile's P V, whose MMAs run under
// the next softmax); a warpgroup skips the softmax of a tile none of its rows sees. Both forms move a row's running
// maximum only past 2^8 (FA3's threshold), so most tiles leave O unscaled.
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
  const float* q;
  const void *k, *v;  // f32, or bf16 with kv_bf16
  bool kv_bf16;
  const std::int32_t* q_pos;
  const void* sinks;
  int sink_kind;
  float* out;  // null: out_bf16 only
  int S, T;
  KeyLayout layout;
  // With kv_bf16: bf16 MMA operands, the pool's K and V as they are (copied raw, two tiles ahead), Q and P rounded
  // to bf16: 8 significant bits where the f16 form keeps 11 with a power of two per block.
  bool bf16_operands = false;
  // Where given ([S, n_heads d] bf16, 4-byte aligned): out rounded to nearest even as well, as it is written.
  void* out_bf16 = nullptr;
  // Where given (bf16 operands only; f32 [S, 2 q_rotary_half], 16-byte aligned, rope_kv_write_cuda's table): q is
  // unrotated and lane pairs (i, i + q_rotary_half) of every head of row s are rotated by (cos, sin) at [s, 2i],
  // [s, 2i + 1] as they are loaded, as the rope kernels would have (rope_math): the same bits, without q's 2 x 67 MB
  // round trip in f32 a 120b layer at 4,096 tokens. q_rotary_half in {8, 16, 24, 32} (attention_tc_rotates_q).
  const float* q_cos_sin = nullptr;
  int q_rotary_half = 0;
};

// Whether the tensor-core kernel can rotate q itself (AttentionTcArgs::q_cos_sin): bf16 operands over a bf16 pool,
// and lane pairs that stay within a thread's Q fragment (rotary half a multiple of 8).
inline bool attention_tc_rotates_q(bool kv_bf16, bool bf16_operands, std::int64_t rotary_half) {
  return kv_bf16 && bf16_operands && rotary_half > 0 && rotary_half % 8 == 0 && 2 * rotary_half <= kAttentionTcHeadDim;
}

Status attention_tc_cuda(const AttentionTcArgs& a, const AttentionParams& p, cudaStream_t stream);

}  // namespace day0
