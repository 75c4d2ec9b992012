// The staged order of E4M3 rows (quant/fp8_row_order.h): a permutation of each k-tile's pieces, the one the
// decode-sized FP8 GEMM's A fragments read, with a short last k-tile kept within its own bytes.
#include "quant/fp8_row_order.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <set>
#include <vector>

namespace day0 {
namespace {

TEST(Fp8RowOrder, every_piece_stays_in_its_own_k_tile_and_each_position_is_taken_once) {
  for (const int values : {32, 64, 96, 128, 160, 224, 2880, 4096}) {
    SCOPED_TRACE(values);
    const int pieces = values / 4;
    std::set<int> taken;
    for (int u = 0; u < pieces; ++u) {
      const int at = fp8_staged_piece(u, pieces);
      ASSERT_GE(at, 0);
      ASSERT_LT(at, pieces);
      EXPECT_EQ(at / kFp8StagedTilePieces, u / kFp8StagedTilePieces) << "piece " << u;
      taken.insert(at);
    }
    EXPECT_EQ(static_cast<int>(taken.size()), pieces);
  }
}

// A whole k-tile: word s (values 8 s .. 8 s + 7) of lane t's group feeds k-step s at k 32 s + 4 t (its first half)
// and 32 s + 16 + 4 t (its second): piece 8 t + 2 s + h at 4-byte position 8 s + 4 h + t.
TEST(Fp8RowOrder, a_whole_k_tile_is_in_the_order_the_register_fragments_take) {
  for (int tile = 0; tile < 3; ++tile)
    for (int t = 0; t < 4; ++t)
      for (int s = 0; s < 4; ++s)
        for (int h = 0; h < 2; ++h)
          EXPECT_EQ(fp8_staged_piece(32 * tile + 8 * t + 2 * s + h, 2880 / 4), 32 * tile + 8 * s + 4 * h + t);
}

// gpt-oss's 2,880 values end in a k-tile of 2 groups: 16-byte chunk c (word c / 2's half c % 2 of each group) is
// stored as the groups' two pieces, 8 bytes at 8 c.
TEST(Fp8RowOrder, a_short_last_k_tile_keeps_its_chunks_in_its_own_bytes) {
  const int pieces = 2880 / 4, last = 22 * 32;
  for (int t = 0; t < 2; ++t)
    for (int c = 0; c < 8; ++c) EXPECT_EQ(fp8_staged_piece(last + 8 * t + c, pieces), last + 2 * c + t);
}

TEST(Fp8RowOrder, rows_are_permuted_each_on_its_own) {
  const std::int64_t rows = 3, values = 96;
  std::vector<std::uint8_t> natural(rows * values), staged(rows * values);
  std::iota(natural.begin(), natural.end(), std::uint8_t{0});
  fp8_rows_to_staged(natural.data(), rows, values, staged.data());
  for (std::int64_t r = 0; r < rows; ++r)
    for (int u = 0; u < values / 4; ++u)
      for (int b = 0; b < 4; ++b)
        EXPECT_EQ(staged[r * values + 4 * fp8_staged_piece(u, values / 4) + b], natural[r * values + 4 * u + b]);
}

}  // namespace
}  // namespace day0
