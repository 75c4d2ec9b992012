// The reference test: K/V rows written through block tables and gathered back equal a ContiguousKvCache filled with
// the same rows — several sequences, interleaved appends, chunked prefill, shared prefixes and forks.
#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "paged_kv_harness.h"

namespace day0 {
namespace {

using test::PagedKvHarness;

std::vector<TokenId> random_tokens(std::mt19937& rng, std::int64_t n) {
  std::uniform_int_distribution<TokenId> d(0, 999);
  std::vector<TokenId> t(static_cast<std::size_t>(n));
  for (auto& x : t) x = d(rng);
  return t;
}

TEST(PagedKv, gathered_rows_of_interleaved_sequences_equal_contiguous_caches_filled_alike) {
  PagedKvHarness h(KvLayout{{8, 0, 12}, 4, DType::f32}, 64, 128, /*prefix_caching=*/false);
  std::mt19937 rng(7);
  for (SeqId s = 0; s < 4; ++s) ASSERT_TRUE(h.admit(s, random_tokens(rng, 3 + 5 * s)).ok());
  for (SeqId s = 0; s < 4; ++s) ASSERT_TRUE(h.compute(s, 6).ok());  // chunked prefill, first chunk
  h.expect_matches_reference();
  for (int step = 0; step < 40; ++step) {
    const SeqId s = static_cast<SeqId>(rng() % 4);
    ASSERT_TRUE(h.cache().append(s, random_tokens(rng, 1 + rng() % 3)).ok());
    ASSERT_TRUE(h.compute(s).ok());
  }
  h.expect_matches_reference();
  ASSERT_TRUE(h.cache().audit().ok());
}

TEST(PagedKv, sequences_reusing_a_cached_prefix_read_the_same_rows_as_if_computed_alone) {
  PagedKvHarness h(KvLayout{{8, 4}, 4, DType::f32}, 64, 128);
  std::mt19937 rng(11);
  const std::vector<TokenId> prefix = random_tokens(rng, 13);
  ASSERT_TRUE(h.admit(0, prefix).ok());
  ASSERT_TRUE(h.compute(0, 5).ok());
  ASSERT_TRUE(h.compute(0).ok());
  for (SeqId s = 1; s < 4; ++s) {
    std::vector<TokenId> p = prefix;
    const auto tail = random_tokens(rng, 2 + s);
    p.insert(p.end(), tail.begin(), tail.end());
    ASSERT_TRUE(h.admit(s, p).ok());
    EXPECT_EQ(h.cache().n_computed(s), 12);
    ASSERT_TRUE(h.compute(s).ok());
  }
  EXPECT_EQ(h.cache().stats().hit_tokens, 36);
  for (int step = 0; step < 30; ++step) {
    const SeqId s = static_cast<SeqId>(rng() % 4);
    ASSERT_TRUE(h.cache().append(s, random_tokens(rng, 1)).ok());
    ASSERT_TRUE(h.compute(s).ok());
  }
  h.expect_matches_reference();
  ASSERT_TRUE(h.cache().audit().ok());
}

TEST(PagedKv, forked_sequences_diverge_without_disturbing_each_others_rows) {
  PagedKvHarness h(KvLayout{{6}, 4, DType::f32}, 32, 64);
  std::mt19937 rng(3);
  ASSERT_TRUE(h.admit(0, random_tokens(rng, 10)).ok());
  ASSERT_TRUE(h.compute(0).ok());
  ASSERT_TRUE(h.fork(0, 1).ok());
  ASSERT_TRUE(h.fork(0, 2).ok());
  for (int step = 0; step < 12; ++step) {
    for (SeqId s : {2, 0, 1}) {
      ASSERT_TRUE(h.cache().append(s, random_tokens(rng, 1)).ok());
      ASSERT_TRUE(h.compute(s).ok());
    }
  }
  h.expect_matches_reference();
  const auto t0 = h.cache().block_table(0), t1 = h.cache().block_table(1);
  EXPECT_EQ(t0[0], t1[0]);  // the full prompt blocks stay shared
  EXPECT_EQ(t0[1], t1[1]);
  EXPECT_NE(t0[2], t1[2]);
  ASSERT_TRUE(h.cache().audit().ok());
}

}  // namespace
}  // namespace day0
