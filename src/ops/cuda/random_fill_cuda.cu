// fill_uniform_cuda: splitmix64 of (seed, index) -> 24 random bits -> [-1, 1) -> scaled, rounded to the dtype.
#include "ops/cuda/random_fill_cuda.h"

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>

#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_status.h"

namespace day0 {
namespace {

__device__ __forceinline__ float uniform(std::uint64_t seed, std::uint64_t i) {
  std::uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }
__device__ __forceinline__ void store(__nv_fp8_e4m3* p, float v) { *p = __nv_fp8_e4m3(v); }

template <class T>
__global__ void fill_uniform_kernel(T* __restrict__ out, std::int64_t n, std::uint64_t seed, float scale) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    store(out + i, scale * uniform(seed, static_cast<std::uint64_t>(i)));
}

}  // namespace

Status fill_uniform_cuda(Tensor& t, std::uint64_t seed, float scale, cudaStream_t stream) {
  D0_RETURN_IF_ERROR(
      check_cuda_tensor(t, "fill_uniform_cuda", "t", {DType::f32, DType::bf16, DType::f8_e4m3}, t.shape()));
  const std::int64_t n = t.numel();
  if (n == 0) return Status::success();
  constexpr int kThreads = 256;
  const unsigned blocks = static_cast<unsigned>(std::min<std::int64_t>((n + kThreads - 1) / kThreads, 65536));
  if (t.dtype() == DType::f32)
    fill_uniform_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<float*>(t.raw()), n, seed, scale);
  else if (t.dtype() == DType::bf16)
    fill_uniform_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(t.raw()), n, seed, scale);
  else
    fill_uniform_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<__nv_fp8_e4m3*>(t.raw()), n, seed, scale);
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("fill_uniform_kernel");
  return Status::success();
}

}  // namespace day0
