// Tensor maps for Hopper's tensor memory accelerator (TMA, cp.async.bulk.tensor): a byte tensor in global memory
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

// MXFP4 blocks in the tiled order (quant/mxfp4_tiles.h) of `rows` rows (a multiple of 16) of `groups` groups as a
// 4-D byte tensor (a row's 64 bytes of a tile, 16 rows, the row block's tiles, row blocks), boxes of one tile of
// box_row_blocks row blocks: a box of 16 b rows x 4 groups lands as the same rows of a [rows, groups] byte matrix's
// 64-byte-wide box would (rows 64 bytes apart, unswizzled). Copy with coordinates (0, 0, k tile, first row / 16).
Status mxfp4_tiled_tensor_map(const void* base, std::uint64_t rows, std::uint64_t groups, std::uint32_t box_row_blocks,
                              CUtensorMap& map);

}  // namespace day0
