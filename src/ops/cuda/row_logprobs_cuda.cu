// Ops::row_logprobs on the GPU: logprob_record (ops/logprobs.h) of a row picked on the device, in draw_tokens'
// shape: a cluster of 8 CTAs a requested row, holding the row in shared memory (draw_cluster_row_cuda.cuh).
// - The max by a cluster reduction; the sum of exp(x - max) in double, each lane's in id order, then the warps, the
//   CTAs and the cluster in a fixed order (the host adds in id order: the two sums differ in their last bits only,
//   and the records' floats with them at most by an ulp; the test says how much).
// - The top n are the ids kept by a top-k cutoff of n (token_cutoff_cuda.cuh: the host's rank order, bit for bit),
//   gathered into the first CTA and ranked there by one warp (n <= 20).
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
#include "ops/cuda/token_cutoff_cuda.cuh"
#include "ops/logprob_record.h"

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

// The cluster's ids past the cutoff, gathered into the first CTA.
struct Kept {
  unsigned count;
  unsigned key[kMaxLogprobTop];
  int id[kMaxLogprobTop];
  float x[kMaxLogprobTop];
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
  __shared__ CutoffShared cutoff_shared;
  __shared__ float warp_max[kWarps];
  __shared__ double warp_sum[kWarps];
  __shared__ float cta_max[kClusterBlocks];  // every CTA's, written by each into every CTA
  __shared__ double cta_sum[kClusterBlocks];
  __shared__ Kept kept;  // the first CTA's
  begin_dependent_grid();  // the picks
  const cg::cluster_group cluster = cg::this_cluster();
  const int request = static_cast<int>(blockIdx.x) / kClusterBlocks;
  const LogprobRequest q = a.requests[request];
  const std::int32_t* o = a.out + 2 * static_cast<long long>(q.row);
  if (o[1] != -1) return;  // unusable: the same for every CTA of the cluster
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32;
  const float* x = a.logits + static_cast<long long>(q.row) * a.V;
  if (tid == 0) kept.count = 0;
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
  if (top_n > 0) {
    TokenCutoff cut{};
    if (top_n < a.V) {
      TokenDraw d;
      d.top_k = top_n;
      cut = cutoff_in_cluster(cluster, cutoff_shared, {row, m, 1.f, cut, false}, d);
    }
    Kept* first = cluster.map_shared_rank(&kept, 0);
    for (int e = tid; e < n; e += kThreads) {
      const int slot = e / kDrawBlock, off = e % kDrawBlock, i = row.block_of(slot) * kDrawBlock + off;
      if (i >= a.V) continue;
      const float xi = row.slot_ids(slot)[off];
      const unsigned key = logit_key(xi);
      if (!cutoff_keeps(cut, key, i)) continue;
      const unsigned at = atomicAdd(&first->count, 1u);
      if (at >= static_cast<unsigned>(kMaxLogprobTop)) continue;  // the cutoff keeps exactly top_n
      first->key[at] = key;
      first->id[at] = i;
      first->x[at] = xi;
    }
  }
  cluster.sync();  // the kept ids are in the first CTA; no CTA reads a peer's shared memory after this
  if (row.rank != 0 || tid >= 32) return;
  std::int32_t* record = a.records + static_cast<long long>(a.first + request) * kLogprobRecordWords;
  const int count = top_n > 0 ? min(static_cast<int>(kept.count), kMaxLogprobTop) : 0;
  // Lane i ranks entry i: the entries before it in rank order (larger key, then lower id).
  int rank = 0;
  if (lane < count) {
    for (int j = 0; j < count; ++j)
      rank += kept.key[j] > kept.key[lane] || (kept.key[j] == kept.key[lane] && kept.id[j] < kept.id[lane]) ? 1 : 0;
  }
  if (lane < count) {
    record[kIds + rank] = kept.id[lane];
    record[kLogprobs + rank] =
        __float_as_int(static_cast<float>(static_cast<double>(kept.x[lane]) - lse));
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
