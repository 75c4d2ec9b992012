// Online MXFP4 -> BF16 of the selected experts into a reused workspace (issue 3): grid (groups, selected);
// each thread decodes one 32-value group (16 packed bytes, one scale) with the decode math of
// quant/mxfp4_cuda.cu (E2M1 table * 2^(scale - 127) via an exact ldexpf), so results are bit-exact.
#include <cuda_bf16.h>

#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/cuda_status.h"
#include "quant/mxfp4.h"
#include "quant/mxfp4_tiles.h"

namespace day0 {
namespace {

// The same table as quant/mxfp4_cuda.cu (its copy is file-local there).
__constant__ float kFp4Values[16] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f,
                                     -0.f, -0.5f, -1.f, -1.5f, -2.f, -3.f, -4.f, -6.f};

__device__ __forceinline__ __nv_bfloat162 decode_byte(std::uint32_t byte, int exponent) {
  // ldexpf is exact here: FP4 values have two significant bits and the result stays >= 2^-128.
  return __halves2bfloat162(__float2bfloat16_rn(ldexpf(kFp4Values[byte & 0xF], exponent)),
                            __float2bfloat16_rn(ldexpf(kFp4Values[(byte >> 4) & 0xF], exponent)));
}

// tiled: blocks in quant/mxfp4_tiles.h's order (the scales row-major either way).
__global__ void mxfp4_experts_to_bf16_kernel(const uint4* __restrict__ blocks, const std::uint8_t* __restrict__ scales,
                                             const std::int32_t* __restrict__ expert_ids, int n_experts,
                                             std::int64_t groups_per_expert, int groups, bool tiled,
                                             uint4* __restrict__ workspace, std::int32_t* error_flag) {
  const std::int64_t g = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (g >= groups_per_expert) return;
  int e = expert_ids[blockIdx.y];
  if (e < 0 || e >= n_experts) {
    if (g == 0) *error_flag = 1;
    e = e < 0 ? 0 : n_experts - 1;
  }
  const std::int64_t src = static_cast<std::int64_t>(e) * groups_per_expert + g;
  const uint4 packed = blocks[tiled ? mxfp4_tiled_unit(src / groups, src % groups, groups) : src];  // 32 values
  const int exponent = static_cast<int>(scales[src]) - 127;
  // 32 bf16 = 64 bytes = four 16-byte stores.
  uint4* dst = workspace + (static_cast<std::int64_t>(blockIdx.y) * groups_per_expert + g) * 4;
  const std::uint32_t words[4] = {packed.x, packed.y, packed.z, packed.w};
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    // Word q holds bytes 4q..4q+3 (little-endian): values 8q..8q+7, each byte's low nibble first.
    __nv_bfloat162 out[4];
#pragma unroll
    for (int b = 0; b < 4; ++b) out[b] = decode_byte(words[q] >> (8 * b), exponent);
    dst[q] = *reinterpret_cast<const uint4*>(out);
  }
}

}  // namespace

Status mxfp4_experts_to_bf16_cuda(const ExpertWeights& w, const Tensor& expert_ids, Tensor& workspace,
                                  Tensor& error_flag, cudaStream_t stream) {
  const char* op = "mxfp4_experts_to_bf16_cuda";
  D0_ASSIGN_OR_RETURN(const std::int64_t n, check_mxfp4_selection(w, expert_ids, op));
  const std::int64_t groups = w.in / kMxfp4GroupSize;
  D0_RETURN_IF_ERROR(check_cuda_tensor(workspace, op, "workspace", {DType::bf16}, {n, w.out, w.in}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(error_flag, op, "error_flag", {DType::i32}, {1}));
  if (!aligned_to(w.blocks.raw(), 16) || !aligned_to(workspace.raw(), 16))
    return make_error(std::string(op) + ": blocks and workspace must be 16-byte aligned (one group per 16-byte load)");
  if (n == 0) return Status::success();
  if (n > 65535) return make_error(std::string(op) + ": at most 65535 selected experts per launch");
  constexpr int kThreads = 256;
  const std::int64_t groups_per_expert = std::int64_t(w.out) * groups;
  const std::int64_t grid_x = (groups_per_expert + kThreads - 1) / kThreads;
  if (grid_x > 2147483647) return make_error(std::string(op) + ": expert matrix too large for one grid");
  const dim3 grid(static_cast<unsigned>(grid_x), static_cast<unsigned>(n));
  mxfp4_experts_to_bf16_kernel<<<grid, kThreads, 0, stream>>>(
      static_cast<const uint4*>(w.blocks.raw()), w.scales.data<std::uint8_t>(), expert_ids.data<std::int32_t>(),
      w.n_experts, groups_per_expert, static_cast<int>(groups), w.storage == ExpertStorage::mxfp4_tiled,
      static_cast<uint4*>(workspace.raw()), error_flag.data<std::int32_t>());
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("mxfp4_experts_to_bf16_kernel");
  return Status::success();
}

}  // namespace day0
