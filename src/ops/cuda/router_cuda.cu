// Router top-k + softmax on the GPU: one warp per token (router_topk.cuh).
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/dependent_launch.h"
#include "ops/cuda/router_topk.cuh"

namespace day0 {
namespace {

constexpr int kWarpsPerBlock = 4;

__global__ void router_topk_softmax_kernel(const float* logits, std::int64_t S, int E, int k,
                                           std::int32_t* __restrict__ indices, float* __restrict__ weights) {
  begin_dependent_grid();
  const std::int64_t s = static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (s >= S) return;  // whole warps leave together, so the shuffles stay full-warp
  router_topk_softmax_warp(logits + s * E, E, k, indices + s * k, weights + s * k);
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
