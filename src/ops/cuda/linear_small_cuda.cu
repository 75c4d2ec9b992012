// Small-M dense linear on tensor cores: see the header for the scheme.
#include "ops/cuda/linear_small_cuda.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <string>

#include "ops/cuda/attention_cuda.h"
#include "ops/cuda/attention_keys.cuh"
#include "ops/cuda/bias_kind.cuh"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/dependent_launch.h"
#include "ops/cuda/linear_small_tile.cuh"
#include "ops/cuda/rope_math.cuh"
#include "ops/cuda/router_topk.cuh"

namespace day0 {
namespace {

using small_m::kRowsPerCta;
using small_m::kTokensPerMma;
// CTA shapes: split-K warps x 32-wide k blocks whose weights a lane loads before it multiplies. Many row tiles
// (q/k/v's 320, lm_head): 8 x 4, several CTAs per SM. Up to two an SM (o's 180): 8 x 8, half the rounds of loads
// (the kernel is latency-bound: Nsight Compute, v15). A few (the router: 2 tiles of 16 experts at 20b): 16 x 8 on
// one SM each, so a row tile of K = 2,880 is a single round of loads, issued before the dependent wait.
constexpr int kWarps = 8, kInFlight = 4;
constexpr int kWideWarps = 16, kWideInFlight = 8;
constexpr std::int64_t kWideMaxTiles = 16;
// Up to two CTAs an SM (the o projection's 180 row tiles at 20b): 8 k blocks in flight a warp, half the rounds.
constexpr int kDeepInFlight = 8;
// The many-tile shapes (q/k/v) take their weights through a cp.async ring (ring_split_k_sums), of which this many k
// blocks a warp go out before the dependent wait and the rest after it. H200, 20b B1 (v25): q/k/v alone 12.6 ->
// 11.1 us; in decode all 6 before the wait took 2.8 us off q/k/v's exposed time but added 2.5 to the MoE combine +
// norm it overlaps (one CTA whose loads queue behind them), 2 gave 527.8 -> 531.8 tok/s, 0 lost (515.9). The
// 8-deep shape (o) stays on registers: its ring ran 9.4 -> 10.4 us alone.
constexpr int kRingEarlyStages = 2;

struct Target {
  const __nv_bfloat16* w;
  const void* bias;
  float* out;
  int bias_kind;
  int n;           // output rows
  int tile_begin;  // first CTA of this target
  bool rotate;     // the rope epilogue rotates it (q, k): its row tiles hold lane pairs, see tile_rows
  void* pool;      // the rope epilogue also writes it into this KV pool (k, v), or null
};

// The q/k/v epilogue of linear_small_rope_kv_cuda (half = 0 where there is none): rope_kv_write_cuda's work on the
// rows the CTA has just summed.
struct RopeKv {
  int half, head_dim;  // full rotary: head_dim = 2 half, half % 8 == 0
  const std::int32_t* positions;
  const float* inv_freq;
  float attention_factor;
  const std::int32_t* slots;
  std::int64_t n_slots;
  bool bf16_pools;
  std::int32_t* error_flag;
};

// The router's fused top-k (linear_small_router_cuda): k = 0 where there is none.
struct RouterTopk {
  int k;
  std::int32_t* indices;
  float* weights;
  unsigned* counters;  // [slices]: CTAs of the slice done; the last one resets it
};

struct Args {
  const float* x;
  int m, k;
  int n_targets;
  Target t[kLinearSmallMaxTargets];
  RouterTopk topk;
  RopeKv rope;
};

__device__ __forceinline__ float bias_at(const Target& t, int row) { return bias_value(t.bias, t.bias_kind, row); }

// The target whose row tiles hold this CTA.
__device__ __forceinline__ Target cta_target(const Args& a) {
  Target tg = a.t[0];
#pragma unroll
  for (int i = 1; i < kLinearSmallMaxTargets; ++i)
    if (i < a.n_targets && static_cast<int>(blockIdx.x) >= a.t[i].tile_begin) tg = a.t[i];
  return tg;
}

// The output rows of this lane's tile rows g (lo) and g + 8 (hi) in the CTA's row tile: consecutive rows, or for a
// rotated target lane pairs (i, i + half) of one head, i = 8 j + g in the head's tile j, so the epilogue holds
// both lanes of each pair it rotates. Rows past n are clamped by the loads and not stored.
struct TileRows {
  int lo, hi;
};

__device__ __forceinline__ TileRows tile_rows(const Target& tg, int tile, int g, int half) {
  if (!tg.rotate) return {tile * kRowsPerCta + g, tile * kRowsPerCta + g + 8};
  const int tiles_per_head = half / 8;
  const int lo = tile / tiles_per_head * 2 * half + tile % tiles_per_head * 8 + g;
  return {lo, lo + half};
}

// cos and sin of the lane's two tokens (2t, 2t + 1 of its warp's token tile) for its pair, into cs: taken before
// the dependent wait (positions and inv_freq are step inputs and weights, written by no kernel).
__device__ __forceinline__ void rope_cos_sin_early(const Args& a, TileRows r, int token, float (&cs)[4]) {
  const int i = r.lo % a.rope.head_dim;
#pragma unroll
  for (int u = 0; u < 2; ++u)
    if (token + u < a.m)
      rope_math::rope_cos_sin(static_cast<float>(a.rope.positions[token + u]), a.rope.inv_freq[i],
                              a.rope.attention_factor, cs[2 * u], cs[2 * u + 1]);
}

template <class KV>
__device__ __forceinline__ void store_pair_to_pool(const Target& tg, std::int64_t slot, TileRows r, float lo,
                                                   float hi) {
  KV* pool = static_cast<KV*>(tg.pool) + slot * tg.n;
  store_kv(pool + r.lo, lo);
  store_kv(pool + r.hi, hi);
}

// Split-K partials summed in warp order (deterministic), warp i finishing token tile i, and stored with the bias;
// with the rope epilogue, rotated as rope_kv_write_cuda rotates them and written into the pools too. Every thread
// calls it (a CTA barrier).
template <int kTiles, int kWarps>
__device__ __forceinline__ void store_sums(const Args& a, const Target& tg, TileRows r, int token0,
                                           const float (&acc)[kTiles][4], float (*partial)[kTiles][32][4],
                                           const float (&cs)[4]) {
  const int warp = threadIdx.x / 32, t = threadIdx.x % 4;
  float v[4];  // v[0], v[1]: row lo, tokens 2t, 2t + 1; v[2], v[3]: row hi, the same tokens
  if (!small_m::reduce_split_k<kTiles, kWarps>(acc, partial, v)) return;
#pragma unroll
  for (int u = 0; u < 2; ++u) {
    const int token = token0 + warp * kTokensPerMma + 2 * t + u;
    if (token >= a.m) continue;
    float lo = r.lo < tg.n ? v[u] + bias_at(tg, r.lo) : 0.f, hi = r.hi < tg.n ? v[u + 2] + bias_at(tg, r.hi) : 0.f;
    if (tg.rotate) {
      const float c = cs[2 * u], sn = cs[2 * u + 1], first = rope_math::rotated_first(lo, hi, c, sn);
      hi = rope_math::rotated_second(lo, hi, c, sn);
      lo = first;
    }
    float* out = tg.out + static_cast<std::int64_t>(token) * tg.n;
    if (r.lo < tg.n) out[r.lo] = lo;
    if (r.hi < tg.n) out[r.hi] = hi;
    if (tg.pool == nullptr) continue;
    const std::int64_t slot = a.rope.slots[token];
    if (slot < 0 || slot >= a.rope.n_slots) {
      *a.rope.error_flag = 1;  // that token's k and v are not written, as rope_kv_write_cuda
      continue;
    }
    if (a.rope.bf16_pools)
      store_pair_to_pool<__nv_bfloat16>(tg, slot, r, lo, hi);
    else
      store_pair_to_pool<float>(tg, slot, r, lo, hi);
  }
}

// kTiles MMAs of 8 tokens: M <= 8 kTiles. Lane (g, t) of a warp owns, in every 32-wide k block, the 8 contiguous
// values 8t..8t+7 of weight rows g and g + 8 and of token g of each tile; the first MMA takes values 8t..8t+3,
// the second 8t+4..8t+7 (a fixed renaming of k, the same for A and B).
// Registers capped so 4 CTAs (one token tile) or 3 (two) fit an SM: q/k/v's 320 CTAs in one wave instead of
// 264 + 56 at the uncapped 110 registers (ptxas: no spills at 64 and 80); the 8-deep shape at 2 (128, no
// spills). The wide shape takes a whole SM.
// kTopk: the router's fused top-k (the wide shape only: a router has at most 16 row tiles). kStages > 0: the
// weights through a cp.async ring of kStages k blocks a warp in dynamic shared memory (ring_split_k_sums), the same
// sums; 0: through registers, kInFlight blocks a round.
template <int kTiles, int kWarps, int kInFlight, bool kTopk = false, int kStages = 0>
__global__ void __launch_bounds__(kWarps * 32, kWarps == 8 ? (kInFlight == 4 ? (kTiles == 1 ? 4 : 3) : 2) : 1)
    linear_small_kernel(Args a) {
  const Target tg = cta_target(a);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4;
  const TileRows r = tile_rows(tg, static_cast<int>(blockIdx.x) - tg.tile_begin, g, a.rope.half);
  const small_m::WeightRows rows = small_m::weight_rows_at(tg.w, tg.n, a.k, r.lo, r.hi);
  // Rows beyond 16 come in slices of 16 (grid.y), each computed as if it were the whole call.
  const int token0 = static_cast<int>(blockIdx.y) * kLinearSmallMaxRows;
  // The rope epilogue's cos and sin of tokens 2t, 2t + 1, taken once the first weight loads are out.
  float cs[4] = {0.f, 0.f, 0.f, 0.f};
  auto rope_early = [&] {
    if (tg.rotate && warp < kTiles) rope_cos_sin_early(a, r, token0 + warp * kTokensPerMma + 2 * (lane % 4), cs);
  };
  const float* x_row[kTiles];
#pragma unroll
  for (int i = 0; i < kTiles; ++i) {
    const int token = token0 + i * kTokensPerMma + g;
    x_row[i] = token < a.m ? a.x + static_cast<std::int64_t>(token) * a.k : nullptr;
  }
  float acc[kTiles][4];
#pragma unroll
  for (int i = 0; i < kTiles; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
  // No kernel writes weights during a step: the first loads go out before waiting for the kernel before.
  if constexpr (kStages > 0) {
    extern __shared__ __align__(16) unsigned char rings[];
    unsigned char* ring = rings + warp * kStages * small_m::kRingBlockBytes;
    small_m::ring_prologue<kWarps, kInFlight, 0, kRingEarlyStages>(ring, rows);
    rope_early();
    begin_dependent_grid();
    small_m::ring_prologue<kWarps, kInFlight, kRingEarlyStages, kStages>(ring, rows);
    small_m::ring_split_k_sums<kTiles, kWarps, kInFlight, kStages>(acc, ring, rows, x_row);
  } else {
    small_m::WeightRound<kInFlight> round;
    small_m::load_round(round, rows, warp * kInFlight);
    rope_early();
    begin_dependent_grid();
    small_m::split_k_sums<kTiles, kWarps, kInFlight>(acc, round, rows, x_row);
  }

  __shared__ float partial[kWarps][kTiles][32][4];
  store_sums<kTiles, kWarps>(a, tg, r, token0, acc, partial, cs);
  if constexpr (!kTopk) return;

  // The router: the slice's last CTA to finish picks each of its tokens' experts from the logits every CTA wrote
  // (fence, then count; the last sees every write), one warp a token, and resets the count for the next launch.
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    last = atomicAdd(&a.topk.counters[blockIdx.y], 1u) == gridDim.x - 1;
    if (last) a.topk.counters[blockIdx.y] = 0;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  const int tokens_end = min(token0 + static_cast<int>(kLinearSmallMaxRows), a.m);
  for (int token = token0 + warp; token < tokens_end; token += kWarps)
    router_topk_softmax_warp(tg.out + static_cast<std::int64_t>(token) * tg.n, tg.n, a.topk.k,
                             a.topk.indices + static_cast<std::int64_t>(token) * a.topk.k,
                             a.topk.weights + static_cast<std::int64_t>(token) * a.topk.k);
}

}  // namespace

bool linear_small_fits(const Tensor& x, const std::vector<LinearTarget>& targets, std::int64_t max_rows) {
  if (x.dim() != 2 || x.size(0) < 1 || x.size(0) > std::min(max_rows, kLinearSmallMaxSlicedRows) || x.size(1) % 8 != 0)
    return false;
  if (targets.empty() || targets.size() > static_cast<size_t>(kLinearSmallMaxTargets)) return false;
  for (const LinearTarget& t : targets)
    if (t.w.dtype() != DType::bf16) return false;
  return true;
}

std::int64_t linear_small_max_rows(const std::vector<LinearTarget>& targets) {
  std::int64_t bytes = 0;
  for (const LinearTarget& t : targets) bytes += static_cast<std::int64_t>(t.w.nbytes());
  if (bytes >= kLinearSmallHugeWeightBytes) return kLinearSmallHugeMaxRows;
  if (bytes <= kLinearSmallTinyWeightBytes) return kLinearSmallTinyMaxRows;
  return bytes <= kLinearSmallMediumWeightBytes ? kLinearSmallMediumMaxRows : kLinearSmallMaxRows;
}

namespace {

// The kernel's arguments for x and targets (checked), and its grid: row tiles x 16-row slices.
Result<Args> small_m_args(const char* op, const Tensor& x, const std::vector<LinearTarget>& targets, dim3& grid) {
  if (!linear_small_fits(x, targets, kLinearSmallMaxSlicedRows))
    return make_error(std::string(op) + ": needs x f32 [M <= " + std::to_string(kLinearSmallMaxSlicedRows) +
                      ", K % 8 == 0] and 1..4 bf16 weights, got x " + shape_to_string(x.shape()) + " and " +
                      std::to_string(targets.size()) + " weights");
  const std::int64_t M = x.size(0), K = x.size(1);
  D0_RETURN_IF_ERROR(check_cuda_tensor(x, op, "x", {DType::f32}, {M, K}));
  if (!aligned_to(x.raw(), 16)) return make_error(std::string(op) + ": x must be 16-byte aligned");
  Args a{};
  a.x = x.data<float>();
  a.m = static_cast<int>(M);
  a.k = static_cast<int>(K);
  a.n_targets = static_cast<int>(targets.size());
  std::int64_t tiles = 0;
  for (size_t i = 0; i < targets.size(); ++i) {
    const LinearTarget& lt = targets[i];
    if (lt.w.dim() != 2) return make_error(std::string(op) + ": weight " + std::to_string(i) + " must be [N, K]");
    const std::int64_t N = lt.w.size(0);
    D0_RETURN_IF_ERROR(check_cuda_tensor(lt.w, op, "weight", {DType::bf16}, {N, K}));
    D0_RETURN_IF_ERROR(check_cuda_tensor(lt.out, op, "out", {DType::f32}, {M, N}));
    if (!aligned_to(lt.w.raw(), 16)) return make_error(std::string(op) + ": weights must be 16-byte aligned");
    Target& t = a.t[i];
    t.w = static_cast<const __nv_bfloat16*>(lt.w.raw());
    Tensor out = lt.out;  // a handle: the target's storage
    t.out = out.data<float>();
    t.n = static_cast<int>(N);
    t.tile_begin = static_cast<int>(tiles);
    if (has_values(lt.bias)) {
      D0_RETURN_IF_ERROR(check_cuda_tensor(lt.bias, op, "bias", {DType::f32, DType::bf16}, {N}));
      t.bias = lt.bias.raw();
      t.bias_kind = bias_kind_of(lt.bias);
    }
    tiles += (N + kRowsPerCta - 1) / kRowsPerCta;
    if (N < 1 || tiles > 2147483647) return make_error(std::string(op) + ": N must be in [1, 2^31 * 16)");
  }
  const std::int64_t slices = (M + kLinearSmallMaxRows - 1) / kLinearSmallMaxRows;
  grid = dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(slices));
  return a;
}

// The many-tile shapes with their weights through the cp.async ring: kStages k blocks a warp, sized so the shape's
// CTAs an SM (its launch bounds) fit the 228 KB of shared memory: 6 KB a warp at 4 an SM (one token tile), 8 at 3.
template <int kTiles, int kInFlight, int kStages>
Status launch_ring(const Args& a, dim3 grid, cudaStream_t stream) {
  auto* kernel = linear_small_kernel<kTiles, kWarps, kInFlight, false, kStages>;
  constexpr int bytes = kWarps * kStages * small_m::kRingBlockBytes;
  // Once per process (a process drives one device, CudaContext): more than 48 KB of dynamic shared memory.
  static const cudaError_t attribute = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  D0_CUDA_RETURN_IF_ERROR(attribute);
  launch_dependent(kernel, grid, dim3(kWarps * 32), bytes, stream, a);
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("linear_small_kernel");
  return Status::success();
}

Status launch_small_m(const Args& a, dim3 grid, int sm_count, cudaStream_t stream) {
  static_assert(kLinearSmallMaxRows <= 2 * kTokensPerMma, "one or two token tiles");
  // The shape follows N (and the GPU) only: a token's sums do not depend on the batch around it.
  const bool one_tile = a.m <= kTokensPerMma;
  if (grid.x <= kWideMaxTiles) {
    const dim3 wide_block(kWideWarps * 32);
    if (a.topk.k != 0 && one_tile)
      launch_dependent(linear_small_kernel<1, kWideWarps, kWideInFlight, true>, grid, wide_block, 0, stream, a);
    else if (a.topk.k != 0)
      launch_dependent(linear_small_kernel<2, kWideWarps, kWideInFlight, true>, grid, wide_block, 0, stream, a);
    else if (one_tile)
      launch_dependent(linear_small_kernel<1, kWideWarps, kWideInFlight>, grid, wide_block, 0, stream, a);
    else
      launch_dependent(linear_small_kernel<2, kWideWarps, kWideInFlight>, grid, wide_block, 0, stream, a);
  } else if (static_cast<std::int64_t>(grid.x) <= 2 * static_cast<std::int64_t>(sm_count)) {
    if (one_tile)
      launch_dependent(linear_small_kernel<1, kWarps, kDeepInFlight>, grid, dim3(kWarps * 32), 0, stream, a);
    else
      launch_dependent(linear_small_kernel<2, kWarps, kDeepInFlight>, grid, dim3(kWarps * 32), 0, stream, a);
  } else {
    return one_tile ? launch_ring<1, kInFlight, 6>(a, grid, stream) : launch_ring<2, kInFlight, 8>(a, grid, stream);
  }
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("linear_small_kernel");
  return Status::success();
}

}  // namespace

Status linear_small_cuda(const Tensor& x, const std::vector<LinearTarget>& targets, int sm_count, cudaStream_t stream) {
  dim3 grid;
  D0_ASSIGN_OR_RETURN(const Args a, small_m_args("linear_small_cuda", x, targets, grid));
  return launch_small_m(a, grid, sm_count, stream);
}

bool linear_small_router_fits(const Tensor& x, const LinearTarget& router, int k, std::int64_t max_rows) {
  return router.w.dim() == 2 && router.w.size(0) <= kRouterMaxExperts && k >= 1 && k <= kRouterMaxK &&
         k <= router.w.size(0) && linear_small_fits(x, {router}, std::min(max_rows, kLinearSmallTinyMaxRows));
}

Status linear_small_router_cuda(const Tensor& x, const LinearTarget& router, int k, Tensor& indices, Tensor& weights,
                                Tensor& counters, int sm_count, cudaStream_t stream) {
  const char* op = "linear_small_router_cuda";
  dim3 grid;
  D0_ASSIGN_OR_RETURN(Args a, small_m_args(op, x, {router}, grid));
  const std::int64_t M = x.size(0), E = router.w.size(0);
  if (!linear_small_router_fits(x, router, k, kLinearSmallTinyMaxRows))
    return make_error(std::string(op) + ": takes at most " + std::to_string(kLinearSmallTinyMaxRows) + " rows, up to " +
                      std::to_string(kRouterMaxExperts) + " experts and 1 <= k <= min(" + std::to_string(kRouterMaxK) +
                      ", experts); got " + std::to_string(M) + " rows, " + std::to_string(E) +
                      " experts and k = " + std::to_string(k));
  D0_RETURN_IF_ERROR(check_cuda_tensor(indices, op, "indices", {DType::i32}, {M, k}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(weights, op, "weights", {DType::f32}, {M, k}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(counters, op, "counters", {DType::u32}, {kLinearSmallRouterSlices}));
  static_assert((kRouterMaxExperts + kRowsPerCta - 1) / kRowsPerCta <= kWideMaxTiles, "a router is the wide shape");
  a.topk = {k, indices.data<std::int32_t>(), weights.data<float>(), counters.data<unsigned>()};
  return launch_small_m(a, grid, sm_count, stream);
}

bool linear_small_rope_kv_fits(const Tensor& x, const std::vector<LinearTarget>& qkv, const RopeKvArgs& r,
                               std::int64_t max_rows) {
  if (qkv.size() != 3 || !linear_small_fits(x, qkv, max_rows)) return false;
  const std::int64_t half = r.inv_freq.dim() == 1 ? r.inv_freq.size(0) : 0;
  if (r.n_heads <= 0 || r.n_kv_heads <= 0 || half <= 0 || half % 8 != 0 || 2 * half != r.head_dim) return false;
  const std::int64_t q_rows = std::int64_t(r.n_heads) * r.head_dim, kv_rows = std::int64_t(r.n_kv_heads) * r.head_dim;
  for (size_t i = 0; i < 3; ++i)
    if (qkv[i].w.dim() != 2 || qkv[i].w.size(0) != (i == 0 ? q_rows : kv_rows)) return false;
  return r.k_pool.dtype() == DType::f32 || r.k_pool.dtype() == DType::bf16;
}

Status linear_small_rope_kv_cuda(const Tensor& x, const std::vector<LinearTarget>& qkv, const RopeKvArgs& r,
                                 Tensor& error_flag, int sm_count, cudaStream_t stream) {
  const char* op = "linear_small_rope_kv_cuda";
  if (!linear_small_rope_kv_fits(x, qkv, r, kLinearSmallMaxSlicedRows))
    return make_error(std::string(op) + ": takes x as linear_small_cuda does and the targets q [" +
                      std::to_string(r.n_heads) + " heads x head_dim], k and v [" + std::to_string(r.n_kv_heads) +
                      " heads x head_dim] with a full rotary dim (inv_freq [head_dim / 2], a multiple of 8) and f32 "
                      "or bf16 pools; got head_dim " +
                      std::to_string(r.head_dim) + ", inv_freq " + shape_to_string(r.inv_freq.shape()) + ", x " +
                      shape_to_string(x.shape()));
  const std::int64_t M = x.size(0), width = std::int64_t(r.n_kv_heads) * r.head_dim;
  D0_RETURN_IF_ERROR(check_cuda_tensor(r.positions, op, "positions", {DType::i32}, {M}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(r.inv_freq, op, "inv_freq", {DType::f32}, {r.head_dim / 2}));
  D0_RETURN_IF_ERROR(check_kv_slot_writes(op, M, width, r.slots, r.k_pool, r.v_pool, error_flag));
  const std::int64_t n_slots = r.k_pool.size(0);
  dim3 grid;
  D0_ASSIGN_OR_RETURN(Args a, small_m_args(op, x, qkv, grid));
  Tensor k_pool = r.k_pool, v_pool = r.v_pool, flag = error_flag;  // handles: the kernel writes their storage
  a.t[0].rotate = a.t[1].rotate = true;
  a.t[1].pool = k_pool.raw();
  a.t[2].pool = v_pool.raw();
  a.rope = {static_cast<int>(r.head_dim / 2),
            r.head_dim,
            r.positions.data<std::int32_t>(),
            r.inv_freq.data<float>(),
            r.attention_factor,
            r.slots.data<std::int32_t>(),
            n_slots,
            r.k_pool.dtype() == DType::bf16,
            flag.data<std::int32_t>()};
  return launch_small_m(a, grid, sm_count, stream);
}

}  // namespace day0
