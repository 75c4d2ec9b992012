// RoPE on the GPU, in place: one block per token; thread (i, head group) computes the angle's cos and sin
// once and rotates lane pairs (i, i + half) of its heads. Arithmetic mirrors CpuOps::rope exactly.
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/cuda_status.h"

namespace day0 {
namespace {

__global__ void rope_kernel(float* __restrict__ x, const std::int32_t* __restrict__ positions,
                            const float* __restrict__ inv_freq, int n_heads, int head_dim, int half,
                            float attention_factor) {
  const int heads_per_pass = blockDim.x / half;
  const int i = threadIdx.x % half, first_head = threadIdx.x / half;
  if (first_head >= heads_per_pass) return;  // the ragged end of the block when blockDim % half != 0
  const float pos = static_cast<float>(positions[blockIdx.x]);
  // The CPU reference forms the angle in f32 and takes cos/sin in double: do the same so both agree to the bit
  // (H200's fp64 rate makes this cheap next to the memory traffic).
  const float angle = pos * inv_freq[i];
  const float c = static_cast<float>(cos(static_cast<double>(angle))) * attention_factor;
  const float sn = static_cast<float>(sin(static_cast<double>(angle))) * attention_factor;
  float* row = x + static_cast<std::int64_t>(blockIdx.x) * n_heads * head_dim;
  for (int h = first_head; h < n_heads; h += heads_per_pass) {
    float* v = row + h * head_dim;
    const float a = v[i], b = v[i + half];
    // __fmul_rn/__fadd_rn keep nvcc from contracting into FMAs, which the host reference does not use.
    v[i] = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, sn));
    v[i + half] = __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, sn));
  }
}

}  // namespace

Status rope_cuda(Tensor& x, int n_heads, int head_dim, const Tensor& positions, const Tensor& inv_freq,
                 float attention_factor, cudaStream_t stream) {
  if (n_heads <= 0 || head_dim <= 0) return make_error("rope_cuda: n_heads and head_dim must be positive");
  if (x.dim() != 2) return make_error("rope_cuda: x must be 2-D, got " + shape_to_string(x.shape()));
  const std::int64_t S = x.size(0);
  D0_RETURN_IF_ERROR(check_cuda_tensor(x, "rope_cuda", "x", {DType::f32}, {S, std::int64_t(n_heads) * head_dim}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(positions, "rope_cuda", "positions", {DType::i32}, {S}));
  if (inv_freq.dim() != 1) return make_error("rope_cuda: inv_freq must be 1-D");
  const std::int64_t half = inv_freq.size(0);
  D0_RETURN_IF_ERROR(check_cuda_tensor(inv_freq, "rope_cuda", "inv_freq", {DType::f32}, {half}));
  if (2 * half > head_dim)
    return make_error("rope_cuda: rotary dim " + std::to_string(2 * half) + " exceeds head_dim " +
                      std::to_string(head_dim));
  if (half > 1024) return make_error("rope_cuda: rotary dim above 2048 is not supported");
  if (S == 0 || half == 0) return Status::success();
  if (S > 2147483647) return make_error("rope_cuda: too many tokens for one grid");
  // At least `half` threads; up to 256, a whole number of heads per pass.
  const int h = static_cast<int>(half);
  const int heads_per_pass = std::max(1, std::min(n_heads, 256 / h));
  const int threads = h * heads_per_pass;
  rope_kernel<<<static_cast<unsigned>(S), threads, 0, stream>>>(x.data<float>(), positions.data<std::int32_t>(),
                                                                inv_freq.data<float>(), n_heads, head_dim, h,
                                                                attention_factor);
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("rope_kernel");
  return Status::success();
}

}  // namespace day0
