// SequenceCache: block tables grow with tokens, running out is an error with no side effects, freeing returns every
// block, forks share and copy on write, and recurrent-state slots follow their sequences.
#include "cache/sequence_cache.h"

#include <gtest/gtest.h>

#include <numeric>

#include "cache/recurrent_state.h"

namespace day0 {
namespace {

std::vector<TokenId> range(TokenId first, std::int64_t n) {
  std::vector<TokenId> t(static_cast<std::size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}
std::vector<BlockId> table_of(const SequenceCache& c, SeqId s) {
  const auto t = c.block_table(s);
  return {t.begin(), t.end()};
}
void expect_sound(const SequenceCache& c) {
  const Status s = c.audit();
  EXPECT_TRUE(s.ok()) << s.error().message;
}

TEST(SequenceCache, a_prompt_gets_ceil_tokens_over_block_size_blocks_and_appends_fill_the_last_block_first) {
  SequenceCache cache({.n_blocks = 8, .block_size = 4});
  ASSERT_TRUE(cache.allocate(1, range(0, 6)).ok());
  EXPECT_EQ(cache.block_table(1).size(), 2u);
  ASSERT_TRUE(cache.append(1, range(6, 2)).ok());
  EXPECT_EQ(cache.block_table(1).size(), 2u);
  ASSERT_TRUE(cache.append(1, range(8, 1)).ok());
  EXPECT_EQ(cache.block_table(1).size(), 3u);
  EXPECT_EQ(cache.n_tokens(1), 9);
  const auto t = table_of(cache, 1);
  EXPECT_EQ(cache.slot_of(1, 5).block, t[1]);
  EXPECT_EQ(cache.slot_of(1, 5).offset, 1);
  std::vector<std::int64_t> slots;
  cache.slots(1, 7, 9, slots);
  EXPECT_EQ(slots, (std::vector<std::int64_t>{t[1] * 4 + 3, t[2] * 4 + 0}));
  expect_sound(cache);
}

TEST(SequenceCache, running_out_of_blocks_is_an_error_that_changes_nothing) {
  SequenceCache cache({.n_blocks = 3, .block_size = 2});
  ASSERT_TRUE(cache.allocate(1, range(0, 4)).ok());  // 2 blocks
  EXPECT_EQ(cache.blocks_needed_to_allocate(range(100, 4)), 2);
  const auto too_big = cache.allocate(2, range(100, 4));
  ASSERT_FALSE(too_big.ok());
  EXPECT_NE(too_big.error().message.find("sequence 2"), std::string::npos) << too_big.error().message;
  EXPECT_FALSE(cache.contains(2));
  EXPECT_EQ(cache.n_free_blocks(), 1);
  ASSERT_TRUE(cache.append(1, range(4, 2)).ok());  // takes the last block
  EXPECT_EQ(cache.blocks_needed_to_append(1, 1), 1);
  EXPECT_FALSE(cache.append(1, range(6, 1)).ok());
  EXPECT_EQ(cache.n_tokens(1), 6);
  EXPECT_EQ(cache.block_table(1).size(), 3u);
  expect_sound(cache);
}

// reserve: room for a token not yet known takes the block its append would, now; the append then takes none. Out of
// blocks it changes nothing; a sequence holding room cannot fork; free returns the room's block too.
TEST(SequenceCache, reserved_room_takes_the_next_tokens_block_before_its_token_is_appended) {
  SequenceCache cache({.n_blocks = 3, .block_size = 4});
  ASSERT_TRUE(cache.allocate(1, range(0, 4)).ok());  // one full block: the next token needs another
  ASSERT_TRUE(cache.mark_computed(1, 4).ok());
  EXPECT_EQ(cache.blocks_needed_to_append(1, 1), 1);
  ASSERT_TRUE(cache.reserve(1, 1).ok());
  EXPECT_EQ(cache.block_table(1).size(), 2u);
  EXPECT_EQ(cache.n_free_blocks(), 1);
  EXPECT_EQ(cache.n_tokens(1), 4);
  EXPECT_EQ(cache.blocks_needed_to_append(1, 1), 0);
  expect_sound(cache);
  const Status fork = cache.fork(1, 2);
  ASSERT_FALSE(fork.ok());
  EXPECT_NE(fork.error().message.find("reserved room"), std::string::npos) << fork.error().message;
  const auto table = table_of(cache, 1);
  ASSERT_TRUE(cache.append(1, range(4, 1)).ok());  // into the reserved block: nothing more taken
  EXPECT_EQ(table_of(cache, 1), table);
  EXPECT_EQ(cache.n_free_blocks(), 1);
  expect_sound(cache);
  ASSERT_TRUE(cache.reserve(1, 3).ok());  // positions 5-7: inside the same block
  EXPECT_EQ(cache.n_free_blocks(), 1);
  ASSERT_TRUE(cache.reserve(1, 4).ok());  // position 8: the last free block
  EXPECT_EQ(cache.n_free_blocks(), 0);
  const Status full = cache.reserve(1, 8);
  ASSERT_FALSE(full.ok());
  EXPECT_NE(full.error().message.find("sequence 1"), std::string::npos) << full.error().message;
  EXPECT_EQ(cache.block_table(1).size(), 3u);
  expect_sound(cache);
  ASSERT_TRUE(cache.free(1).ok());
  EXPECT_EQ(cache.n_available_blocks(), 3);  // the computed first block parked in the prefix cache, two free
  EXPECT_EQ(cache.n_free_blocks(), 2);
  expect_sound(cache);
}

TEST(SequenceCache, freeing_a_sequence_returns_all_its_blocks) {
  SequenceCache cache({.n_blocks = 4, .block_size = 2, .prefix_caching = false});
  ASSERT_TRUE(cache.allocate(1, range(0, 7)).ok());
  EXPECT_EQ(cache.n_free_blocks(), 0);
  ASSERT_TRUE(cache.free(1).ok());
  EXPECT_EQ(cache.n_free_blocks(), 4);
  EXPECT_FALSE(cache.contains(1));
  EXPECT_FALSE(cache.free(1).ok());  // twice is an error, not a double release
  ASSERT_TRUE(cache.allocate(2, range(0, 8)).ok());
  expect_sound(cache);
}

TEST(SequenceCache, misuse_is_an_error_naming_the_sequence) {
  SequenceCache cache({.n_blocks = 4, .block_size = 2});
  EXPECT_FALSE(cache.allocate(1, std::vector<TokenId>{}).ok());
  ASSERT_TRUE(cache.allocate(1, range(0, 3)).ok());
  EXPECT_FALSE(cache.allocate(1, range(0, 3)).ok());
  EXPECT_FALSE(cache.append(9, range(0, 1)).ok());
  EXPECT_FALSE(cache.mark_computed(9, 0).ok());
  const Status early_fork = cache.fork(1, 2);  // its prompt is not computed yet
  ASSERT_FALSE(early_fork.ok());
  EXPECT_NE(early_fork.error().message.find("sequence 1"), std::string::npos);
  EXPECT_FALSE(cache.fork(7, 8).ok());
  expect_sound(cache);
}

TEST(SequenceCache, fork_shares_every_block_and_append_copies_the_shared_partial_last_block) {
  SequenceCache cache({.n_blocks = 8, .block_size = 4});
  ASSERT_TRUE(cache.allocate(1, range(0, 6)).ok());
  ASSERT_TRUE(cache.mark_computed(1, 6).ok());
  ASSERT_TRUE(cache.fork(1, 2).ok());
  const auto shared = table_of(cache, 1);
  EXPECT_EQ(table_of(cache, 2), shared);
  EXPECT_EQ(cache.pool().ref_count(shared[0]), 2);
  EXPECT_EQ(cache.pool().ref_count(shared[1]), 2);
  EXPECT_EQ(cache.n_computed(2), 6);
  expect_sound(cache);

  ASSERT_TRUE(cache.append(2, std::vector<TokenId>{77}).ok());
  const auto child = table_of(cache, 2);
  EXPECT_EQ(child[0], shared[0]);  // full blocks stay shared
  EXPECT_NE(child[1], shared[1]);  // the partial one is now private
  EXPECT_EQ(cache.pool().ref_count(shared[1]), 1);
  const CacheOps ops = cache.take_ops();
  ASSERT_EQ(ops.block_copies.size(), 1u);
  EXPECT_EQ(ops.block_copies[0].src, shared[1]);
  EXPECT_EQ(ops.block_copies[0].dst, child[1]);
  EXPECT_EQ(ops.block_copies[0].n_rows, 2);
  EXPECT_TRUE(cache.take_ops().empty());

  // The parent now holds the only reference: it appends in place, no copy.
  ASSERT_TRUE(cache.append(1, std::vector<TokenId>{88}).ok());
  EXPECT_EQ(table_of(cache, 1)[1], shared[1]);
  EXPECT_TRUE(cache.take_ops().block_copies.empty());
  expect_sound(cache);
}

TEST(SequenceCache, a_fork_at_a_block_boundary_needs_no_copy) {
  SequenceCache cache({.n_blocks = 8, .block_size = 4});
  ASSERT_TRUE(cache.allocate(1, range(0, 8)).ok());
  ASSERT_TRUE(cache.mark_computed(1, 8).ok());
  ASSERT_TRUE(cache.fork(1, 2).ok());
  EXPECT_EQ(cache.blocks_needed_to_append(2, 1), 1);
  ASSERT_TRUE(cache.append(2, std::vector<TokenId>{5}).ok());
  EXPECT_TRUE(cache.take_ops().block_copies.empty());
  EXPECT_EQ(cache.block_table(2).size(), 3u);
  ASSERT_TRUE(cache.free(1).ok());
  ASSERT_TRUE(cache.free(2).ok());
  EXPECT_EQ(cache.n_used_blocks(), 0);
  expect_sound(cache);
}

TEST(SequenceCache, copy_on_write_counts_its_block_when_checking_room) {
  SequenceCache cache({.n_blocks = 2, .block_size = 4});
  ASSERT_TRUE(cache.allocate(1, range(0, 6)).ok());
  ASSERT_TRUE(cache.mark_computed(1, 6).ok());
  ASSERT_TRUE(cache.fork(1, 2).ok());
  EXPECT_EQ(cache.n_available_blocks(), 0);
  EXPECT_EQ(cache.blocks_needed_to_append(2, 1), 1);
  EXPECT_FALSE(cache.append(2, std::vector<TokenId>{1}).ok());
  EXPECT_EQ(table_of(cache, 2), table_of(cache, 1));
  expect_sound(cache);
}

TEST(RecurrentState, slots_are_allocated_with_sequences_and_returned_when_they_end) {
  SequenceCache cache({.n_blocks = 8, .block_size = 4, .n_state_slots = 2});
  EXPECT_FALSE(cache.prefix_caching());  // no state snapshots at block boundaries yet
  ASSERT_TRUE(cache.allocate(1, range(0, 3)).ok());
  ASSERT_TRUE(cache.allocate(2, range(0, 3)).ok());
  const StateSlot s1 = *cache.state_slot(1), s2 = *cache.state_slot(2);
  EXPECT_NE(s1, s2);
  EXPECT_EQ(cache.n_free_state_slots(), 0);
  const auto third = cache.allocate(3, range(0, 3));
  ASSERT_FALSE(third.ok());
  EXPECT_NE(third.error().message.find("slot"), std::string::npos);
  EXPECT_EQ(cache.n_free_blocks(), 6);  // the failed admission took no blocks
  CacheOps ops = cache.take_ops();
  EXPECT_EQ(ops.state_resets, (std::vector<StateSlot>{s1, s2}));
  ASSERT_TRUE(cache.free(1).ok());
  EXPECT_EQ(cache.n_free_state_slots(), 1);
  ASSERT_TRUE(cache.mark_computed(2, 3).ok());
  ASSERT_TRUE(cache.fork(2, 4).ok());
  ops = cache.take_ops();
  ASSERT_EQ(ops.state_copies.size(), 1u);
  EXPECT_EQ(ops.state_copies[0].src, s2);
  EXPECT_EQ(ops.state_copies[0].dst, *cache.state_slot(4));
  EXPECT_FALSE(cache.fork(2, 5).ok());  // no slot left
  expect_sound(cache);
}

TEST(RecurrentState, storage_holds_per_slot_conv_and_recurrent_state_that_resets_and_copies) {
  const std::vector<RecurrentLayerShape> layers{{3, 4, 2, 2, 3}, {}};  // a KDA layer and an attention layer
  EXPECT_EQ(*RecurrentStateStorage::bytes_per_slot(layers), 4 * (3 * 4 + 2 * 2 * 3));
  auto storage = RecurrentStateStorage::create(layers, 2);
  ASSERT_TRUE(storage.ok());
  Tensor conv = storage->conv_state(0, 1), state = storage->recurrent_state(0, 1);
  EXPECT_EQ(conv.shape(), (Shape{3, 4}));
  EXPECT_EQ(state.shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(storage->recurrent_state(1, 0).numel(), 0);
  conv.data<float>()[5] = 1.5f;
  state.data<float>()[11] = -2.f;
  const std::vector<SlotCopy> copies{{1, 0}};
  ASSERT_TRUE(storage->apply(copies).ok());
  EXPECT_EQ(storage->conv_state(0, 0).data<float>()[5], 1.5f);
  EXPECT_EQ(storage->recurrent_state(0, 0).data<float>()[11], -2.f);
  ASSERT_TRUE(storage->reset(1).ok());
  EXPECT_EQ(storage->conv_state(0, 1).data<float>()[5], 0.f);
  EXPECT_EQ(storage->recurrent_state(0, 0).data<float>()[11], -2.f);  // other slots untouched
  EXPECT_FALSE(storage->reset(2).ok());
  EXPECT_FALSE(RecurrentStateStorage::create({{-1, 1, 1, 1, 1}}, 2).ok());
}

TEST(RecurrentState, the_slot_pool_hands_out_each_slot_once) {
  StateSlotPool pool(2);
  const auto a = pool.allocate(), b = pool.allocate();
  ASSERT_TRUE(a && b);
  EXPECT_NE(*a, *b);
  EXPECT_FALSE(pool.allocate().has_value());
  pool.free(*a);
  EXPECT_EQ(pool.allocate(), a);
}

}  // namespace
}  // namespace day0
