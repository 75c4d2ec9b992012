// Prefix caching through SequenceCache: shared full blocks, never the partial last one, LRU eviction of unreferenced
// cached blocks, collisions that never return foreign blocks, and the hit-rate counters.
#include <gtest/gtest.h>

#include <numeric>

#include "cache/sequence_cache.h"

namespace day0 {
namespace {

std::vector<TokenId> range(TokenId first, std::int64_t n) {
  std::vector<TokenId> t(static_cast<std::size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}
std::vector<TokenId> concat(std::vector<TokenId> a, const std::vector<TokenId>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
std::vector<BlockId> table_of(const SequenceCache& c, SeqId s) {
  const auto t = c.block_table(s);
  return {t.begin(), t.end()};
}
// Admits a sequence and pretends its prompt has been computed (the executor wrote its K/V).
std::int64_t admit(SequenceCache& c, SeqId s, const std::vector<TokenId>& prompt) {
  const auto hit = c.allocate(s, prompt);
  EXPECT_TRUE(hit.ok()) << (hit.ok() ? "" : hit.error().message);
  EXPECT_TRUE(c.mark_computed(s, static_cast<std::int64_t>(prompt.size())).ok());
  EXPECT_TRUE(c.audit().ok()) << c.audit().error().message;
  return hit.ok() ? *hit : -1;
}

TEST(PrefixCache, two_sequences_sharing_a_three_block_prefix_share_block_ids_and_ref_counts) {
  SequenceCache cache({.n_blocks = 16, .block_size = 4});
  const std::vector<TokenId> prefix = range(100, 12);  // 3 full blocks
  EXPECT_EQ(admit(cache, 1, concat(prefix, {7, 8})), 0);
  EXPECT_EQ(admit(cache, 2, concat(prefix, {9})), 12);
  const auto a = table_of(cache, 1), b = table_of(cache, 2);
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(b.size(), 4u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(a[i], b[i]);
    EXPECT_EQ(cache.pool().ref_count(a[i]), 2);
  }
  EXPECT_NE(a[3], b[3]);
  EXPECT_EQ(cache.pool().ref_count(a[3]), 1);
  EXPECT_EQ(cache.n_used_blocks(), 5);
  EXPECT_EQ(cache.n_computed(2), 13);
}

TEST(PrefixCache, the_partial_last_block_is_never_shared) {
  SequenceCache cache({.n_blocks = 16, .block_size = 4});
  const std::vector<TokenId> prompt = range(0, 6);  // one full block + 2 tokens
  admit(cache, 1, prompt);
  EXPECT_FALSE(cache.prefix_cache().is_cached(table_of(cache, 1)[1]));
  EXPECT_EQ(admit(cache, 2, prompt), 4);
  EXPECT_EQ(table_of(cache, 1)[0], table_of(cache, 2)[0]);
  EXPECT_NE(table_of(cache, 1)[1], table_of(cache, 2)[1]);
  EXPECT_EQ(cache.prefix_cache().n_cached(), 1);
}

TEST(PrefixCache, a_prompt_that_is_entirely_cached_still_computes_its_last_block) {
  SequenceCache cache({.n_blocks = 16, .block_size = 4});
  const std::vector<TokenId> prompt = range(0, 8);
  admit(cache, 1, prompt);
  EXPECT_EQ(cache.prefix_cache().n_cached(), 2);
  EXPECT_EQ(admit(cache, 2, prompt), 4);  // the last token yields the logits, so its block is recomputed privately
  EXPECT_NE(table_of(cache, 1)[1], table_of(cache, 2)[1]);
}

TEST(PrefixCache, blocks_enter_the_cache_only_once_computed) {
  SequenceCache cache({.n_blocks = 16, .block_size = 4});
  const std::vector<TokenId> prompt = range(0, 12);
  ASSERT_TRUE(cache.allocate(1, prompt).ok());
  EXPECT_EQ(cache.prefix_cache().n_cached(), 0);
  ASSERT_TRUE(cache.mark_computed(1, 5).ok());  // chunked prefill: first chunk of 5 tokens
  EXPECT_EQ(cache.prefix_cache().n_cached(), 1);
  EXPECT_EQ(*cache.allocate(2, prompt), 4);
  EXPECT_FALSE(cache.mark_computed(1, 4).ok());   // computed count never goes back
  EXPECT_FALSE(cache.mark_computed(1, 13).ok());  // nor past the tokens held
  EXPECT_TRUE(cache.audit().ok());
}

TEST(PrefixCache, freed_cached_blocks_stay_reusable_until_evicted) {
  SequenceCache cache({.n_blocks = 4, .block_size = 2});
  admit(cache, 1, range(0, 5));  // blocks: 2 full cached, 1 partial
  ASSERT_TRUE(cache.free(1).ok());
  EXPECT_EQ(cache.n_free_blocks(), 2);
  EXPECT_EQ(cache.n_evictable_blocks(), 2);
  EXPECT_EQ(cache.n_used_blocks(), 0);
  EXPECT_EQ(admit(cache, 2, range(0, 5)), 4);  // preempted and re-admitted: full reuse
  EXPECT_EQ(cache.n_evictable_blocks(), 0);
}

TEST(PrefixCache, eviction_takes_the_least_recently_used_unreferenced_block_and_only_when_the_free_list_is_empty) {
  SequenceCache cache({.n_blocks = 6, .block_size = 2});
  admit(cache, 1, range(0, 3));  // blocks b0 (cached) + partial
  admit(cache, 2, range(10, 3));
  admit(cache, 3, range(20, 3));
  const BlockId b1 = table_of(cache, 1)[0], b2 = table_of(cache, 2)[0], b3 = table_of(cache, 3)[0];
  ASSERT_TRUE(cache.free(2).ok());
  ASSERT_TRUE(cache.free(1).ok());
  ASSERT_TRUE(cache.free(3).ok());
  EXPECT_EQ(cache.prefix_cache().lru_order(), (std::vector<BlockId>{b2, b1, b3}));
  // A hit on 1's prefix makes b1 the most recently used once released again.
  admit(cache, 4, range(0, 3));
  ASSERT_TRUE(cache.free(4).ok());
  EXPECT_EQ(cache.prefix_cache().lru_order(), (std::vector<BlockId>{b2, b3, b1}));
  EXPECT_EQ(cache.n_free_blocks(), 3);
  // 3 free blocks are used before any eviction; the 4th and 5th blocks evict b2 then b3.
  ASSERT_TRUE(cache.allocate(5, range(50, 6)).ok());
  EXPECT_EQ(cache.stats().evictions, 0);
  ASSERT_TRUE(cache.allocate(6, range(60, 4)).ok());
  EXPECT_EQ(cache.stats().evictions, 2);
  EXPECT_EQ(cache.prefix_cache().lru_order(), (std::vector<BlockId>{b1}));
  ASSERT_TRUE(cache.free(5).ok());  // never computed, so nothing of it was cached
  EXPECT_EQ(cache.n_free_blocks(), 3);
  EXPECT_EQ(*cache.allocate(7, range(10, 3)), 0);  // 2's prefix is gone
  EXPECT_EQ(*cache.allocate(8, range(0, 3)), 2);   // 1's is still there
  EXPECT_TRUE(cache.audit().ok());
}

TEST(PrefixCache, tail_blocks_of_a_freed_sequence_are_evicted_before_its_head) {
  SequenceCache cache({.n_blocks = 4, .block_size = 2});
  admit(cache, 1, range(0, 7));  // 3 full cached blocks + partial
  const auto t = table_of(cache, 1);
  ASSERT_TRUE(cache.free(1).ok());
  EXPECT_EQ(cache.prefix_cache().lru_order(), (std::vector<BlockId>{t[2], t[1], t[0]}));
}

TEST(PrefixCache, a_hash_collision_never_returns_a_block_of_different_content) {
  // Every block hashes alike: each lookup finds some entry, so only the stored token ids can tell them apart.
  SequenceCache cache(
      {.n_blocks = 16, .block_size = 2, .hasher = [](BlockHash, std::span<const TokenId>) { return BlockHash{42}; }});
  admit(cache, 1, {1, 2, 3, 4, 5});
  EXPECT_EQ(admit(cache, 2, {9, 9, 3, 4, 5}), 0);
  EXPECT_NE(table_of(cache, 1)[0], table_of(cache, 2)[0]);
  EXPECT_GE(cache.stats().collisions, 1);
  EXPECT_EQ(admit(cache, 3, {1, 2, 7, 7, 5}), 2);  // the true hit still works
  EXPECT_EQ(table_of(cache, 3)[0], table_of(cache, 1)[0]);
}

TEST(PrefixCache, a_block_whose_hash_is_taken_by_other_content_stays_private_and_ends_its_chain) {
  // Blocks [1,2] and [8,9] collide; sequence 1 owns the hash. Sequence 2's [8,9] cannot be registered, and neither
  // can its later blocks (their chain would hang from an entry that does not exist).
  auto hasher = [](BlockHash parent, std::span<const TokenId> t) {
    const bool colliding = (t[0] == 1 && t[1] == 2) || (t[0] == 8 && t[1] == 9);
    return colliding ? BlockHash{7} : default_block_hash(parent, t);
  };
  SequenceCache cache({.n_blocks = 16, .block_size = 2, .hasher = hasher});
  admit(cache, 1, {1, 2, 0});
  admit(cache, 2, {8, 9, 3, 4, 0});
  EXPECT_FALSE(cache.prefix_cache().is_cached(table_of(cache, 2)[0]));
  EXPECT_FALSE(cache.prefix_cache().is_cached(table_of(cache, 2)[1]));
  EXPECT_EQ(*cache.allocate(3, std::vector<TokenId>{1, 2, 3, 4, 0}), 2);
  EXPECT_EQ(table_of(cache, 3)[0], table_of(cache, 1)[0]);
  EXPECT_NE(table_of(cache, 3)[1], table_of(cache, 2)[1]);
  ASSERT_TRUE(cache.free(2).ok());
  EXPECT_EQ(cache.n_evictable_blocks(), 0);  // private blocks go straight back to the free list
}

TEST(PrefixCache, a_child_entry_matches_only_under_the_parent_entry_it_was_registered_under) {
  // [8,9] is cached with child [3,4]; [8,9] is evicted and the colliding [1,2] takes its hash. Looking up [3,4]
  // after [1,2] computes the very hash of the old child, whose K/V were computed after [8,9]: it must miss.
  auto hasher = [](BlockHash parent, std::span<const TokenId> t) {
    const bool colliding = (t[0] == 1 && t[1] == 2) || (t[0] == 8 && t[1] == 9);
    return colliding ? BlockHash{7} : default_block_hash(parent, t);
  };
  PrefixCache cache(4, 2, hasher);
  const std::vector<TokenId> a{8, 9}, b{1, 2}, child{3, 4};
  const auto la = cache.insert(PrefixCache::root(), a, 0);
  ASSERT_TRUE(la.has_value());
  ASSERT_TRUE(cache.insert(*la, child, 1).has_value());
  ASSERT_TRUE(cache.lookup(*la, child).has_value());
  cache.park(0);
  EXPECT_EQ(cache.evict_lru(), std::optional<BlockId>(0));
  const auto lb = cache.insert(PrefixCache::root(), b, 2);
  ASSERT_TRUE(lb.has_value());
  EXPECT_EQ(lb->hash, la->hash);
  EXPECT_FALSE(cache.lookup(*lb, child).has_value());
  EXPECT_EQ(cache.stats().collisions, 1);
}

TEST(PrefixCache, hit_rate_is_reused_tokens_over_prompt_tokens) {
  SequenceCache cache({.n_blocks = 16, .block_size = 4});
  admit(cache, 1, range(0, 10));  // 10 prompt tokens, 0 hits
  admit(cache, 2, range(0, 10));  // 10 prompt tokens, 8 hits
  const PrefixCacheStats& s = cache.stats();
  EXPECT_EQ(s.prompt_tokens, 20);
  EXPECT_EQ(s.hit_tokens, 8);
  EXPECT_EQ(s.hit_blocks, 2);
  EXPECT_EQ(s.miss_blocks, 1);
  EXPECT_DOUBLE_EQ(s.hit_rate(), 0.4);
}

TEST(PrefixCache, disabled_prefix_caching_shares_nothing_and_counts_nothing) {
  SequenceCache cache({.n_blocks = 16, .block_size = 4, .prefix_caching = false});
  admit(cache, 1, range(0, 10));
  EXPECT_EQ(admit(cache, 2, range(0, 10)), 0);
  EXPECT_EQ(cache.prefix_cache().n_cached(), 0);
  EXPECT_EQ(cache.stats().prompt_tokens, 0);
  ASSERT_TRUE(cache.free(1).ok());
  EXPECT_EQ(cache.n_evictable_blocks(), 0);
}

}  // namespace
}  // namespace day0
