// Randomized stress: many sequences admitted, appended, computed in chunks, forked and freed in random order over a
// small pool (so eviction and out-of-blocks happen often). After every step the audit holds (ref counts equal table
// references; free + used + evictable == total); gathered K/V always equal the per-sequence references.
#include <gtest/gtest.h>

#include <random>

#include "paged_kv_harness.h"

namespace day0 {
namespace {

using test::PagedKvHarness;

struct Snapshot {
  std::vector<BlockId> table;
  std::int64_t n_tokens = 0;
  std::int32_t n_free = 0, n_evictable = 0;
};
Snapshot snapshot(SequenceCache& c, SeqId s) {
  const auto t = c.block_table(s);
  return {{t.begin(), t.end()}, c.n_tokens(s), c.n_free_blocks(), c.n_evictable_blocks()};
}
void expect_unchanged(SequenceCache& c, SeqId s, const Snapshot& before) {
  const Snapshot now = snapshot(c, s);
  EXPECT_EQ(now.table, before.table);
  EXPECT_EQ(now.n_tokens, before.n_tokens);
  EXPECT_EQ(now.n_free, before.n_free);
  EXPECT_EQ(now.n_evictable, before.n_evictable);
}

void run_stress(std::uint32_t seed, bool prefix_caching) {
  constexpr std::int64_t kBlock = 4;
  PagedKvHarness h(KvLayout{{4, 0, 2}, kBlock, DType::f32}, 40, 256, prefix_caching);
  SequenceCache& c = h.cache();
  std::mt19937 rng(seed);
  // Prompts draw from a few shared stems so that prefixes recur (hits, evictions, revivals).
  std::vector<std::vector<TokenId>> stems;
  for (int i = 0; i < 4; ++i) {
    std::vector<TokenId> s;
    for (int j = 0; j < 14; ++j) s.push_back(static_cast<TokenId>(rng() % 50));
    stems.push_back(s);
  }
  auto random_tokens = [&](std::int64_t n) {
    std::vector<TokenId> t;
    for (std::int64_t i = 0; i < n; ++i) t.push_back(static_cast<TokenId>(rng() % 50));
    return t;
  };
  SeqId next_id = 0;
  int n_failed = 0, n_forks = 0, n_hits_before = 0;
  for (int step = 0; step < 3000; ++step) {
    std::vector<SeqId> live;
    for (const auto& [s, ref] : h.live()) live.push_back(s);
    const SeqId pick = live.empty() ? -1 : live[rng() % live.size()];
    const int op = static_cast<int>(rng() % 10);
    if (live.empty() || op < 2) {  // admit
      std::vector<TokenId> prompt(stems[rng() % stems.size()]);
      prompt.resize(1 + rng() % prompt.size());
      const auto tail = random_tokens(rng() % 6);
      prompt.insert(prompt.end(), tail.begin(), tail.end());
      const std::int32_t free_before = c.n_free_blocks(), evictable_before = c.n_evictable_blocks();
      const Status st = h.admit(next_id, prompt);
      if (!st.ok()) {
        ++n_failed;
        EXPECT_FALSE(c.contains(next_id));
        EXPECT_EQ(c.n_free_blocks(), free_before);
        EXPECT_EQ(c.n_evictable_blocks(), evictable_before);
      }
      ++next_id;
    } else if (op < 5) {  // append, then maybe compute
      const Snapshot before = snapshot(c, pick);
      const Status st = c.append(pick, random_tokens(1 + rng() % 6));
      if (!st.ok()) {
        ++n_failed;
        expect_unchanged(c, pick, before);
      }
      if (rng() % 2) {
        ASSERT_TRUE(h.compute(pick, 1 + rng() % 8).ok());
      }
    } else if (op < 7) {  // compute a chunk
      ASSERT_TRUE(h.compute(pick, 1 + rng() % 8).ok());
    } else if (op < 8) {  // fork a fully computed sequence
      if (c.n_computed(pick) == c.n_tokens(pick)) {
        ASSERT_TRUE(h.fork(pick, next_id++).ok());
        ++n_forks;
      }
    } else {  // free (finish, abort or preempt)
      ASSERT_TRUE(h.release(pick).ok());
    }
    const Status audit = c.audit();
    ASSERT_TRUE(audit.ok()) << "step " << step << ": " << audit.error().message;
    ASSERT_EQ(c.n_free_blocks() + c.n_used_blocks() + c.n_evictable_blocks(), c.n_blocks());
    if (step % 50 == 0) {
      h.expect_matches_reference();
      if (testing::Test::HasFatalFailure()) return;
    }
  }
  h.expect_matches_reference();
  n_hits_before = static_cast<int>(c.stats().hit_tokens);
  std::vector<SeqId> live;
  for (const auto& [s, ref] : h.live()) live.push_back(s);
  for (SeqId s : live) ASSERT_TRUE(h.release(s).ok());
  ASSERT_TRUE(c.audit().ok());
  EXPECT_EQ(c.n_used_blocks(), 0);
  EXPECT_EQ(c.n_free_blocks() + c.n_evictable_blocks(), c.n_blocks());
  // The run must have exercised what it claims to.
  EXPECT_GT(n_failed, 0);
  EXPECT_GT(n_forks, 0);
  if (prefix_caching) {
    EXPECT_GT(n_hits_before, 0);
    EXPECT_GT(c.stats().evictions, 0);
  } else {
    EXPECT_EQ(c.n_evictable_blocks(), 0);
  }
}

TEST(SequenceCacheStress, random_admits_appends_forks_and_frees_keep_every_invariant_and_every_row) {
  for (std::uint32_t seed : {1u, 2u, 3u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    run_stress(seed, /*prefix_caching=*/true);
    if (HasFatalFailure()) return;
  }
}

TEST(SequenceCacheStress, the_same_without_prefix_caching_returns_every_block_to_the_free_list) {
  run_stress(9, /*prefix_caching=*/false);
}

}  // namespace
}  // namespace day0
