// Clamped SwiGLU on the GPU (gpt-oss): elementwise over [n, I], one output per thread in a grid-stride loop;
// the same expression order as CpuOps::swiglu_clamped.
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/swiglu_math.cuh"

namespace day0 {
namespace {

__global__ void swiglu_clamped_kernel(const float* __restrict__ gate_up, std::int64_t n, std::int64_t I, float alpha,
                                      float limit, bool interleaved, float* __restrict__ out) {
  const std::int64_t total = n * I;
  for (std::int64_t idx = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t s = idx / I, j = idx % I;
    const float* gu = gate_up + s * 2 * I;
    const float gate = interleaved ? gu[2 * j] : gu[j];
    const float up = interleaved ? gu[2 * j + 1] : gu[I + j];
    out[idx] = swiglu_clamped_pair(gate, up, alpha, limit);
  }
}

}  // namespace

Status swiglu_clamped_cuda(const Tensor& gate_up, const SwigluParams& p, Tensor& out, cudaStream_t stream) {
  if (gate_up.dim() != 2 || gate_up.size(1) % 2 != 0)
    return make_error("swiglu_clamped_cuda: gate_up must be [n, 2I], got " + shape_to_string(gate_up.shape()));
  const std::int64_t n = gate_up.size(0), I = gate_up.size(1) / 2;
  D0_RETURN_IF_ERROR(check_cuda_tensor(gate_up, "swiglu_clamped_cuda", "gate_up", {DType::f32}, {n, 2 * I}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(out, "swiglu_clamped_cuda", "out", {DType::f32}, {n, I}));
  if (n * I == 0) return Status::success();
  constexpr int kThreads = 256;
  const unsigned blocks = static_cast<unsigned>(std::min<std::int64_t>((n * I + kThreads - 1) / kThreads, 65536));
  swiglu_clamped_kernel<<<blocks, kThreads, 0, stream>>>(gate_up.data<float>(), n, I, p.alpha, p.limit,
                                                        p.interleaved, out.data<float>());
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("swiglu_clamped_kernel");
  return Status::success();
}

}  // namespace day0
