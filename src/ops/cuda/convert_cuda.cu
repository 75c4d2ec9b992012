// f32 -> bf16 conversion on the GPU (the GEMM's input cast): 4 elements per thread with 16-byte loads
// when aligned, a scalar tail otherwise; round to nearest even, as f32_to_bf16 on the host.
#include <cuda_bf16.h>

#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/dependent_launch.h"

namespace day0 {
namespace {

__global__ void convert_f32_to_bf16_x4_kernel(const float4* in, std::int64_t n4, __nv_bfloat162* __restrict__ out) {
  begin_dependent_grid();
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n4;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float4 v = in[i];
    out[2 * i] = __floats2bfloat162_rn(v.x, v.y);
    out[2 * i + 1] = __floats2bfloat162_rn(v.z, v.w);
  }
}

__global__ void convert_f32_to_bf16_kernel(const float* in, std::int64_t begin, std::int64_t n,
                                           __nv_bfloat16* __restrict__ out) {
  begin_dependent_grid();
  for (std::int64_t i = begin + static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    out[i] = __float2bfloat16_rn(in[i]);
}

}  // namespace

Status convert_f32_to_bf16_cuda(const Tensor& in, Tensor& out, cudaStream_t stream) {
  D0_RETURN_IF_ERROR(check_cuda_tensor(in, "convert_f32_to_bf16_cuda", "in", {DType::f32}, in.shape()));
  D0_RETURN_IF_ERROR(check_cuda_tensor(out, "convert_f32_to_bf16_cuda", "out", {DType::bf16}, in.shape()));
  const std::int64_t n = in.numel();
  if (n == 0) return Status::success();
  constexpr int kThreads = 256;
  // A grid-stride loop capped at 64K blocks: plenty to fill 132 SMs, and no grid-size overflow.
  auto blocks_for = [](std::int64_t work) {
    return static_cast<unsigned>(std::min<std::int64_t>((work + kThreads - 1) / kThreads, 65536));
  };
  std::int64_t done = 0;
  if (aligned_to(in.raw(), 16) && aligned_to(out.raw(), 8)) {
    const std::int64_t n4 = n / 4;
    if (n4 > 0) {
      launch_dependent(convert_f32_to_bf16_x4_kernel, blocks_for(n4), kThreads, 0, stream,
                       static_cast<const float4*>(in.raw()), n4, static_cast<__nv_bfloat162*>(out.raw()));
      D0_CUDA_RETURN_IF_LAUNCH_ERROR("convert_f32_to_bf16_x4_kernel");
    }
    done = n4 * 4;
  }
  if (done < n) {
    launch_dependent(convert_f32_to_bf16_kernel, blocks_for(n - done), kThreads, 0, stream, in.data<float>(), done, n,
                     static_cast<__nv_bfloat16*>(out.raw()));
    D0_CUDA_RETURN_IF_LAUNCH_ERROR("convert_f32_to_bf16_kernel");
  }
  return Status::success();
}

}  // namespace day0
