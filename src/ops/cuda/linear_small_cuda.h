// Dense bf16 linear for a few rows (decode): out [M, N] = x [M, K] W [N, K]^T (+ bias), M <= 16, as tensor-core
// MMAs with the weights as the MMA's M side and the tokens as its N side, so a decode step reads every weight
// byte once at close to HBM bandwidth (cuBLASLt's M = 1 kernels reach a fraction of it), with x converted to bf16
// in registers (no separate conversion pass) and up to 4 weights of one input in one launch (q, k, v).
// Scheme: a CTA of 8 warps owns 16 output rows and splits K between its warps; each lane loads 16 contiguous bytes
// of two weight rows per 32-wide k block, summed across warps in a fixed order. Blocks in flight: 4 or 8 a round in
// registers, or (q/k/v's many row tiles) a per-warp cp.async ring of 6-8 in shared memory.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "ops/ops.h"

namespace day0 {

// 16: at 32 rows cuBLASLt is faster for the o projection and lm_head (bench-moe, H200).
inline constexpr std::int64_t kLinearSmallMaxRows = 16;
// Weights this small (gpt-oss's router: 184 KB) are read in a few microseconds whatever the row count, so slices
// of 16 rows beat cuBLASLt's input conversion and GEMM up to kLinearSmallTinyMaxRows rows (bench-moe, H200, router:
// 3.7-3.9 us at 32 / 64 / 128 rows against 7.0-7.3).
inline constexpr std::int64_t kLinearSmallTinyWeightBytes = std::int64_t{1} << 20;
inline constexpr std::int64_t kLinearSmallTinyMaxRows = 128;
// Weights up to this size (gpt-oss's k and v: 2.9 MB each) take 16-row slices up to kLinearSmallMediumMaxRows rows:
// H200, 20b batch 64 (2 rounds), k and v this way instead of cuBLASLt's split-K GEMM and its reduce (5.0 + 2.2 us
// each a layer): 7,857 against 7,748 tok/s.
inline constexpr std::int64_t kLinearSmallMediumWeightBytes = std::int64_t{4} << 20;
inline constexpr std::int64_t kLinearSmallMediumMaxRows = 64;
// Weights this large (gpt-oss's lm_head: 1.16 GB) take the small-M kernel for one row only, cuBLASLt's GEMM with
// the input conversion from two: H100 bench-moe, lm_head, us, small-M / cuBLASLt: 1 row 379.6 / 413.1 (the small-M
// kernel's loads with the L2's 256-byte fetch: 3.05 TB/s), 8 rows 451.8-492.8 / 426.1, 16 rows 575.3 / 440.5.
inline constexpr std::int64_t kLinearSmallHugeWeightBytes = std::int64_t{256} << 20;
inline constexpr std::int64_t kLinearSmallHugeMaxRows = 1;
inline constexpr int kLinearSmallMaxTargets = 4;
// More rows run as slices of 16 (one grid row each, every slice reading the weights again): a row's result is
// the same whatever M (batch-invariant mode takes every call here).
inline constexpr std::int64_t kLinearSmallMaxSlicedRows = std::int64_t{65535} * kLinearSmallMaxRows;

// Whether linear_small_cuda takes this call: 1 <= M <= max_rows, K a multiple of 8 (16-byte rows), bf16 weights,
// at most kLinearSmallMaxTargets outputs. Shapes are checked by the launcher.
bool linear_small_fits(const Tensor& x, const std::vector<LinearTarget>& targets,
                       std::int64_t max_rows = kLinearSmallMaxRows);

// The most rows CudaOps sends to the small-M kernel for these weights together (kLinearSmallMaxRows,
// kLinearSmallTinyMaxRows for tiny weights, kLinearSmallMediumMaxRows for medium ones, kLinearSmallHugeMaxRows for
// huge ones).
std::int64_t linear_small_max_rows(const std::vector<LinearTarget>& targets);

// x f32 [M, K] on the device (16-byte aligned), M <= kLinearSmallMaxSlicedRows; each target's w bf16 [N, K], bias
// f32/bf16 [N] or undefined, out f32 [M, N]. Products are x rounded to bf16 times the
// bf16 weights, summed in f32 (the same values cuBLASLt's bf16 GEMM multiplies; the order of the sum differs).
// A dependent launch (dependent_launch.h): the first weight loads go out before the kernel waits for the one
// before it, so w must not be what that kernel writes (model weights never are). sm_count (CudaContext::sm_count)
// picks the CTA shape with N: the deeper one where the row tiles fit two CTAs an SM.
Status linear_small_cuda(const Tensor& x, const std::vector<LinearTarget>& targets, int sm_count, cudaStream_t stream);

// The router in one launch: linear_small_cuda with the one target `router` (w [E, K], E <= kRouterMaxExperts, out
// f32 [M, E] logits), then router_topk_softmax_cuda's top-k and softmax of each row into indices i32 [M, k] and
// weights f32 [M, k], the same bits: the last CTA of each 16-row slice to finish picks its rows' experts, so the
// top-k kernel and its launch are gone. M <= kLinearSmallTinyMaxRows; counters: u32 [kLinearSmallRouterSlices],
// zero before the call and left zero.
inline constexpr std::int64_t kLinearSmallRouterSlices = kLinearSmallTinyMaxRows / kLinearSmallMaxRows;
// Whether linear_small_router_cuda takes this call with at most max_rows (<= kLinearSmallTinyMaxRows) rows: x as
// linear_small_fits takes it, w [E, K] with E <= kRouterMaxExperts, 1 <= k <= min(kRouterMaxK, E).
bool linear_small_router_fits(const Tensor& x, const LinearTarget& router, int k, std::int64_t max_rows);
Status linear_small_router_cuda(const Tensor& x, const LinearTarget& router, int k, Tensor& indices, Tensor& weights,
                                Tensor& counters, int sm_count, cudaStream_t stream);

// linear_small_cuda over the three targets q [M, n_heads * head_dim], k and v [M, n_kv_heads * head_dim] with
// rope_kv_write_cuda's work in its epilogue (one launch instead of two): q and k rotated at r.positions, then k and
// v into rows r.slots of r.k_pool, r.v_pool (f32 or bf16 [n_slots, n_kv_heads * head_dim]; a slot outside the pool
// is skipped and raises error_flag i32 [1]). A rotated target's CTA sums lane pairs (i, i + head_dim / 2) of one
// head as its rows g and g + 8, so it rotates what it has summed. The same bits as linear_small_cuda followed by
// rope_kv_write_cuda. Full rotary only: r.inv_freq f32 [head_dim / 2], head_dim / 2 a multiple of 8.
bool linear_small_rope_kv_fits(const Tensor& x, const std::vector<LinearTarget>& qkv, const RopeKvArgs& r,
                               std::int64_t max_rows = kLinearSmallMaxRows);
Status linear_small_rope_kv_cuda(const Tensor& x, const std::vector<LinearTarget>& qkv, const RopeKvArgs& r,
                                 Tensor& error_flag, int sm_count, cudaStream_t stream);

}  // namespace day0
