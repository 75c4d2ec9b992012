// ContiguousKvCache: rows land where the sequence is, overflow is an error, layers stay separate.
#include <gtest/gtest.h>

#include "cache/contiguous_kv.h"

namespace day0 {
namespace {

Tensor filled(std::int64_t n, std::int64_t w, float base) {
  Tensor t = Tensor::zeros({n, w}, DType::f32);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = base + static_cast<float>(i);
  return t;
}

TEST(ContiguousKvCache, writes_append_after_committed_rows_and_views_see_them) {
  ContiguousKvCache cache({4, 0, 6}, 10);
  ASSERT_TRUE(cache.write(0, filled(3, 4, 0), filled(3, 4, 100)).ok());
  ASSERT_TRUE(cache.write(2, filled(3, 6, 0), filled(3, 6, 100)).ok());
  cache.commit(3);
  ASSERT_TRUE(cache.write(0, filled(1, 4, 50), filled(1, 4, 150)).ok());
  cache.commit(1);
  const Tensor k = cache.keys(0, 4), v = cache.values(0, 4);
  EXPECT_EQ(k.shape(), (Shape{4, 4}));
  EXPECT_EQ(k.data<float>()[11], 11.f);
  EXPECT_EQ(k.data<float>()[12], 50.f);
  EXPECT_EQ(v.data<float>()[12], 150.f);
  EXPECT_EQ(cache.length(), 4);
}

TEST(ContiguousKvCache, writing_past_the_reserved_tokens_or_with_a_wrong_width_is_an_error) {
  ContiguousKvCache cache({4}, 2);
  EXPECT_FALSE(cache.write(0, filled(3, 4, 0), filled(3, 4, 0)).ok());
  EXPECT_FALSE(cache.write(0, filled(1, 5, 0), filled(1, 5, 0)).ok());
  EXPECT_FALSE(cache.write(1, filled(1, 4, 0), filled(1, 4, 0)).ok());
  EXPECT_EQ(cache.bytes(), 2u * 2 * 4 * sizeof(float));
}

}  // namespace
}  // namespace day0
