// Router top-k + softmax on the GPU: one warp per token. Each lane holds E/32 (<= 8) logits in registers;
// k rounds of a warp arg-max (ties to the lower expert index, as the CPU's stable sort) pick the experts,
// then lane 0 takes the softmax over the k picks in pick order, as CpuOps::router_topk_softmax. The fused form
// computes the router's logits first in the same block (decode: one launch instead of two).
#include <cuda_bf16.h>

#include <string>

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

// The warp's top-k + softmax of one token's E logits at row (global or shared memory): every lane calls it;
// lane 0 writes the k indices and weights.
__device__ __forceinline__ void topk_softmax_warp(const float* row, int E, int k, std::int32_t* __restrict__ indices,
                                                  float* __restrict__ weights) {
  const int lane = threadIdx.x % 32;
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
      indices[r] = picked_i[r];
      weights[r] = expf(picked_v[r] - top) / denom;
    }
}

__global__ void router_topk_softmax_kernel(const float* __restrict__ logits, std::int64_t S, int E, int k,
                                           std::int32_t* __restrict__ indices, float* __restrict__ weights) {
  begin_dependent_grid();
  const std::int64_t s = static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (s >= S) return;  // whole warps leave together, so the shuffles stay full-warp
  topk_softmax_warp(logits + s * E, E, k, indices + s * k, weights + s * k);
}

enum BiasKind : int { kNoBias = 0, kBiasF32 = 1, kBiasBf16 = 2 };

// One block per token, warp e computes logit e: x (f32) . w[e] (bf16 widened to f32), f32 sums (lane-strided,
// then a shuffle tree), plus the bias; the logits go to shared memory (and out), then warp 0 picks the top k.
__global__ void __launch_bounds__(kRouterFusedMaxExperts * 32)
    router_fused_kernel(const float* __restrict__ x, const __nv_bfloat16* __restrict__ w, const void* __restrict__ bias,
                        int bias_kind, int K, int E, int k, float* __restrict__ logits,
                        std::int32_t* __restrict__ indices, float* __restrict__ weights) {
  __shared__ float row[kRouterFusedMaxExperts];
  const std::int64_t s = blockIdx.x;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  begin_dependent_grid();
  if (warp < E) {
    const uint4* wr = reinterpret_cast<const uint4*>(w + static_cast<std::int64_t>(warp) * K);
    const float4* xr = reinterpret_cast<const float4*>(x + s * K);
    float acc = 0.f;
#pragma unroll 4
    for (int c = lane; c < K / 8; c += 32) {  // 8 values: one 16-byte load of w, two of x
      const uint4 wv = __ldg(wr + c);
      const float4 x0 = xr[2 * c], x1 = xr[2 * c + 1];
      const __nv_bfloat162* wp = reinterpret_cast<const __nv_bfloat162*>(&wv);
      const float2 w0 = __bfloat1622float2(wp[0]), w1 = __bfloat1622float2(wp[1]);
      const float2 w2 = __bfloat1622float2(wp[2]), w3 = __bfloat1622float2(wp[3]);
      acc += x0.x * w0.x;
      acc += x0.y * w0.y;
      acc += x0.z * w1.x;
      acc += x0.w * w1.y;
      acc += x1.x * w2.x;
      acc += x1.y * w2.y;
      acc += x1.z * w3.x;
      acc += x1.w * w3.y;
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) {
      float b = 0.f;
      if (bias_kind == kBiasF32) b = static_cast<const float*>(bias)[warp];
      if (bias_kind == kBiasBf16) b = __bfloat162float(static_cast<const __nv_bfloat16*>(bias)[warp]);
      row[warp] = acc + b;
      logits[s * E + warp] = acc + b;
    }
  }
  __syncthreads();
  if (warp == 0) topk_softmax_warp(row, E, k, indices + s * k, weights + s * k);
}

// The checks both launchers share: logits f32 [S, E] with E <= max_experts, k in range, indices and weights [S, k].
Status check_topk_args(const char* op, const Tensor& logits, int k, const Tensor& indices, const Tensor& weights,
                       int max_experts) {
  if (logits.dim() != 2)
    return make_error(std::string(op) + ": logits must be 2-D, got " + shape_to_string(logits.shape()));
  const std::int64_t S = logits.size(0), E = logits.size(1);
  D0_RETURN_IF_ERROR(check_cuda_tensor(logits, op, "logits", {DType::f32}, {S, E}));
  if (E < 1 || E > max_experts)
    return make_error(std::string(op) + ": " + std::to_string(E) + " experts; this kernel takes 1 to " +
                      std::to_string(max_experts));
  if (k < 1 || k > kRouterMaxK || k > E)
    return make_error(std::string(op) + ": k = " + std::to_string(k) + " must be in [1, min(" +
                      std::to_string(kRouterMaxK) + ", E = " + std::to_string(E) + ")]");
  D0_RETURN_IF_ERROR(check_cuda_tensor(indices, op, "indices", {DType::i32}, {S, k}));
  return check_cuda_tensor(weights, op, "weights", {DType::f32}, {S, k});
}

}  // namespace

Status router_topk_softmax_cuda(const Tensor& logits, int k, Tensor& indices, Tensor& weights, cudaStream_t stream) {
  D0_RETURN_IF_ERROR(check_topk_args("router_topk_softmax_cuda", logits, k, indices, weights, kRouterMaxExperts));
  const std::int64_t S = logits.size(0), E = logits.size(1);
  if (S == 0) return Status::success();
  const std::int64_t blocks = (S + kWarpsPerBlock - 1) / kWarpsPerBlock;
  if (blocks > 2147483647) return make_error("router_topk_softmax_cuda: too many tokens for one grid");
  launch_dependent(router_topk_softmax_kernel, static_cast<unsigned>(blocks), 32 * kWarpsPerBlock, 0, stream,
                   logits.data<float>(), S, static_cast<int>(E), k, indices.data<std::int32_t>(),
                   weights.data<float>());
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("router_topk_softmax_kernel");
  return Status::success();
}

bool router_fused_fits(const Tensor& x, const Tensor& w, std::int64_t max_tokens) {
  return x.dim() == 2 && w.dim() == 2 && x.size(0) <= max_tokens && w.dtype() == DType::bf16 &&
         w.size(0) <= kRouterFusedMaxExperts && x.size(1) == w.size(1) && x.size(1) % 8 == 0 &&
         aligned_to(x.raw(), 16) && aligned_to(w.raw(), 16);
}

Status router_fused_cuda(const Tensor& x, const Tensor& w, const Tensor& bias, int k, Tensor& logits, Tensor& indices,
                         Tensor& weights, cudaStream_t stream) {
  const char* op = "router_fused_cuda";
  D0_RETURN_IF_ERROR(check_topk_args(op, logits, k, indices, weights, kRouterFusedMaxExperts));
  const std::int64_t S = logits.size(0), E = logits.size(1);
  if (x.dim() != 2 || x.size(1) % 8 != 0)
    return make_error(std::string(op) + ": x must be f32 [S, K] with K % 8 == 0, got " + shape_to_string(x.shape()));
  const std::int64_t K = x.size(1);
  D0_RETURN_IF_ERROR(check_cuda_tensor(x, op, "x", {DType::f32}, {S, K}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(w, op, "weight", {DType::bf16}, {E, K}));
  if (!aligned_to(x.raw(), 16) || !aligned_to(w.raw(), 16))
    return make_error(std::string(op) + ": x and the weight must be 16-byte aligned");
  int bias_kind = kNoBias;
  if (has_values(bias)) {
    D0_RETURN_IF_ERROR(check_cuda_tensor(bias, op, "bias", {DType::f32, DType::bf16}, {E}));
    bias_kind = bias.dtype() == DType::f32 ? kBiasF32 : kBiasBf16;
  }
  if (S == 0) return Status::success();
  if (S > 2147483647 || K > 2147483647) return make_error(std::string(op) + ": too many tokens or features");
  launch_dependent(router_fused_kernel, static_cast<unsigned>(S), kRouterFusedMaxExperts * 32, 0, stream,
                   x.data<float>(), static_cast<const __nv_bfloat16*>(w.raw()),
                   bias_kind == kNoBias ? nullptr : bias.raw(), bias_kind, static_cast<int>(K), static_cast<int>(E), k,
                   logits.data<float>(), indices.data<std::int32_t>(), weights.data<float>());
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("router_fused_kernel");
  return Status::success();
}

}  // namespace day0
