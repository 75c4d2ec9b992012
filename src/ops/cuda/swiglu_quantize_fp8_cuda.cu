// The FP8 MoE's middle in one pass per row: the gate_up GEMM's unit-scale output scaled and biased (the GEMM
// epilogue), clamped SwiGLU, and per-row E4M3 quantisation for the down GEMM. One block per row; the row is read
// twice (once for its amax, once to quantise) rather than written out as f32 and read back by two more kernels.
// Every value comes from the same helpers as the step-by-step kernels (fp8_moe_math.cuh): the same bits.
// gather_swiglu_quantize_fp8_cuda: the same SwiGLU and quantisation on rows already scaled (the grouped GEMMs'
// plain epilogue), gathered by a row list.
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

constexpr int kVecPerThread = 4;                           // groups of 4 outputs a thread holds
constexpr int kVecOutputs = 4 * kVecPerThread * kThreads;  // 4,096

// Row r of the output from row rows[r] (or r) of gate_up: every SwiGLU value held in registers (4 a float4, from
// two float4s of interleaved pairs or one of each half), then quantised as gather_quantize_fp8_vec_kernel's rows
// (fp8_moe::quantize_held_row). A row id outside [0, n_src) is clamped and raises the flag. All of a thread's
// loads are issued before any SwiGLU: the division's slow-path call in between would hold the next ones back.
__global__ void gather_swiglu_quantize_fp8_kernel(const float* __restrict__ gate_up, const std::int32_t* __restrict__ rows,
                                                  std::int64_t n_src, std::int64_t I, bool interleaved, float alpha,
                                                  float limit, std::uint8_t* __restrict__ q,
                                                  float* __restrict__ scales, std::int32_t* error_flag) {
  __shared__ float warp_max[kThreads / 32];
  const std::int64_t r = blockIdx.x;
  const std::int64_t src = fp8_moe::gathered_row(rows, n_src, r, error_flag);
  const float4* row = reinterpret_cast<const float4*>(gate_up + src * 2 * I);
  const int n4 = static_cast<int>(I / 4);
  float4 a[kVecPerThread], b[kVecPerThread];  // interleaved: two float4s of pairs; else the gate and up float4s
#pragma unroll
  for (int i = 0; i < kVecPerThread; ++i) {
    const int c = static_cast<int>(threadIdx.x) + i * kThreads;
    a[i] = b[i] = make_float4(0.f, 0.f, 0.f, 0.f);
    if (c < n4) {
      a[i] = interleaved ? row[2 * c] : row[c];
      b[i] = interleaved ? row[2 * c + 1] : row[n4 + c];
    }
  }
  float4 h[kVecPerThread];
#pragma unroll
  for (int i = 0; i < kVecPerThread; ++i) {
    const int c = static_cast<int>(threadIdx.x) + i * kThreads;
    h[i] = make_float4(0.f, 0.f, 0.f, 0.f);
    if (c < n4) {
      const float4 g = interleaved ? make_float4(a[i].x, a[i].z, b[i].x, b[i].z) : a[i];
      const float4 u = interleaved ? make_float4(a[i].y, a[i].w, b[i].y, b[i].w) : b[i];
      h[i] = make_float4(swiglu_clamped_pair(g.x, u.x, alpha, limit), swiglu_clamped_pair(g.y, u.y, alpha, limit),
                         swiglu_clamped_pair(g.z, u.z, alpha, limit), swiglu_clamped_pair(g.w, u.w, alpha, limit));
    }
  }
  fp8_moe::quantize_held_row<kThreads>(h, n4, warp_max, q + r * I, scales + r);
}

}  // namespace

Status gather_swiglu_quantize_fp8_cuda(const Tensor& gate_up, const Tensor& rows, const SwigluParams& p, Tensor& q,
                                       Tensor& scales, Tensor& error_flag, cudaStream_t stream) {
  const char* op = "gather_swiglu_quantize_fp8_cuda";
  if (gate_up.dim() != 2 || gate_up.size(1) % 2 != 0)
    return make_error(std::string(op) + ": gate_up must be [S, 2I], got " + shape_to_string(gate_up.shape()));
  const std::int64_t S = gate_up.size(0), I = gate_up.size(1) / 2;
  const bool gather = rows.defined() && rows.dim() > 0;
  if (gather && rows.dim() != 1) return make_error(std::string(op) + ": rows must be 1-D");
  const std::int64_t n = gather ? rows.size(0) : S;
  D0_RETURN_IF_ERROR(check_cuda_tensor(gate_up, op, "gate_up", {DType::f32}, {S, 2 * I}));
  if (gather) D0_RETURN_IF_ERROR(check_cuda_tensor(rows, op, "rows", {DType::i32}, {n}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(q, op, "q", {DType::f8_e4m3}, {n, I}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(scales, op, "scales", {DType::f32}, {n}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(error_flag, op, "error_flag", {DType::i32}, {1}));
  if (I % 4 != 0 || I > kVecOutputs || !aligned_to(gate_up.raw(), 16) || !aligned_to(q.raw(), 4))
    return make_error(std::string(op) + ": needs I a multiple of 4 up to " + std::to_string(kVecOutputs) +
                      " and 16-byte aligned rows, got I " + std::to_string(I));
  if (n == 0 || I == 0) return Status::success();
  if (S == 0) return make_error(std::string(op) + ": rows to gather from an empty gate_up");
  if (n > 2147483647) return make_error(std::string(op) + ": more than 2^31 rows in one launch");
  gather_swiglu_quantize_fp8_kernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(
      gate_up.data<float>(), gather ? rows.data<std::int32_t>() : nullptr, S, I, p.interleaved, p.alpha, p.limit,
      static_cast<std::uint8_t*>(q.raw()), scales.data<float>(), error_flag.data<std::int32_t>());
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("gather_swiglu_quantize_fp8_kernel");
  return Status::success();
}

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
