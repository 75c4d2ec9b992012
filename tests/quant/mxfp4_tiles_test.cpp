// The tiled order of MXFP4 blocks (quant/mxfp4_tiles.h): where each block goes, what a warp's loads then cover, a
// row's units in either order, and the repack both ways.
#include "quant/mxfp4_tiles.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

namespace day0 {
namespace {

constexpr std::int64_t kGroups = 90;  // gpt-oss: 2,880 inputs

TEST(Mxfp4Tiles, every_block_has_its_own_unit_within_the_padded_size) {
  const std::int64_t rows = 48;
  EXPECT_EQ(mxfp4_row_tiles(kGroups), 23);
  EXPECT_EQ(mxfp4_tiled_bytes(rows, kGroups), rows * 92 * 16);
  std::set<std::int64_t> units;
  for (std::int64_t row = 0; row < rows; ++row)
    for (std::int64_t g = 0; g < kGroups; ++g) {
      const std::int64_t u = mxfp4_tiled_unit(row, g, kGroups);
      ASSERT_GE(u, 0);
      ASSERT_LT(u, mxfp4_tiled_bytes(rows, kGroups) / 16);
      units.insert(u);
    }
  EXPECT_EQ(static_cast<std::int64_t>(units.size()), rows * kGroups);
  // Row 17, group 5: row block 1, tile 1, row 1 of the tile, group 1 of the tile.
  EXPECT_EQ(mxfp4_tiled_unit(17, 5, kGroups), (1 * 23 + 1) * 64 + 1 * 4 + 1);
}

// A warp's loads of a tile (lane 4 g + t: row g, or g + 8, group t) read 512 contiguous bytes each, and a row
// block's weights are one range.
TEST(Mxfp4Tiles, a_warps_loads_are_contiguous_and_a_row_block_is_one_range) {
  for (std::int64_t row_block : {0, 3})
    for (std::int64_t tile : {0, 7, 22})
      for (int half : {0, 1}) {
        const std::int64_t first = mxfp4_tiled_unit(16 * row_block + 8 * half, 4 * tile, kGroups);
        for (int lane = 0; lane < 32; ++lane)
          EXPECT_EQ(mxfp4_tiled_unit(16 * row_block + 8 * half + lane / 4, 4 * tile + lane % 4, kGroups), first + lane);
      }
  for (std::int64_t row_block : {0, 5}) {
    std::int64_t lo = INT64_MAX, hi = -1;
    for (std::int64_t r = 0; r < 16; ++r)
      for (std::int64_t g = 0; g < kGroups; ++g) {
        const std::int64_t u = mxfp4_tiled_unit(16 * row_block + r, g, kGroups);
        lo = std::min(lo, u);
        hi = std::max(hi, u);
      }
    EXPECT_EQ(lo, row_block * 23 * 64);
    EXPECT_EQ(hi, (row_block + 1) * 23 * 64 - 3);  // row 15's group 89 (t = 1), then its two units of padding
  }
}

// mxfp4_row_units (the GEMMs' and conversions' addressing) gives each order's unit for every group of a row.
TEST(Mxfp4Tiles, row_units_address_both_orders) {
  for (std::int64_t groups : {kGroups, std::int64_t{4}, std::int64_t{7}})
    for (std::int64_t row : {0, 5, 16, 31, 47}) {
      const Mxfp4RowUnits tiled = mxfp4_row_units(row, groups, true), rows = mxfp4_row_units(row, groups, false);
      for (int g = 0; g < groups; ++g) {
        EXPECT_EQ(tiled.at(g), mxfp4_tiled_unit(row, g, groups)) << "row " << row << " group " << g;
        EXPECT_EQ(rows.at(g), row * groups + g) << "row " << row << " group " << g;
      }
    }
}

TEST(Mxfp4Tiles, the_repack_round_trips_and_pads_with_zeros) {
  std::mt19937 rng(7);
  for (std::int64_t groups : {kGroups, std::int64_t{4}, std::int64_t{1}, std::int64_t{7}}) {
    const std::int64_t rows = 32;
    std::vector<std::uint8_t> blocks(static_cast<std::size_t>(rows * groups * 16));
    for (auto& b : blocks) b = static_cast<std::uint8_t>(rng() | 1);  // no zero byte: padding is the only zero
    std::vector<std::uint8_t> tiled(static_cast<std::size_t>(mxfp4_tiled_bytes(rows, groups)), 0xAB);
    ASSERT_TRUE(mxfp4_to_tiles(blocks.data(), rows, groups, tiled.data()).ok());
    std::int64_t zeros = 0;
    for (std::uint8_t b : tiled) zeros += b == 0;
    EXPECT_EQ(zeros, rows * (mxfp4_row_tiles(groups) * 4 - groups) * 16) << groups << " groups";
    for (std::int64_t row = 0; row < rows; ++row)
      for (std::int64_t g = 0; g < groups; ++g)
        for (int i = 0; i < 16; ++i)
          ASSERT_EQ(tiled[16 * mxfp4_tiled_unit(row, g, groups) + i], blocks[16 * (row * groups + g) + i]);
    std::vector<std::uint8_t> back(blocks.size(), 0);
    ASSERT_TRUE(mxfp4_from_tiles(tiled.data(), rows, groups, back.data()).ok());
    EXPECT_EQ(back, blocks) << groups << " groups";
  }
}

TEST(Mxfp4Tiles, rows_off_the_tile_height_or_no_groups_are_errors_naming_the_value) {
  std::vector<std::uint8_t> a(16 * 64 * 4), b(16 * 64 * 4);
  auto st = mxfp4_to_tiles(a.data(), 20, 4, b.data());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("multiple of 16, got 20"), std::string::npos) << st.error().message;
  st = mxfp4_from_tiles(a.data(), 16, 0, b.data());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("groups must be positive, got 0"), std::string::npos) << st.error().message;
}

}  // namespace
}  // namespace day0
