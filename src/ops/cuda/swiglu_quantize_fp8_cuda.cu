// The FP8 MoE's middle in one pass per row: the gate_up GEMM's unit-scale output scaled and biased (the GEMM
// epilogue), clamped SwiGLU, and per-row E4M3 quantisation for the down GEMM. One block per row; the row is read
// twice (once for its amax, once to quantise) rather than written out as f32 and read back by two more kernels.
// Every value comes from the same helpers as the step-by-step kernels (fp8_moe_math.cuh): the same bits.
#include <cuda_bf16.h>

#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/fp8_moe_math.cuh"

namespace day0 {
namespace {

constexpr int kThreads = 256;

template <class B>
__device__ __forceinline__ float swiglu_at(const float* __restrict__ row, float sx, const float* __restrict__ sw,
                                           const B* __restrict__ bias, std::int64_t j, std::int64_t I,
                                           bool interleaved, float alpha, float limit) {
  const std::int64_t g = interleaved ? 2 * j : j, u = interleaved ? 2 * j + 1 : I + j;
  return swiglu_clamped_pair(fp8_moe::scaled_output(row[g], sx, sw[g], bias, g),
                             fp8_moe::scaled_output(row[u], sx, sw[u], bias, u), alpha, limit);
}

template <class B>
__global__ void swiglu_quantize_fp8_kernel(const float* __restrict__ gate_up, const float* __restrict__ sx,
                                           const float* __restrict__ sw, const B* __restrict__ bias, std::int64_t I,
                                           bool interleaved, float alpha, float limit, std::uint8_t* __restrict__ q,
                                           float* __restrict__ scales) {
  __shared__ float warp_max[kThreads / 32];
  const std::int64_t r = blockIdx.x;
  const float* row = gate_up + r * 2 * I;
  const float s = sx[r];
  float amax = 0.0f;
  for (std::int64_t j = threadIdx.x; j < I; j += kThreads)
    amax = fmaxf(amax, fabsf(swiglu_at(row, s, sw, bias, j, I, interleaved, alpha, limit)));
  amax = fp8_moe::block_max<kThreads>(amax, warp_max);
  const float scale = fp8_moe::row_scale(amax);
  if (threadIdx.x == 0) scales[r] = scale;
  std::uint8_t* qr = q + r * I;
  for (std::int64_t j = threadIdx.x; j < I; j += kThreads)
    qr[j] = fp8_moe::quantize(swiglu_at(row, s, sw, bias, j, I, interleaved, alpha, limit), scale);
}

}  // namespace

Status swiglu_quantize_fp8_cuda(const Tensor& gate_up, const Tensor& sx, const Tensor& sw, const Tensor& bias,
                                const SwigluParams& p, Tensor& q, Tensor& scales, cudaStream_t stream) {
  const char* op = "swiglu_quantize_fp8_cuda";
  if (gate_up.dim() != 2 || gate_up.size(1) % 2 != 0)
    return make_error(std::string(op) + ": gate_up must be [n, 2I], got " + shape_to_string(gate_up.shape()));
  const std::int64_t n = gate_up.size(0), I = gate_up.size(1) / 2;
  D0_RETURN_IF_ERROR(check_cuda_tensor(gate_up, op, "gate_up", {DType::f32}, {n, 2 * I}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(sx, op, "sx", {DType::f32}, {n}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(sw, op, "sw", {DType::f32}, {2 * I}));
  const bool has_bias = has_values(bias);
  if (has_bias) D0_RETURN_IF_ERROR(check_cuda_tensor(bias, op, "bias", {DType::f32, DType::bf16}, {2 * I}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(q, op, "q", {DType::f8_e4m3}, {n, I}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(scales, op, "scales", {DType::f32}, {n}));
  if (n == 0 || I == 0) return Status::success();
  if (n > 2147483647) return make_error(std::string(op) + ": more than 2^31 rows in one launch");
  const unsigned blocks = static_cast<unsigned>(n);
  auto* out = static_cast<std::uint8_t*>(q.raw());
  if (has_bias && bias.dtype() == DType::bf16)
    swiglu_quantize_fp8_kernel<__nv_bfloat16><<<blocks, kThreads, 0, stream>>>(
        gate_up.data<float>(), sx.data<float>(), sw.data<float>(), static_cast<const __nv_bfloat16*>(bias.raw()), I,
        p.interleaved, p.alpha, p.limit, out, scales.data<float>());
  else
    swiglu_quantize_fp8_kernel<float><<<blocks, kThreads, 0, stream>>>(
        gate_up.data<float>(), sx.data<float>(), sw.data<float>(), has_bias ? bias.data<float>() : nullptr, I,
        p.interleaved, p.alpha, p.limit, out, scales.data<float>());
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("swiglu_quantize_fp8_kernel");
  return Status::success();
}

}  // namespace day0
