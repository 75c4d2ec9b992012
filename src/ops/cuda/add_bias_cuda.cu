// Element-wise adds on the GPU: y[m, n] += bias[n] for the dtype pairs cuBLASLt's bias epilogue does not take
// (e.g. bf16 bias into an f32 output), and x += y in f32. One thread per element in a grid-stride loop.
#include <cuda_bf16.h>

#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/dependent_launch.h"

namespace day0 {
namespace {

__device__ __forceinline__ float widen(float v) { return v; }
__device__ __forceinline__ float widen(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ void narrow(float v, float* out) { *out = v; }
__device__ __forceinline__ void narrow(float v, __nv_bfloat16* out) { *out = __float2bfloat16_rn(v); }

template <class Y, class B>
__global__ void add_bias_kernel(Y* __restrict__ y, const B* __restrict__ bias, std::int64_t M, std::int64_t N) {
  begin_dependent_grid();
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < M * N;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    narrow(widen(y[i]) + widen(bias[i % N]), &y[i]);
}

template <class Y, class B>
Status launch(Tensor& y, const Tensor& bias, std::int64_t M, std::int64_t N, cudaStream_t stream) {
  constexpr int kThreads = 256;
  const unsigned blocks = static_cast<unsigned>(std::min<std::int64_t>((M * N + kThreads - 1) / kThreads, 65536));
  launch_dependent(add_bias_kernel<Y, B>, blocks, kThreads, 0, stream, static_cast<Y*>(y.raw()),
                   static_cast<const B*>(bias.raw()), M, N);
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("add_bias_kernel");
  return Status::success();
}

__global__ void add_inplace_kernel(float* __restrict__ x, const float* y, std::int64_t n) {
  begin_dependent_grid();
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    x[i] += y[i];
}

}  // namespace

Status add_inplace_cuda(Tensor& x, const Tensor& y, cudaStream_t stream) {
  D0_RETURN_IF_ERROR(check_cuda_tensor(x, "add_inplace_cuda", "x", {DType::f32}, x.shape()));
  D0_RETURN_IF_ERROR(check_cuda_tensor(y, "add_inplace_cuda", "y", {DType::f32}, x.shape()));
  const std::int64_t n = x.numel();
  if (n == 0) return Status::success();
  constexpr int kThreads = 256;
  const unsigned blocks = static_cast<unsigned>(std::min<std::int64_t>((n + kThreads - 1) / kThreads, 65536));
  launch_dependent(add_inplace_kernel, blocks, kThreads, 0, stream, static_cast<float*>(x.raw()),
                   static_cast<const float*>(y.raw()), n);
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("add_inplace_kernel");
  return Status::success();
}

Status add_bias_cuda(Tensor& y, const Tensor& bias, cudaStream_t stream) {
  if (y.dim() != 2) return make_error("add_bias_cuda: y must be 2-D, got " + shape_to_string(y.shape()));
  const std::int64_t M = y.size(0), N = y.size(1);
  D0_RETURN_IF_ERROR(check_cuda_tensor(y, "add_bias_cuda", "y", {DType::f32, DType::bf16}, {M, N}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(bias, "add_bias_cuda", "bias", {DType::f32, DType::bf16}, {N}));
  if (M * N == 0) return Status::success();
  const bool y32 = y.dtype() == DType::f32, b32 = bias.dtype() == DType::f32;
  if (y32 && b32) return launch<float, float>(y, bias, M, N, stream);
  if (y32) return launch<float, __nv_bfloat16>(y, bias, M, N, stream);
  if (b32) return launch<__nv_bfloat16, float>(y, bias, M, N, stream);
  return launch<__nv_bfloat16, __nv_bfloat16>(y, bias, M, N, stream);
}

}  // namespace day0
