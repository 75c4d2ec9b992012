// Tensor maps for Hopper's tensor memory accelerator (TMA, cp.async.bulk.tensor): a 2-D byte matrix in global memory
// described once on the host, so one thread can copy a whole box of it into shared memory (in the 128-byte swizzle
// wgmma reads, where asked), out-of-range rows and columns read as zeros.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "core/status.h"

namespace day0 {

enum class TensorMapSwizzle { none, bytes128 };

// rows x cols bytes at `base` (16-byte aligned), rows `row_stride` bytes apart (a multiple of 16); boxes of
// box_rows x box_cols (each <= 256; box_cols <= 128 with the swizzle, a multiple of 16 without).
// cuTensorMapEncodeTiled comes from the driver through the runtime (cudaGetDriverEntryPointByVersion): no link to
// libcuda. `map` is filled in place (64-byte aligned: not passed by value).
Status byte_matrix_tensor_map(const void* base, std::uint64_t rows, std::uint64_t cols, std::uint64_t row_stride,
                              std::uint32_t box_rows, std::uint32_t box_cols, TensorMapSwizzle swizzle,
                              CUtensorMap& map);

}  // namespace day0
