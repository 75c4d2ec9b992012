// The device order of MXFP4 expert blocks the decode-size kernels read best: tile by tile. A tile is 16 rows x 4
// groups (16 x 128 values, 1 KB): row r's 4 groups' 16-byte blocks at units 4 r .. 4 r + 3, so a warp's loads of
// rows g and g + 8 (lane 4 g + t: group t) cover 512 contiguous bytes each, where the published row-major order
// gives 8 runs of 64 bytes 1,440 bytes apart (gpt-oss). A row block of 16 rows holds its tiles in k order, and
// row blocks follow one another, so a row block's weights are one range. K is padded with zero blocks to whole
// tiles (gpt-oss: 90 groups to 92). Scales keep the row-major [rows, groups] order.
// H100 probe (v54): the grouped kernel reading this order ran the whole 20b expert block at 8 tokens in 124.5 us
// against 134.2 row-major (both with the L2's 256-byte fetch).
#pragma once

#include <cstdint>

#include "core/host_device.h"
#include "core/status.h"

namespace day0 {

inline constexpr int kMxfp4TileRows = 16;
inline constexpr int kMxfp4TileGroups = 4;
inline constexpr int kMxfp4TileUnits = kMxfp4TileRows * kMxfp4TileGroups;  // 16-byte blocks a tile

// Tiles a row holds for `groups` groups (the padded K is 4x this many groups).
D0_HOST_DEVICE constexpr std::int64_t mxfp4_row_tiles(std::int64_t groups) {
  return (groups + kMxfp4TileGroups - 1) / kMxfp4TileGroups;
}

// A row's groups in the tiled order, padding included: the groups dimension of tiled blocks [E, out, this, 16].
D0_HOST_DEVICE constexpr std::int64_t mxfp4_tiled_groups(std::int64_t groups) {
  return mxfp4_row_tiles(groups) * kMxfp4TileGroups;
}

// The index of row `row`'s group `group` block among the 16-byte units of the tiled order (rows a multiple of 16).
D0_HOST_DEVICE constexpr std::int64_t mxfp4_tiled_unit(std::int64_t row, std::int64_t group, std::int64_t groups) {
  const std::int64_t row_block = row / kMxfp4TileRows, r = row % kMxfp4TileRows;
  const std::int64_t tile = group / kMxfp4TileGroups, t = group % kMxfp4TileGroups;
  return (row_block * mxfp4_row_tiles(groups) + tile) * kMxfp4TileUnits + r * kMxfp4TileGroups + t;
}

// One row's blocks in either order: group g's 16-byte unit at first + (g / 4) * tile_stride + g % 4 (row-major: the
// row's units in order, tile_stride 4; tiled: its tiles 64 units apart). For kernels that read both orders.
struct Mxfp4RowUnits {
  std::int64_t first;
  int tile_stride;
  D0_HOST_DEVICE constexpr std::int64_t at(int group) const {
    return first + static_cast<std::int64_t>(group / kMxfp4TileGroups) * tile_stride + group % kMxfp4TileGroups;
  }
};

D0_HOST_DEVICE constexpr Mxfp4RowUnits mxfp4_row_units(std::int64_t row, std::int64_t groups, bool tiled) {
  return tiled ? Mxfp4RowUnits{mxfp4_tiled_unit(row, 0, groups), kMxfp4TileUnits}
               : Mxfp4RowUnits{row * groups, kMxfp4TileGroups};
}

// Bytes of `rows` rows of `groups` groups in the tiled order (padding included).
D0_HOST_DEVICE constexpr std::int64_t mxfp4_tiled_bytes(std::int64_t rows, std::int64_t groups) {
  return rows * mxfp4_tiled_groups(groups) * 16;
}

// Row-major blocks [rows, groups, 16] to the tiled order (mxfp4_tiled_bytes(rows, groups) bytes at `tiled`, padding
// zero) and back. rows must be a multiple of 16; the error names what is wrong.
Status mxfp4_to_tiles(const std::uint8_t* blocks, std::int64_t rows, std::int64_t groups, std::uint8_t* tiled);
Status mxfp4_from_tiles(const std::uint8_t* tiled, std::int64_t rows, std::int64_t groups, std::uint8_t* blocks);

}  // namespace day0
