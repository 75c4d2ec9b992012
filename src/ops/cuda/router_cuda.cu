// Router top-k + softmax on the GPU: one warp per token. Each lane holds E/32 (<= 8) logits in registers;
// k rounds of a warp arg-max (ties to the lower expert index, as the CPU's stable sort) pick the experts,
// then lane 0 takes the softmax over the k picks in pick order, as CpuOps::router_topk_softmax.
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/dependent_launch.h"

namespace day0 {
namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kPerLane = kRouterMaxExperts / 32;

// (value, index) a beats b: larger value, or equal value and lower index. NaN logits are read as -inf
// (picked last, weight 0; the CPU's sort is unspecified for NaN), so the sentinel (-inf, INT_MAX) loses to
// every real element and each round finds one.
__device__ __forceinline__ bool beats(float va, int ia, float vb, int ib) { return va > vb || (va == vb && ia < ib); }

__global__ void router_topk_softmax_kernel(const float* __restrict__ logits, std::int64_t S, int E, int k,
                                           std::int32_t* __restrict__ indices, float* __restrict__ weights) {
  begin_dependent_grid();
  const int lane = threadIdx.x % 32;
  const std::int64_t s = static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (s >= S) return;  // whole warps leave together, so the shuffles below stay full-warp
  const float* row = logits + s * E;
  float v[kPerLane];
  unsigned taken = 0;  // bit j: element lane + 32 j is taken (or does not exist)
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int e = lane + 32 * j;
    v[j] = e < E ? row[e] : -INFINITY;
    if (isnan(v[j])) v[j] = -INFINITY;
    if (e >= E) taken |= 1u << j;
  }
  float picked_v[kRouterMaxK];
  int picked_i[kRouterMaxK];
#pragma unroll
  for (int r = 0; r < kRouterMaxK; ++r) {
    if (r >= k) break;
    // This lane's best untaken element; INT_MAX marks "none" and loses every tie.
    float best_v = -INFINITY;
    int best_i = 0x7fffffff;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int e = lane + 32 * j;
      if (!(taken & (1u << j)) && beats(v[j], e, best_v, best_i)) best_v = v[j], best_i = e;
    }
    // Butterfly: every lane ends with the warp's winner.
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, best_v, o);
      const int oi = __shfl_xor_sync(0xffffffffu, best_i, o);
      if (beats(ov, oi, best_v, best_i)) best_v = ov, best_i = oi;
    }
    if (best_i % 32 == lane) taken |= 1u << (best_i / 32);
    picked_v[r] = best_v;
    picked_i[r] = best_i;
  }
  if (lane != 0) return;
  const float top = picked_v[0];
  float denom = 0.f;
#pragma unroll
  for (int r = 0; r < kRouterMaxK; ++r)
    if (r < k) denom += expf(picked_v[r] - top);
#pragma unroll
  for (int r = 0; r < kRouterMaxK; ++r)
    if (r < k) {
      indices[s * k + r] = picked_i[r];
      weights[s * k + r] = expf(picked_v[r] - top) / denom;
    }
}

}  // namespace

Status router_topk_softmax_cuda(const Tensor& logits, int k, Tensor& indices, Tensor& weights, cudaStream_t stream) {
  if (logits.dim() != 2)
    return make_error("router_topk_softmax_cuda: logits must be 2-D, got " + shape_to_string(logits.shape()));
  const std::int64_t S = logits.size(0), E = logits.size(1);
  D0_RETURN_IF_ERROR(check_cuda_tensor(logits, "router_topk_softmax_cuda", "logits", {DType::f32}, {S, E}));
  if (E < 1 || E > kRouterMaxExperts)
    return make_error("router_topk_softmax_cuda: " + std::to_string(E) + " experts; this kernel takes 1 to " +
                      std::to_string(kRouterMaxExperts));
  if (k < 1 || k > kRouterMaxK || k > E)
    return make_error("router_topk_softmax_cuda: k = " + std::to_string(k) + " must be in [1, min(" +
                      std::to_string(kRouterMaxK) + ", E = " + std::to_string(E) + ")]");
  D0_RETURN_IF_ERROR(check_cuda_tensor(indices, "router_topk_softmax_cuda", "indices", {DType::i32}, {S, k}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(weights, "router_topk_softmax_cuda", "weights", {DType::f32}, {S, k}));
  if (S == 0) return Status::success();
  const std::int64_t blocks = (S + kWarpsPerBlock - 1) / kWarpsPerBlock;
  if (blocks > 2147483647) return make_error("router_topk_softmax_cuda: too many tokens for one grid");
  launch_dependent(router_topk_softmax_kernel, static_cast<unsigned>(blocks), 32 * kWarpsPerBlock, 0, stream,
                   logits.data<float>(), S, static_cast<int>(E), k, indices.data<std::int32_t>(),
                   weights.data<float>());
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("router_topk_softmax_kernel");
  return Status::success();
}

}  // namespace day0
