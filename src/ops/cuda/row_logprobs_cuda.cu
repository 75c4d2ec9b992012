// Ops::row_logprobs on the GPU: logprob_record (ops/logprobs.h) of a row picked on the device, in draw_tokens'
// shape: a cluster of 8 CTAs a requested row, holding the row in shared memory (draw_cluster_row_cuda.cuh).
// - The max by a cluster reduction; the sum of exp(x - max) in double, each lane's in id order, then the warps, the
//   CTAs and the cluster in a fixed order (the host adds in id order: the two sums differ in their last bits only,
//   and the records' floats with them at most by an ulp; the test says how much).
// - The top n (n <= 20) in the host's rank order (logit_key descending, then id ascending) by a threshold: each
//   thread's best id; the n best of those (each warp's, then the CTA's by warp 0, then the cluster's: every CTA the
//   same) end at a threshold T that the true top n cannot rank after (n distinct ids rank at or before it). The ids at
//   or before T come only from the n threads whose best does, so at most n x 2 x slots of them: gathered into the
//   first CTA, whose warp 0 takes their n best. (A top-k cutoff of n, draw_tokens' radix descent, cost ~180 us a
//   row, v62; this is a few warp passes over 20 entries.)
// A dependent launch: it waits for the picks (greedy_tokens, draw_tokens), whose launch it overlaps.
#include <cooperative_groups.h>

#include <climits>
#include <cstddef>
#include <string>
#include <vector>

#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/dependent_launch.h"
#include "ops/cuda/draw_cluster_row_cuda.cuh"
#include "ops/logprob_record.h"
#include "ops/token_cutoff.h"

namespace day0 {
namespace {

using namespace draw_cluster;

constexpr int kMaxRequestsPerLaunch = 64;  // 512 B of the kernel's parameters
constexpr int kIds = 2, kLogprobs = 2 + kMaxLogprobTop;  // LogprobRecord's words
static_assert(offsetof(LogprobRecord, ids) == 4 * kIds && offsetof(LogprobRecord, logprobs) == 4 * kLogprobs);

struct LogprobArgs {
  const float* logits;
  int V;
  const std::int32_t* out;  // [R, 2]: the picks
  std::int32_t* records;    // [n, kLogprobRecordWords]
  int first, n;             // this launch's requests: records first .. first + n - 1
  LogprobRequest requests[kMaxRequestsPerLaunch];
};

// An id and its logit's key, compared in rank order.
struct Ranked {
  unsigned key;
  int id;
};
// Ranks after every id of a usable row (logit_key is 0 only for a NaN with every bit set).
__device__ __forceinline__ Ranked after_all() { return {0u, INT_MAX}; }
// Ranks before every id of a usable row (logit_key of +inf is 0xFF800000).
__device__ __forceinline__ Ranked before_all() { return {0xFFFFFFFFu, -1}; }

__device__ __forceinline__ bool ranks_before(const Ranked& a, const Ranked& b) {
  return a.key > b.key || (a.key == b.key && a.id < b.id);
}

// logit_key's inverse.
__device__ __forceinline__ float key_logit(unsigned key) {
  return __uint_as_float((key & 0x80000000u) != 0 ? key & 0x7FFFFFFFu : ~key);
}

// Warp: the best of the lanes' pairs, in every lane.
__device__ __forceinline__ Ranked warp_best(Ranked v) {
#pragma unroll
  for (int off = 16; off >= 1; off /= 2) {
    const Ranked o{__shfl_xor_sync(0xffffffffu, v.key, off), __shfl_xor_sync(0xffffffffu, v.id, off)};
    if (ranks_before(o, v)) v = o;
  }
  return v;
}

// Warp: the n best of the `count` pairs at `in` (or of the lanes' `mine`, with in null), in rank order, into
// out[0, n), then after_all() to out[kMaxLogprobTop) (also past the pairs there are). Round r takes the best of those
// ranking after round r - 1's (the pairs are distinct ids, but for after_all()).
__device__ void warp_top(const Ranked* in, int count, Ranked mine, int n, Ranked* out) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  Ranked last = before_all();
  for (int r = 0; r < n; ++r) {
    Ranked best = in == nullptr && ranks_before(last, mine) ? mine : after_all();
    for (int j = lane; in != nullptr && j < count; j += 32) {
      const Ranked p = in[j];
      if (ranks_before(last, p) && ranks_before(p, best)) best = p;
    }
    best = warp_best(best);
    if (lane == 0) out[r] = best;
    last = best;
  }
  if (lane >= n && lane < kMaxLogprobTop) out[lane] = after_all();
  __syncwarp();
}

// The ids at or before the threshold: at most kMaxLogprobTop threads' (those whose best is), 2 x slots each.
constexpr int kMaxCandidates = kMaxLogprobTop * 2 * (kMaxBlocks / kClusterBlocks);
static_assert(kThreads * 2 == kDrawBlock, "a thread holds two ids of each of its CTA's slots");

// The first CTA's: the cluster's candidates.
struct Candidates {
  unsigned count;
  Ranked at[kMaxCandidates];
};

// Every thread: v's reduction over the CTA by `op` (warp shuffles, then warp 0 over the warps), the same in each.
template <class T, class Op>
__device__ T cta_reduce(T v, T* warp_values, Op op) {
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
#pragma unroll
  for (int off = 16; off >= 1; off /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
  if (lane == 0) warp_values[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = warp_values[lane];  // kWarps == 32
#pragma unroll
    for (int off = 16; off >= 1; off /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
    if (lane == 0) warp_values[0] = v;
  }
  __syncthreads();
  return warp_values[0];
}

__global__ void __launch_bounds__(kThreads) row_logprobs_kernel(const __grid_constant__ LogprobArgs a) {
  static_assert(kWarps == 32);
  extern __shared__ float4 row_cache[];
  __shared__ float warp_max[kWarps];
  __shared__ double warp_sum[kWarps];
  __shared__ float cta_max[kClusterBlocks];  // every CTA's, written by each into every CTA
  __shared__ double cta_sum[kClusterBlocks];
  __shared__ Ranked warp_lists[kWarps][kMaxLogprobTop];
  __shared__ Ranked cta_lists[kClusterBlocks][kMaxLogprobTop];  // every CTA's, written by each into every CTA
  __shared__ Ranked top[kMaxLogprobTop];
  __shared__ Candidates candidates;  // the first CTA's
  begin_dependent_grid();  // the picks
  const cg::cluster_group cluster = cg::this_cluster();
  const int request = static_cast<int>(blockIdx.x) / kClusterBlocks;
  const LogprobRequest q = a.requests[request];
  const std::int32_t* o = a.out + 2 * static_cast<long long>(q.row);
  if (o[1] != -1) return;  // unusable: the same for every CTA of the cluster
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32;
  const float* x = a.logits + static_cast<long long>(q.row) * a.V;
  if (tid == 0) candidates.count = 0;
  const ClusterRow row = load_cluster_row(cluster, x, a.V, reinterpret_cast<float*>(row_cache));
  const int n = row.slots * kDrawBlock;

  float m = -INFINITY;
  for (int e = tid; e < n; e += kThreads) {
    const int slot = e / kDrawBlock, off = e % kDrawBlock;
    if (row.block_of(slot) * kDrawBlock + off < a.V) m = fmaxf(m, row.slot_ids(slot)[off]);
  }
  m = cta_reduce(m, warp_max, [](float u, float v) { return fmaxf(u, v); });
  if (tid < kClusterBlocks) cluster.map_shared_rank(cta_max, tid)[row.rank] = m;
  cluster.sync();
#pragma unroll
  for (int c = 0; c < kClusterBlocks; ++c) m = fmaxf(m, cta_max[c]);

  double s = 0.0;
  for (int e = tid; e < n; e += kThreads) {
    const int slot = e / kDrawBlock, off = e % kDrawBlock;
    if (row.block_of(slot) * kDrawBlock + off < a.V)
      s += exp(static_cast<double>(row.slot_ids(slot)[off]) - static_cast<double>(m));
  }
  s = cta_reduce(s, warp_sum, [](double u, double v) { return u + v; });
  if (tid < kClusterBlocks) cluster.map_shared_rank(cta_sum, tid)[row.rank] = s;
  cluster.sync();
  s = 0.0;
#pragma unroll
  for (int c = 0; c < kClusterBlocks; ++c) s += cta_sum[c];
  const double lse = static_cast<double>(m) + log(s);

  const int top_n = q.top_n < kMaxLogprobTop ? q.top_n : kMaxLogprobTop;
  const int warp = tid / 32;
  if (top_n > 0) {
    Ranked best = after_all();
    for (int e = tid; e < n; e += kThreads) {
      const int slot = e / kDrawBlock, off = e % kDrawBlock, i = row.block_of(slot) * kDrawBlock + off;
      const Ranked p{logit_key(row.slot_ids(slot)[off]), i};
      if (i < a.V && ranks_before(p, best)) best = p;
    }
    warp_top(nullptr, 0, best, top_n, warp_lists[warp]);
    __syncthreads();
    if (warp == 0) {
      warp_top(&warp_lists[0][0], kWarps * kMaxLogprobTop, after_all(), top_n, top);
      if (lane < kMaxLogprobTop)
        for (int c = 0; c < kClusterBlocks; ++c) cluster.map_shared_rank(&cta_lists[row.rank][0], c)[lane] = top[lane];
    }
  }
  cluster.sync();  // every CTA's n best are in every CTA
  if (top_n > 0) {
    if (warp == 0) warp_top(&cta_lists[0][0], kClusterBlocks * kMaxLogprobTop, after_all(), top_n, top);
    __syncthreads();
    const Ranked threshold = top[top_n - 1];  // after_all() where the row has fewer than n ids: all are candidates
    Candidates* first = cluster.map_shared_rank(&candidates, 0);
    for (int e = tid; e < n; e += kThreads) {
      const int slot = e / kDrawBlock, off = e % kDrawBlock, i = row.block_of(slot) * kDrawBlock + off;
      const Ranked p{logit_key(row.slot_ids(slot)[off]), i};
      if (i >= a.V || ranks_before(threshold, p)) continue;
      const unsigned at = atomicAdd(&first->count, 1u);
      if (at < static_cast<unsigned>(kMaxCandidates)) first->at[at] = p;
    }
  }
  cluster.sync();  // the candidates are in the first CTA; no CTA reads a peer's shared memory after this
  if (row.rank != 0 || tid >= 32) return;
  std::int32_t* record = a.records + static_cast<long long>(a.first + request) * kLogprobRecordWords;
  int count = 0;
  if (top_n > 0) {
    warp_top(candidates.at, min(static_cast<int>(candidates.count), kMaxCandidates), after_all(), top_n, top);
    count = min(top_n, a.V);
  }
  if (lane < count) {
    record[kIds + lane] = top[lane].id;
    record[kLogprobs + lane] =
        __float_as_int(static_cast<float>(static_cast<double>(key_logit(top[lane].key)) - lse));
  }
  if (lane >= count && lane < kMaxLogprobTop) {
    record[kIds + lane] = 0;
    record[kLogprobs + lane] = 0;
  }
  if (lane == 0) {
    record[0] = __float_as_int(static_cast<float>(static_cast<double>(x[o[0]]) - lse));
    record[1] = count;
  }
}

}  // namespace

Status row_logprobs_cuda(const Tensor& logits, const std::vector<LogprobRequest>& requests, const Tensor& out,
                         Tensor& records, cudaStream_t stream) {
  const char* op = "row_logprobs_cuda";
  D0_RETURN_IF_ERROR(check_pick_operands_cuda(logits, out, nullptr, op));
  const std::int64_t R = logits.size(0), V = logits.size(1), n = static_cast<std::int64_t>(requests.size());
  if (V > static_cast<std::int64_t>(kMaxBlocks) * kDrawBlock)
    return make_error(std::string(op) + ": a vocabulary of " + std::to_string(V) + " ids exceeds " +
                      std::to_string(kMaxBlocks * kDrawBlock));
  D0_RETURN_IF_ERROR(check_logprob_requests(requests, R, op));
  D0_RETURN_IF_ERROR(check_cuda_tensor(records, op, "records", {DType::i32}, {n, kLogprobRecordWords}));
  LogprobArgs a{logits.data<float>(), static_cast<int>(V), out.data<std::int32_t>(), records.data<std::int32_t>(),
                0, 0, {}};
  static const cudaError_t opted_in = cudaFuncSetAttribute(
      row_logprobs_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(row_cache_bytes(INT_MAX)));
  if (opted_in != cudaSuccess)
    return make_error(std::string(op) + ": the row cache's shared memory: " + cudaGetErrorString(opted_in));
  for (std::size_t first = 0; first < requests.size(); first += kMaxRequestsPerLaunch) {
    a.first = static_cast<int>(first);
    a.n = static_cast<int>(std::min<std::size_t>(kMaxRequestsPerLaunch, requests.size() - first));
    for (int i = 0; i < a.n; ++i) a.requests[i] = requests[first + i];
    launch_dependent_clusters(row_logprobs_kernel, dim3(static_cast<unsigned>(a.n * kClusterBlocks)), kClusterBlocks,
                              dim3(kThreads), row_cache_bytes(V), stream, a);
    D0_CUDA_RETURN_IF_LAUNCH_ERROR("row_logprobs_kernel");
  }
  return Status::success();
}

}  // namespace day0
