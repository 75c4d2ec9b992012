// The FP8 GEMM's own epilogue (GemmFp8's `epilogue` scaling): y[m, n] = y[m, n] * sx[m] * sw[n] (+ bias[n]) in
// f32, one element per thread in a grid-stride loop, after a cuBLASLt FP8 matmul with unit scales.
#include <cuda_bf16.h>

#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/fp8_moe_math.cuh"

namespace day0 {
namespace {

template <class B>
__global__ void fp8_gemm_epilogue_kernel(float* __restrict__ y, const float* __restrict__ sx,
                                         const float* __restrict__ sw, const B* __restrict__ bias, std::int64_t M,
                                         std::int64_t N) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < M * N;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t m = i / N, n = i % N;
    y[i] = fp8_moe::scaled_output(y[i], sx[m], sw[n], bias, n);
  }
}

}  // namespace

Status fp8_gemm_epilogue_cuda(Tensor& y, const Tensor& sx, const Tensor& sw, const Tensor& bias, cudaStream_t stream) {
  const char* op = "fp8_gemm_epilogue_cuda";
  if (y.dim() != 2) return make_error(std::string(op) + ": y must be 2-D, got " + shape_to_string(y.shape()));
  const std::int64_t M = y.size(0), N = y.size(1);
  D0_RETURN_IF_ERROR(check_cuda_tensor(y, op, "y", {DType::f32}, {M, N}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(sx, op, "sx", {DType::f32}, {M}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(sw, op, "sw", {DType::f32}, {N}));
  const bool has_bias = has_values(bias);
  if (has_bias) D0_RETURN_IF_ERROR(check_cuda_tensor(bias, op, "bias", {DType::f32, DType::bf16}, {N}));
  if (M * N == 0) return Status::success();
  constexpr int kThreads = 256;
  const unsigned blocks = static_cast<unsigned>(std::min<std::int64_t>((M * N + kThreads - 1) / kThreads, 65536));
  if (has_bias && bias.dtype() == DType::bf16)
    fp8_gemm_epilogue_kernel<__nv_bfloat16><<<blocks, kThreads, 0, stream>>>(
        y.data<float>(), sx.data<float>(), sw.data<float>(), static_cast<const __nv_bfloat16*>(bias.raw()), M, N);
  else
    fp8_gemm_epilogue_kernel<float><<<blocks, kThreads, 0, stream>>>(
        y.data<float>(), sx.data<float>(), sw.data<float>(), has_bias ? bias.data<float>() : nullptr, M, N);
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("fp8_gemm_epilogue_kernel");
  return Status::success();
}

}  // namespace day0
