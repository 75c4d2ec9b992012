// MXFP4 -> BF16 decode on the GPU: one thread per packed byte (two outputs), scale read per group.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <string>

#include "quant/mxfp4.h"

namespace day0 {
namespace {

__constant__ float kFp4Values[16] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f,
                                     -0.f, -0.5f, -1.f, -1.5f, -2.f, -3.f, -4.f, -6.f};

__global__ void mxfp4_decode_bf16_kernel(const std::uint8_t* __restrict__ blocks,
                                         const std::uint8_t* __restrict__ scales, std::int64_t n_bytes,
                                         __nv_bfloat16* __restrict__ out) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n_bytes) return;
  const std::uint8_t byte = blocks[i];
  const int exponent = static_cast<int>(scales[i / kMxfp4GroupBytes]) - 127;
  // ldexpf is exact here: FP4 values have two significant bits and the result stays >= 2^-128.
  out[2 * i] = __float2bfloat16_rn(ldexpf(kFp4Values[byte & 0xF], exponent));
  out[2 * i + 1] = __float2bfloat16_rn(ldexpf(kFp4Values[byte >> 4], exponent));
}

Status cuda_status(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::success();
  return make_error(std::string(what) + ": " + cudaGetErrorString(err));
}

}  // namespace

Status mxfp4_decode_bf16_cuda(const std::uint8_t* blocks, const std::uint8_t* scales, std::int64_t rows,
                              std::int64_t n_in, std::uint16_t* out, void* stream) {
  if (rows < 0 || n_in < 0 || n_in % kMxfp4GroupSize != 0)
    return make_error("mxfp4_decode_bf16_cuda: n_in must be a non-negative multiple of 32 (got " +
                      std::to_string(n_in) + ")");
  const std::int64_t n_bytes = rows * n_in / 2;
  if (n_bytes == 0) return Status::success();
  if (!blocks || !scales || !out) return make_error("mxfp4_decode_bf16_cuda: null pointer");
  constexpr int kThreads = 256;
  const std::int64_t grid = (n_bytes + kThreads - 1) / kThreads;
  mxfp4_decode_bf16_kernel<<<static_cast<unsigned>(grid), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      blocks, scales, n_bytes, reinterpret_cast<__nv_bfloat16*>(out));
  return cuda_status(cudaGetLastError(), "mxfp4_decode_bf16_kernel launch");
}

bool cuda_device_available() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

}  // namespace day0
