// Online MXFP4 -> FP8 E4M3 of the selected experts, one power-of-two scale per output row (the rule of
// quant/fp8_experts.h): grid (row blocks, selected); one warp per row. Pass 1 takes the row's largest non-zero
// block exponent (a warp max); pass 2 converts each 32-value group through an 8-entry code table built with the
// CPU's rounding (quant/mxfp4_to_fp8_table.h, tested on the CPU), so the bytes equal mxfp4_row_to_fp8's. The
// tables of all 21 distinct shifts are built per block into shared memory; lookups go 4 nibbles per prmt.
#include <climits>

#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/cuda_status.h"
#include "quant/fp8_experts.h"
#include "quant/mxfp4.h"
#include "quant/mxfp4_tiles.h"
#include "quant/mxfp4_to_fp8_table.h"

namespace day0 {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr unsigned kFullMask = 0xFFFFFFFFu;

__device__ __forceinline__ bool group_is_zero(const uint4& g) {
  return ((g.x | g.y | g.z | g.w) & 0x77777777u) == 0;  // magnitude bits of all 32 nibbles (-0 is zero)
}

__global__ void mxfp4_experts_to_fp8_kernel(const uint4* __restrict__ blocks, const std::uint8_t* __restrict__ scales,
                                            const std::int32_t* __restrict__ expert_ids, int n_experts,
                                            std::int64_t out_rows, std::int64_t groups, bool tiled,
                                            uint4* __restrict__ weights,
                                            float* __restrict__ row_scales, std::int32_t* error_flag,
                                            unsigned long long* inexact_count) {
  // The block's tables for every distinct shift, built once (a table per group took ~200 instructions: the
  // kernel ran at ~1.2 TB/s of bytes moved, bound by issue, not memory).
  constexpr int kTables = kMxfp4Fp8MaxShift - kMxfp4Fp8MinShift + 1;
  __shared__ Mxfp4Fp8Bytes tables[kTables];
  if (threadIdx.x < kTables)
    tables[threadIdx.x] = mxfp4_fp8_bytes(mxfp4_fp8_table(kMxfp4Fp8MinShift + static_cast<int>(threadIdx.x)));
  __syncthreads();
  const int lane = threadIdx.x % 32;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= out_rows) return;  // whole warps leave together
  int e = expert_ids[blockIdx.y];
  if (e < 0 || e >= n_experts) {
    if (row == 0 && lane == 0) *error_flag = 1;
    e = e < 0 ? 0 : n_experts - 1;
  }
  const std::int64_t src = (static_cast<std::int64_t>(e) * out_rows + row) * groups;  // the row's scales
  const Mxfp4RowUnits units = mxfp4_row_units(static_cast<std::int64_t>(e) * out_rows + row, groups, tiled);
  const std::int64_t dst_row = static_cast<std::int64_t>(blockIdx.y) * out_rows + row;

  // Pass 1: the row exponent R = max non-zero block exponent - 6 (0 for an all-zero row).
  int max_exponent = INT_MIN;
  for (std::int64_t g = lane; g < groups; g += 32)
    if (!group_is_zero(blocks[units.at(g)])) max_exponent = max(max_exponent, static_cast<int>(scales[src + g]) - 127);
  max_exponent = __reduce_max_sync(kFullMask, max_exponent);
  const int row_exponent = max_exponent == INT_MIN ? 0 : max_exponent - kFp8RowExponentShift;
  if (lane == 0) row_scales[dst_row] = ldexpf(1.0f, row_exponent);

  // Pass 2: 16 packed bytes -> 32 E4M3 bytes per group (the re-read hits L1), a packed word (8 values) at a time.
  unsigned inexact = 0;
  for (std::int64_t g = lane; g < groups; g += 32) {
    const uint4 packed = blocks[units.at(g)];
    const int shift = static_cast<int>(scales[src + g]) - 127 - row_exponent;
    const Mxfp4Fp8Bytes table = tables[mxfp4_fp8_clamped_shift(shift) - kMxfp4Fp8MinShift];
    const std::uint32_t in_words[4] = {packed.x, packed.y, packed.z, packed.w};
    std::uint32_t out_words[8];
#pragma unroll
    for (int q = 0; q < 4; ++q)
      inexact += mxfp4_word_to_fp8(in_words[q], table, out_words[2 * q], out_words[2 * q + 1]);
    uint4* dst = weights + (dst_row * groups + g) * 2;
    dst[0] = make_uint4(out_words[0], out_words[1], out_words[2], out_words[3]);
    dst[1] = make_uint4(out_words[4], out_words[5], out_words[6], out_words[7]);
  }
  if (inexact_count) {
    inexact = __reduce_add_sync(kFullMask, inexact);
    if (lane == 0 && inexact > 0) atomicAdd(inexact_count, static_cast<unsigned long long>(inexact));
  }
}

}  // namespace

Status mxfp4_experts_to_fp8_cuda(const ExpertWeights& w, const Tensor& expert_ids, Tensor& weights_fp8,
                                 Tensor& row_scales, Tensor& error_flag, cudaStream_t stream,
                                 Tensor* inexact_count) {
  const char* op = "mxfp4_experts_to_fp8_cuda";
  D0_ASSIGN_OR_RETURN(const std::int64_t n, check_mxfp4_selection(w, expert_ids, op));
  const std::int64_t groups = w.in / kMxfp4GroupSize;
  D0_RETURN_IF_ERROR(check_cuda_tensor(weights_fp8, op, "weights_fp8", {DType::f8_e4m3}, {n, w.out, w.in}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(row_scales, op, "row_scales", {DType::f32}, {n, w.out}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(error_flag, op, "error_flag", {DType::i32}, {1}));
  if (inexact_count) D0_RETURN_IF_ERROR(check_cuda_tensor(*inexact_count, op, "inexact_count", {DType::u64}, {1}));
  if (!aligned_to(w.blocks.raw(), 16) || !aligned_to(weights_fp8.raw(), 16))
    return make_error(std::string(op) + ": blocks and weights_fp8 must be 16-byte aligned (16-byte loads and stores)");
  if (n == 0) return Status::success();
  if (n > 65535) return make_error(std::string(op) + ": at most 65535 selected experts per launch");
  const std::int64_t grid_x = (std::int64_t(w.out) + kWarpsPerBlock - 1) / kWarpsPerBlock;
  const dim3 grid(static_cast<unsigned>(grid_x), static_cast<unsigned>(n));
  mxfp4_experts_to_fp8_kernel<<<grid, kWarpsPerBlock * 32, 0, stream>>>(
      static_cast<const uint4*>(w.blocks.raw()), w.scales.data<std::uint8_t>(), expert_ids.data<std::int32_t>(),
      w.n_experts, w.out, groups, w.storage == ExpertStorage::mxfp4_tiled, static_cast<uint4*>(weights_fp8.raw()),
      row_scales.data<float>(),
      error_flag.data<std::int32_t>(),
      inexact_count ? static_cast<unsigned long long*>(inexact_count->raw()) : nullptr);
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("mxfp4_experts_to_fp8_kernel");
  return Status::success();
}

}  // namespace day0
