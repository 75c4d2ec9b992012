// Philox4x32-10 against Random123's known-answer vectors, and the uniform draw built on it.
#include "engine/philox.h"

#include <gtest/gtest.h>

#include <set>

namespace day0 {
namespace {

TEST(Philox, matches_random123_known_answer_vectors) {
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}), (PhiloxBlock{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu}),
            (PhiloxBlock{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u}),
            (PhiloxBlock{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(Philox, uniform_draws_lie_in_unit_interval_and_depend_on_seed_and_position_only) {
  std::set<double> seen;
  double sum = 0.0;
  const int n = 10000;
  for (int i = 0; i < n; ++i) {
    const double u = philox_uniform(42, i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    seen.insert(u);
    sum += u;
  }
  EXPECT_EQ(seen.size(), static_cast<std::size_t>(n));
  EXPECT_NEAR(sum / n, 0.5, 0.01);  // the mean of 10k uniforms has a standard deviation of 0.003
  EXPECT_EQ(philox_uniform(42, 7), philox_uniform(42, 7));
  EXPECT_NE(philox_uniform(42, 7), philox_uniform(43, 7));
  EXPECT_NE(philox_uniform(42, 7), philox_uniform(42, 8));
  EXPECT_NE(philox_uniform(1ull << 40, 7), philox_uniform(0, 7));  // the seed's high half counts
}

}  // namespace
}  // namespace day0
