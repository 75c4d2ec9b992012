// group_by_expert_cuda: see the header.
#include "ops/cuda/expert_grouping_cuda.h"

#include <cooperative_groups.h>

#include <climits>
#include <string>

#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/dependent_launch.h"
#include "ops/cuda/fp8_moe_math.cuh"

namespace day0 {
namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
// From this many assignments on, a cluster of kClusterBlocks blocks (one an SM) splits them into contiguous chunks;
// below it, one block (a decode step's few).
constexpr int kClusterBlocks = 8;  // the portable cluster size
constexpr int kClusterFromAssignments = 2048;

// Dynamic shared memory: for each warp, a count per expert ([kWarps][E] i32), then per expert this block's count,
// the counts of the blocks before it in the cluster, the experts' totals and their offsets [E + 1].
std::size_t shared_bytes(int E) { return sizeof(std::int32_t) * (static_cast<std::size_t>(kWarps) * E + 4 * E + 1); }

// A lane's ids at base + lane, base + 32 + lane, .. (-1 past end), loaded before any is used (the steps wait on
// shared memory and each other; alone this measured no gain, v31: the loads were not what the steps waited on).
constexpr int kLoadsInFlight = 8;
__device__ __forceinline__ void load_ids(const std::int32_t* idx, int base, int end, int (&ids)[kLoadsInFlight]) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
#pragma unroll
  for (int j = 0; j < kLoadsInFlight; ++j) {
    const int a = base + 32 * j + lane;
    ids[j] = a < end ? idx[a] : -1;
  }
}

// The lanes of the warp whose e equals this lane's, for e in [-1, 2^bits): one ballot a bit of e (and one for
// -1). With match.any a call took 48.6 us at 16,384 assignments over 128 experts, with these ballots 41.1 (H200,
// 120b prefill of 4,096 tokens, v31), on one block.
__device__ __forceinline__ unsigned lanes_with_same(int e, int bits) {
  const unsigned invalid = __ballot_sync(0xffffffffu, e < 0);
  unsigned same = e < 0 ? invalid : ~invalid;
  for (int b = 0; b < bits; ++b) {
    const bool bit = (e >> b) & 1;
    const unsigned ones = __ballot_sync(0xffffffffu, bit);
    same &= bit ? ones : ~ones;
  }
  return same;
}

// A warp's lane l takes the run of experts [begin, end) (E split in 32 runs) and learns, by two warp scans, how many
// assignments (`offset`) and routed experts (`pos`) the runs before its own hold, and the totals (a serial loop
// over E in one thread was ~2 us at 128 experts).
struct ExpertRun {
  int begin, end, offset, pos, total, routed;
};
__device__ __forceinline__ ExpertRun expert_run(const std::int32_t* count, int E, int lane) {
  const int per = (E + 31) / 32;
  ExpertRun run{lane * per, min(E, lane * per + per), 0, 0, 0, 0};
  int n = 0, routed = 0;
  for (int e = run.begin; e < run.end; ++e) {
    n += count[e];
    routed += count[e] > 0;
  }
  int n_incl = n, routed_incl = routed;
  for (int o = 1; o < 32; o <<= 1) {
    const int c = __shfl_up_sync(0xffffffffu, n_incl, o), r = __shfl_up_sync(0xffffffffu, routed_incl, o);
    if (lane >= o) n_incl += c, routed_incl += r;
  }
  run.offset = n_incl - n;
  run.pos = routed_incl - routed;
  run.total = __shfl_sync(0xffffffffu, n_incl, 31);
  run.routed = __shfl_sync(0xffffffffu, routed_incl, 31);
  return run;
}

// One placement step of a warp: the lane's assignment a of expert e (-1: none) goes to first(e) (where the
// expert's places for this warp start) + cursor[e] (this warp's so far) + the lanes below it with e; then the lowest
// of those lanes advances cursor[e] by their number. entries (or null): each assignment's place, -1 for none.
template <class First>
__device__ __forceinline__ void place_step(int a, int e, int bits, int k, int end, First first, std::int32_t* cursor,
                                           std::int32_t* rows, std::int32_t* assignments, std::int32_t* entries) {
  const unsigned lanes_below = (1u << (threadIdx.x % 32)) - 1u;
  const unsigned same = lanes_with_same(e, bits);
  if (e >= 0) {
    const int p = first(e) + cursor[e] + __popc(same & lanes_below);
    rows[p] = a / k;
    assignments[p] = a;
    if (entries) entries[a] = p;
  } else if (entries && a < end) {
    entries[a] = -1;
  }
  __syncwarp();
  if (e >= 0 && (same & lanes_below) == 0) cursor[e] += __popc(same);
  __syncwarp();
}

// A cluster of one or kClusterBlocks blocks; block r owns the contiguous chunk r of the assignments, and warp w of
// it the contiguous segment w of that chunk. Each warp counts its segment per expert (lanes with the same expert
// found by lanes_with_same, the lowest one adding for all); per expert the counts become each warp's start within
// its block (a scan over the warps); the blocks read each other's totals through distributed shared memory, so each
// knows, per expert, the counts of the blocks before it and every expert's offset; each warp then places its segment
// in order. So the grouping is stable, and each assignment is read twice: A / (1,024 x blocks) steps a warp per pass.
// At 16,384 assignments over 128 experts (H200, 120b prefill of 4,096 tokens): one block 42.0 us, a cluster of 8
// 14.8 (v35).
__global__ void __launch_bounds__(kThreads)
    group_kernel(const std::int32_t* idx, int A, int k, int E, std::int32_t* __restrict__ counts,
                 std::int32_t* __restrict__ offsets, std::int32_t* __restrict__ rows,
                 std::int32_t* __restrict__ assignments, std::int32_t* __restrict__ experts,
                 std::int32_t* __restrict__ n_routed, std::int32_t* __restrict__ error_flag,
                 std::int32_t* __restrict__ entries) {
  namespace cg = cooperative_groups;
  const cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank()), blocks = static_cast<int>(cluster.num_blocks());
  extern __shared__ std::int32_t shared[];
  std::int32_t* warp_count = shared;  // [kWarps][E]
  std::int32_t* s_count = shared + kWarps * E;  // this block's, read by the others
  std::int32_t* s_before = s_count + E;         // the blocks' before this one
  std::int32_t* s_total = s_before + E;
  std::int32_t* s_offset = s_total + E;  // [E + 1]
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  for (int i = tid; i < kWarps * E; i += kThreads) warp_count[i] = 0;
  begin_dependent_grid();
  const int chunk = (A + blocks - 1) / blocks, chunk0 = min(A, rank * chunk), chunk_end = min(A, chunk0 + chunk);
  const int segment = (chunk_end - chunk0 + kWarps - 1) / kWarps;
  const int first = min(chunk_end, chunk0 + warp * segment), end = min(chunk_end, first + segment);
  const unsigned lanes_below = (1u << lane) - 1u;
  const int bits = E > 1 ? 32 - __clz(E - 1) : 0;  // of an expert id
  std::int32_t* mine = warp_count + warp * E;
  __syncthreads();
  // Counts of this warp's segment (warp-uniform loop: every lane takes part in the match).
  for (int base = first; base < end; base += 32 * kLoadsInFlight) {
    int ids[kLoadsInFlight];
    load_ids(idx, base, end, ids);
#pragma unroll
    for (int j = 0; j < kLoadsInFlight; ++j) {
      int e = ids[j];
      if (base + 32 * j + lane < end && (e < 0 || e >= E)) {
        *error_flag = 1;
        e = -1;
      }
      const unsigned same = lanes_with_same(e, bits);
      if (e >= 0 && (same & lanes_below) == 0) mine[e] += __popc(same);
      __syncwarp();  // this step's counts before the next step's leaders read them
    }
  }
  __syncthreads();
  // Per expert: this block's count, and each warp's start within the block.
  for (int e = tid; e < E; e += kThreads) {
    int total = 0;
    for (int w = 0; w < kWarps; ++w) {
      const int c = warp_count[w * E + e];
      warp_count[w * E + e] = total;
      total += c;
    }
    s_count[e] = total;
  }
  cluster.sync();  // every block's counts written
  for (int e = tid; e < E; e += kThreads) {
    int before = 0, total = 0;
    for (int r = 0; r < blocks; ++r) {
      const int c = cluster.map_shared_rank(s_count, r)[e];
      before += r < rank ? c : 0;
      total += c;
    }
    s_before[e] = before;
    s_total[e] = total;
  }
  cluster.sync();  // every block's counts read: each may now exit
  // Offsets and the routed list by warp 0, a run of experts a lane.
  if (warp == 0) {
    const ExpertRun run = expert_run(s_total, E, lane);
    int offset = run.offset, pos = run.pos;
    for (int e = run.begin; e < run.end; ++e) {
      s_offset[e] = offset;
      offset += s_total[e];
      if (rank == 0 && s_total[e] > 0) experts[pos++] = e;
    }
    if (lane == 0) {
      s_offset[E] = run.total;
      if (rank == 0) *n_routed = run.routed;
    }
    if (rank == 0)
      for (int e = run.routed + lane; e < E; e += 32) experts[e] = -1;
  }
  __syncthreads();
  if (rank == 0) {
    for (int e = tid; e < E; e += kThreads) {
      counts[e] = s_total[e];
      offsets[e] = s_offset[e];
    }
    if (tid == 0) offsets[E] = s_offset[E];
  }
  // Placement in assignment order: a lane's position is its expert's offset, the blocks before this one, this
  // warp's start in the block, and the lanes before it with the same expert in this step.
  for (int base = first; base < end; base += 32 * kLoadsInFlight) {
    int ids[kLoadsInFlight];
    load_ids(idx, base, end, ids);
#pragma unroll
    for (int j = 0; j < kLoadsInFlight; ++j)
      place_step(
          base + 32 * j + lane, ids[j] < E ? ids[j] : -1, bits, k, end,
          [&](int e) { return s_offset[e] + s_before[e]; }, mine, rows, assignments, entries);
  }
}

// Up to kOneWarpAssignments assignments (a decode step of up to 64 rows at top-4, a short prompt): one warp does all
// of group_kernel's work, its ids held in registers, with no barrier but the warp's. group_kernel's block of 1,024
// threads spent 5.9-11.5 us a layer exposed on such steps (v60: 4.4-5.4% of a 20b decode step at 2-16 rows).
constexpr int kOneWarpAssignments = 32 * kLoadsInFlight;

// Dynamic shared memory: per expert its count, then its offset [E + 1] (the placement's cursor).
std::size_t one_warp_shared_bytes(int E) { return sizeof(std::int32_t) * (2 * static_cast<std::size_t>(E) + 1); }

// The grouping's outputs (group_by_expert_cuda's), for the one-warp form.
struct OneWarpGrouping {
  const std::int32_t* idx;
  int A, k, E;
  std::int32_t *counts, *offsets, *rows, *assignments, *experts, *n_routed, *error_flag, *entries;
};

// group_kernel's work by lanes 0-31 of the block (the caller's first warp), its ids held in registers, with no barrier
// but the warp's; shared: one_warp_shared_bytes(E). It waits for the kernel before (begin_dependent_grid) itself.
__device__ __forceinline__ void group_one_warp(const OneWarpGrouping& g, std::int32_t* shared) {
  const int E = g.E, A = g.A, k = g.k;
  std::int32_t* s_count = shared;       // [E]
  std::int32_t* s_cursor = shared + E;  // [E + 1]: the offsets, then each expert's next place
  const int lane = static_cast<int>(threadIdx.x);
  for (int e = lane; e < E; e += 32) s_count[e] = 0;
  begin_dependent_grid();
  const unsigned lanes_below = (1u << lane) - 1u;
  const int bits = E > 1 ? 32 - __clz(E - 1) : 0;
  int ids[kLoadsInFlight];
  load_ids(g.idx, 0, A, ids);
#pragma unroll
  for (int j = 0; j < kLoadsInFlight; ++j) {  // the ids checked, then counted
    const int a = 32 * j + lane;
    if (a < A && (ids[j] < 0 || ids[j] >= E)) {
      *g.error_flag = 1;
      ids[j] = -1;
    }
    const unsigned same = lanes_with_same(ids[j], bits);
    __syncwarp();  // the last step's counts before this step's leaders add
    if (ids[j] >= 0 && (same & lanes_below) == 0) s_count[ids[j]] += __popc(same);
  }
  __syncwarp();
  // Offsets and the routed list, a run of experts a lane (as group_kernel's warp 0).
  const ExpertRun run = expert_run(s_count, E, lane);
  int offset = run.offset, pos = run.pos;
  for (int e = run.begin; e < run.end; ++e) {
    g.counts[e] = s_count[e];
    g.offsets[e] = s_cursor[e] = offset;
    offset += s_count[e];
    if (s_count[e] > 0) g.experts[pos++] = e;
  }
  if (lane == 31) {
    g.offsets[E] = s_cursor[E] = run.total;
    *g.n_routed = run.routed;
  }
  for (int e = run.routed + lane; e < E; e += 32) g.experts[e] = -1;
  __syncwarp();
  // Placement in assignment order: the expert's cursor and the lanes before this one with the same expert.
#pragma unroll
  for (int j = 0; j < kLoadsInFlight; ++j)
    place_step(
        32 * j + lane, ids[j], bits, k, A, [](int) { return 0; }, s_cursor, g.rows, g.assignments, g.entries);
}

__global__ void __launch_bounds__(32) group_one_warp_kernel(OneWarpGrouping g) {
  extern __shared__ std::int32_t shared[];
  group_one_warp(g, shared);
}

// The one-warp grouping and the per-token FP8 quantisation of the MoE's inputs in one launch (neither reads the
// other's outputs, and both read only what the norm + router wrote): block 0's first warp groups, block 1 + s
// quantises token row s as gather_quantize_fp8_cuda's vector kernel does (the same device code, the same bits).
struct TokenQuantize {
  const float* x;
  int n4;  // float4s a row
  std::uint8_t* q;
  float* scales;
};

template <Fp8RowOrder kOrder>
__global__ void __launch_bounds__(fp8_moe::kRowThreads)
    group_one_warp_quantize_kernel(OneWarpGrouping g, TokenQuantize t) {
  extern __shared__ std::int32_t shared[];
  if (blockIdx.x == 0) {
    if (threadIdx.x < 32) group_one_warp(g, shared);
    return;
  }
  __shared__ float warp_max[fp8_moe::kRowThreads / 32];
  begin_dependent_grid();
  const std::int64_t s = blockIdx.x - 1, H = 4 * static_cast<std::int64_t>(t.n4);
  float4 v[fp8_moe::kRowVecs];
  fp8_moe::load_held_row<fp8_moe::kRowThreads>(reinterpret_cast<const float4*>(t.x + s * H), t.n4, v);
  fp8_moe::quantize_held_row<fp8_moe::kRowThreads, fp8_moe::kRowVecs, kOrder>(v, t.n4, warp_max, t.q + s * H,
                                                                              t.scales + s);
}

}  // namespace

namespace {

// group_by_expert_cuda's operand checks (`op` names the caller in errors).
Status check_grouping(const char* op, const Tensor& indices, int n_experts, const Tensor& counts, const Tensor& offsets,
                      const Tensor& rows, const Tensor& assignments, const Tensor& experts, const Tensor& n_routed,
                      const Tensor& error_flag, const Tensor* entries) {
  if (indices.dim() != 2) return make_error(std::string(op) + ": indices must be [S, k]");
  if (n_experts <= 0 || n_experts > kGroupingMaxExperts)
    return make_error(std::string(op) + ": experts must be in [1, " + std::to_string(kGroupingMaxExperts) + "], got " +
                      std::to_string(n_experts));
  const std::int64_t S = indices.size(0), k = indices.size(1), A = S * k, E = n_experts;
  if (A > INT_MAX) return make_error(std::string(op) + ": more than 2^31 - 1 assignments");
  D0_RETURN_IF_ERROR(check_cuda_tensor(indices, op, "indices", {DType::i32}, {S, k}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(counts, op, "counts", {DType::i32}, {E}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(offsets, op, "offsets", {DType::i32}, {E + 1}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(rows, op, "rows", {DType::i32}, {A}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(assignments, op, "assignments", {DType::i32}, {A}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(experts, op, "experts", {DType::i32}, {E}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(n_routed, op, "n_routed", {DType::i32}, {1}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(error_flag, op, "error_flag", {DType::i32}, {1}));
  if (entries) D0_RETURN_IF_ERROR(check_cuda_tensor(*entries, op, "entries", {DType::i32}, {S, k}));
  if (k <= 0) return make_error(std::string(op) + ": k must be positive");
  return Status::success();
}

OneWarpGrouping grouping_args(const Tensor& indices, int n_experts, Tensor& counts, Tensor& offsets, Tensor& rows,
                              Tensor& assignments, Tensor& experts, Tensor& n_routed, Tensor& error_flag,
                              Tensor* entries) {
  return {indices.data<std::int32_t>(),      static_cast<int>(indices.numel()),
          static_cast<int>(indices.size(1)), n_experts,
          counts.data<std::int32_t>(),       offsets.data<std::int32_t>(),
          rows.data<std::int32_t>(),         assignments.data<std::int32_t>(),
          experts.data<std::int32_t>(),      n_routed.data<std::int32_t>(),
          error_flag.data<std::int32_t>(),   entries ? entries->data<std::int32_t>() : nullptr};
}

}  // namespace

Status group_by_expert_cuda(const Tensor& indices, int n_experts, Tensor& counts, Tensor& offsets, Tensor& rows,
                            Tensor& assignments, Tensor& experts, Tensor& n_routed, Tensor& error_flag,
                            cudaStream_t stream, Tensor* entries) {
  D0_RETURN_IF_ERROR(check_grouping("group_by_expert_cuda", indices, n_experts, counts, offsets, rows, assignments,
                                    experts, n_routed, error_flag, entries));
  const std::int64_t A = indices.numel();
  if (A <= kOneWarpAssignments) {
    launch_dependent(
        group_one_warp_kernel, 1, 32, one_warp_shared_bytes(n_experts), stream,
        grouping_args(indices, n_experts, counts, offsets, rows, assignments, experts, n_routed, error_flag, entries));
    D0_CUDA_RETURN_IF_LAUNCH_ERROR("group_one_warp_kernel");
    return Status::success();
  }
  const std::size_t shared = shared_bytes(n_experts);
  if (shared > 48 * 1024) {  // up to 136 KB at 1,024 experts
    static const cudaError_t opted_in = cudaFuncSetAttribute(group_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                             static_cast<int>(shared_bytes(kGroupingMaxExperts)));
    D0_CUDA_RETURN_IF_ERROR(opted_in);
  }
  const unsigned blocks = A >= kClusterFromAssignments ? kClusterBlocks : 1;
  launch_dependent_clusters(group_kernel, blocks, blocks > 1 ? blocks : 0, kThreads, shared, stream,
                            indices.data<std::int32_t>(), static_cast<int>(A), static_cast<int>(indices.size(1)),
                            n_experts, counts.data<std::int32_t>(), offsets.data<std::int32_t>(),
                            rows.data<std::int32_t>(), assignments.data<std::int32_t>(), experts.data<std::int32_t>(),
                            n_routed.data<std::int32_t>(), error_flag.data<std::int32_t>(),
                            entries ? entries->data<std::int32_t>() : nullptr);
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("group_kernel");
  return Status::success();
}

bool group_quantize_fp8_fused(const Tensor& indices, const Tensor& x, const Tensor& q, Fp8RowOrder order) {
  return indices.dim() == 2 && indices.numel() <= kOneWarpAssignments && x.dim() == 2 && x.dtype() == DType::f32 &&
         x.size(0) == indices.size(0) && x.size(1) > 0 && fp8_held_rows_fit(x.size(1), x, q, order);
}

Status group_by_expert_quantize_fp8_cuda(const Tensor& indices, int n_experts, Tensor& counts, Tensor& offsets,
                                         Tensor& rows, Tensor& assignments, Tensor& experts, Tensor& n_routed,
                                         Tensor& error_flag, const Tensor& x, Tensor& q, Tensor& scales,
                                         Fp8RowOrder order, cudaStream_t stream, Tensor* entries) {
  if (!group_quantize_fp8_fused(indices, x, q, order)) {
    D0_RETURN_IF_ERROR(group_by_expert_cuda(indices, n_experts, counts, offsets, rows, assignments, experts, n_routed,
                                            error_flag, stream, entries));
    return gather_quantize_fp8_cuda(x, Tensor(), q, scales, error_flag, stream, order);
  }
  const char* op = "group_by_expert_quantize_fp8_cuda";
  D0_RETURN_IF_ERROR(check_grouping(op, indices, n_experts, counts, offsets, rows, assignments, experts, n_routed,
                                    error_flag, entries));
  const std::int64_t S = x.size(0), H = x.size(1);
  D0_RETURN_IF_ERROR(check_cuda_tensor(q, op, "q", {DType::f8_e4m3}, {S, H}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(scales, op, "scales", {DType::f32}, {S}));
  const OneWarpGrouping g =
      grouping_args(indices, n_experts, counts, offsets, rows, assignments, experts, n_routed, error_flag, entries);
  const TokenQuantize t{x.data<float>(), static_cast<int>(H / 4), static_cast<std::uint8_t*>(q.raw()),
                        scales.data<float>()};
  auto* kernel = order == Fp8RowOrder::staged ? group_one_warp_quantize_kernel<Fp8RowOrder::staged>
                                              : group_one_warp_quantize_kernel<Fp8RowOrder::natural>;
  launch_dependent(kernel, static_cast<unsigned>(1 + S), fp8_moe::kRowThreads, one_warp_shared_bytes(n_experts), stream,
                   g, t);
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("group_one_warp_quantize_kernel");
  return Status::success();
}

}  // namespace day0
