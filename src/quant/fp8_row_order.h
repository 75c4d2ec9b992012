// The orders E4M3 activation rows are stored in. natural: value i at byte i. staged: the order the decode-sized FP8
// expert GEMM (ops/cuda/moe_mxfp4_rs_fp8_cuda.cuh) puts a k-tile of 128 values in before its MMAs read it, so that
// it stages a row with 16-byte copies instead of 4-byte ones. Within each k-tile, a row's 4-byte pieces (values
// 4 u .. 4 u + 3) are a [groups][8] matrix stored transposed: piece u of group t = u / 8 at (u % 8) * G + t, where
// G is the k-tile's groups of 32 values (4; fewer in a row's last k-tile). Rows are a whole number of groups.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/host_device.h"

namespace day0 {

enum class Fp8RowOrder { natural, staged };

inline constexpr int kFp8StagedTilePieces = 32;  // 4-byte pieces a k-tile of 128 values
inline constexpr int kFp8StagedGroupPieces = 8;  // pieces a group of 32 values

// Where piece `piece` of a row of `row_pieces` pieces (a multiple of 8) is stored in the staged order.
D0_HOST_DEVICE constexpr int fp8_staged_piece(int piece, int row_pieces) {
  const int tile_first = piece / kFp8StagedTilePieces * kFp8StagedTilePieces, u = piece - tile_first;
  const int left = (row_pieces - tile_first) / kFp8StagedGroupPieces;
  const int groups = left < 4 ? left : 4;
  return tile_first + (u % kFp8StagedGroupPieces) * groups + u / kFp8StagedGroupPieces;
}

// rows x values codes from the natural order to the staged one (values a multiple of 32; no aliasing).
inline void fp8_rows_to_staged(const std::uint8_t* natural, std::int64_t rows, std::int64_t values,
                               std::uint8_t* staged) {
  const int pieces = static_cast<int>(values / 4);
  for (std::int64_t r = 0; r < rows; ++r)
    for (int u = 0; u < pieces; ++u)
      std::memcpy(staged + r * values + 4 * fp8_staged_piece(u, pieces), natural + r * values + 4 * u, 4);
}

}  // namespace day0
