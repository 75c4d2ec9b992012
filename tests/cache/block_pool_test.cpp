// BlockPool and KvBlockStorage: budget sizing, allocation to exhaustion, release, and slot-addressed rows.
#include "cache/block_pool.h"

#include <gtest/gtest.h>

#include <set>

#include "cache/kv_block_storage.h"

namespace day0 {
namespace {

TEST(KvBudget, bytes_per_token_counts_k_and_v_of_every_kv_layer_and_skips_linear_layers) {
  // 3 layers: 2 kv_heads x 8 head_dim, a linear-attention layer, 4 x 8; bf16.
  const KvLayout layout{{16, 0, 32}, 4, DType::bf16};
  const auto per_token = kv_bytes_per_token(layout);
  ASSERT_TRUE(per_token.ok());
  EXPECT_EQ(*per_token, 2 * (16 + 32) * 2);
}

TEST(KvBudget, budget_gives_whole_blocks_and_too_small_a_budget_is_an_error_naming_the_block_bytes) {
  const KvLayout layout{{16, 16}, 4, DType::f32};  // 256 bytes a token, 1024 a block
  const auto n = kv_blocks_for_budget(layout, 10 * 1024 + 1000);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 10);
  const auto none = kv_blocks_for_budget(layout, 1000);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("1024"), std::string::npos) << none.error().message;
  EXPECT_FALSE(kv_blocks_for_budget(KvLayout{{16}, 0, DType::f32}, 1 << 20).ok());
  EXPECT_FALSE(kv_blocks_for_budget(KvLayout{{-1}, 4, DType::f32}, 1 << 20).ok());
  EXPECT_FALSE(kv_blocks_for_budget(KvLayout{{16}, 4, DType::fp4_e2m1}, 1 << 20).ok());
  EXPECT_FALSE(kv_blocks_for_budget(KvLayout{{0, 0}, 4, DType::f32}, 1 << 20).ok());
}

// The executor's pool when the memory left cannot hold what was asked (bench: one context per batch row).
// size_kv_pool: layout of 1,024 bytes a block (4 tokens) throughout.
// A shrinking request (day0 bench's) unless `reserve` is -1: as asked.
KvPoolRequest pool_request(std::int64_t max_tokens, std::int64_t pool_tokens, std::int64_t reserve) {
  KvPoolRequest r;
  r.max_tokens = max_tokens;
  r.pool_tokens = pool_tokens;
  r.fit = reserve < 0 ? KvPoolFit::as_asked : KvPoolFit::shrink;
  r.reserve_bytes = reserve;
  return r;
}

TEST(KvBudget, a_pool_too_large_for_the_budget_shrinks_to_whole_blocks_but_never_below_one_sequence) {
  const KvLayout layout{{16, 16}, 4, DType::f32};
  const auto blocks = [&](KvPoolRequest r, std::optional<std::size_t> free) {
    auto s = size_kv_pool(layout, r, free);
    EXPECT_TRUE(s.ok()) << s.error().message;
    EXPECT_EQ(s->max_tokens, r.max_tokens);
    return s.ok() ? s->blocks : -1;
  };
  EXPECT_EQ(blocks(pool_request(16, 400, 0), 1000 * 1024), 100);           // fits: as asked
  EXPECT_EQ(blocks(pool_request(16, 400, 0), 10 * 1024 + 1023), 10);       // 10 whole blocks
  EXPECT_EQ(blocks(pool_request(16, 400, 2048), 12 * 1024), 10);           // less the reserve
  EXPECT_EQ(blocks(pool_request(16, 400, 0), 4 * 1024), 4);                // one sequence of 16 tokens
  EXPECT_EQ(blocks(pool_request(16, 400, 1 << 20), 4 * 1024), 4);          // ... whatever the reserve
  EXPECT_EQ(blocks(pool_request(16, 4, 0), 1000 * 1024), 4);               // never below one sequence
  EXPECT_EQ(blocks(pool_request(16, 400, -1), 1000 * 1024), 100);          // not fitted
  EXPECT_EQ(blocks(pool_request(16, 1 << 20, 0), std::nullopt), 1 << 18);  // free memory unknown: as asked
  KvPoolRequest padded = pool_request(16, 400, 0);
  padded.pad_blocks = 1;
  EXPECT_EQ(blocks(padded, 10 * 1024), 9);  // the padding block comes out of the same memory
  const auto none = size_kv_pool(layout, pool_request(16, 400, 0), 3 * 1024);  // not one sequence: the error
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("lower it (--max-model-len"), std::string::npos) << none.error().message;
  const auto no_kv = size_kv_pool(KvLayout{{0, 0}, 4, DType::f32}, pool_request(16, 400, 0), 0);
  ASSERT_TRUE(no_kv.ok()) << no_kv.error().message;
  EXPECT_EQ(no_kv->blocks, 100) << "no KV layers: nothing to fit";
}

// A server's pool (fill) takes every whole block the memory holds; an unset context length (fit_max_tokens) is
// lowered to what one sequence can have, in whole blocks, rather than refused.
TEST(KvBudget, a_filled_pool_takes_what_fits_and_a_fitted_context_is_lowered_to_whole_blocks) {
  const KvLayout layout{{16, 16}, 4, DType::f32};
  KvPoolRequest fill = pool_request(16, 64, 1024);
  fill.fit = KvPoolFit::fill;
  fill.pad_blocks = 1;
  auto s = size_kv_pool(layout, fill, 101 * 1024);  // 100 blocks after the reserve, one of them the padding's
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->blocks, 99);
  EXPECT_EQ(s->max_tokens, 16);
  s = size_kv_pool(layout, fill, std::nullopt);  // free memory unknown: pool_tokens
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->blocks, 16);

  KvPoolRequest context = pool_request(131072, 0, 1024);
  context.fit = KvPoolFit::fill;
  context.fit_max_tokens = true;
  s = size_kv_pool(layout, context, 51 * 1024 + 1000);  // 50 whole blocks after the reserve
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->max_tokens, 200);
  EXPECT_EQ(s->blocks, 50);
  s = size_kv_pool(layout, context, 1u << 30);  // room for the whole context: as asked, the rest to the pool
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->max_tokens, 131072);
  EXPECT_EQ(s->blocks, ((1 << 30) - 1024) / 1024);
  s = size_kv_pool(layout, context, 1024 + 1023);  // not one block after the reserve
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("not one block of 4 tokens fits"), std::string::npos) << s.error().message;
  context.fit_max_tokens = false;  // an explicit context length: the error that says to lower it
  s = size_kv_pool(layout, context, 51 * 1024);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("--max-model-len"), std::string::npos) << s.error().message;
}

// A pool that cannot fit is refused before any allocation, naming what it needs, what is left, how many tokens fit
// and what to lower: the context length where the pool is its one-sequence minimum, else the pool.
TEST(KvBudget, a_pool_that_cannot_fit_names_what_to_lower) {
  const KvLayout small{{16, 16}, 4, DType::f32};  // 256 bytes a token
  EXPECT_TRUE(check_kv_pool_fits(small, 100, 100 * 1024, 0).ok());
  EXPECT_TRUE(check_kv_pool_fits(small, 1024, 1u << 20, 4096).ok());      // 4,096 tokens: 1 MiB needed, 1 MiB left
  const KvLayout layout{{4096, 4096}, 16, DType::f32};                    // 64 KiB a token
  const Status big = check_kv_pool_fits(layout, 8192, 1u << 30, 131072);  // 131,072 tokens: 8 GiB
  ASSERT_FALSE(big.ok());
  const std::string m = big.error().message;
  EXPECT_NE(m.find("131072 tokens need 8.00 GiB, and 1.00 GiB is left"), std::string::npos) << m;
  EXPECT_NE(m.find("context length (131072 tokens): lower it (--max-model-len; ~16384 tokens fit)"), std::string::npos)
      << m;
  const Status pool = check_kv_pool_fits(layout, 8192, 1u << 30, 0);
  ASSERT_FALSE(pool.ok());
  EXPECT_NE(pool.error().message.find("lower the pool (--kv-tokens; ~16384 tokens fit)"), std::string::npos)
      << pool.error().message;
  EXPECT_TRUE(check_kv_pool_fits(KvLayout{{0, 0}, 4, DType::f32}, 1 << 20, 0, 0).ok());  // no KV layers
}

TEST(BlockPool, allocation_to_exhaustion_hands_out_each_block_once_then_returns_empty) {
  BlockPool pool(5);
  std::set<BlockId> seen;
  for (int i = 0; i < 5; ++i) {
    const auto b = pool.allocate();
    ASSERT_TRUE(b.has_value());
    EXPECT_TRUE(seen.insert(*b).second);
    EXPECT_EQ(pool.ref_count(*b), 1);
    EXPECT_FALSE(pool.is_free(*b));
  }
  EXPECT_EQ(pool.n_free(), 0);
  EXPECT_FALSE(pool.allocate().has_value());
  EXPECT_FALSE(pool.allocate().has_value());  // and again: no state change on failure
}

TEST(BlockPool, released_blocks_return_to_the_free_list_only_when_the_last_holder_lets_go) {
  BlockPool pool(2);
  const BlockId a = *pool.allocate();
  pool.acquire(a);
  EXPECT_EQ(pool.ref_count(a), 2);
  EXPECT_EQ(pool.release(a), 1);
  EXPECT_EQ(pool.n_free(), 1);
  EXPECT_EQ(pool.release(a), 0);
  pool.push_free(a);
  EXPECT_EQ(pool.n_free(), 2);
  EXPECT_TRUE(pool.is_free(a));
  EXPECT_EQ(*pool.allocate(), a);  // most recently freed first
}

Tensor rows(std::int64_t n, std::int64_t w, float base) {
  Tensor t = Tensor::zeros({n, w}, DType::f32);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = base + static_cast<float>(i);
  return t;
}

TEST(KvBlockStorage, rows_written_to_slots_are_gathered_back_in_block_table_order) {
  auto storage = KvBlockStorage::create(KvLayout{{3, 0}, 2, DType::f32}, 4);
  ASSERT_TRUE(storage.ok());
  EXPECT_EQ(storage->keys(0).shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(storage->bytes(), 2u * 4 * 2 * 3 * sizeof(float));
  // Table [3, 1]: positions 0,1 -> slots 6,7; position 2 -> slot 2.
  const std::vector<std::int64_t> slots{6, 7, 2};
  ASSERT_TRUE(storage->write(0, slots, rows(3, 3, 0), rows(3, 3, 100)).ok());
  const std::vector<BlockId> table{3, 1};
  Tensor k, v;
  ASSERT_TRUE(storage->gather(0, table, 3, k, v).ok());
  for (int i = 0; i < 9; ++i) {
    EXPECT_EQ(k.data<float>()[i], static_cast<float>(i));
    EXPECT_EQ(v.data<float>()[i], 100.f + static_cast<float>(i));
  }
  EXPECT_FALSE(storage->write(1, slots, rows(3, 3, 0), rows(3, 3, 0)).ok());  // no KV in layer 1
  EXPECT_FALSE(storage->write(0, slots, rows(2, 3, 0), rows(2, 3, 0)).ok());  // 2 rows, 3 slots
  const std::vector<std::int64_t> outside{8};
  EXPECT_FALSE(storage->write(0, outside, rows(1, 3, 0), rows(1, 3, 0)).ok());  // past the pool
  EXPECT_FALSE(storage->gather(0, table, 5, k, v).ok());                        // past the table
}

TEST(KvBlockStorage, a_block_copy_duplicates_the_filled_rows_in_every_layer) {
  auto storage = KvBlockStorage::create(KvLayout{{2, 2}, 2, DType::f32}, 3);
  ASSERT_TRUE(storage.ok());
  const std::vector<std::int64_t> slots{0, 1};
  ASSERT_TRUE(storage->write(0, slots, rows(2, 2, 1), rows(2, 2, 11)).ok());
  ASSERT_TRUE(storage->write(1, slots, rows(2, 2, 21), rows(2, 2, 31)).ok());
  const std::vector<BlockCopy> copies{{0, 2, 1}};
  ASSERT_TRUE(storage->apply(copies).ok());
  const std::vector<BlockId> table{2};
  Tensor k, v;
  ASSERT_TRUE(storage->gather(1, table, 2, k, v).ok());
  EXPECT_EQ(k.data<float>()[0], 21.f);
  EXPECT_EQ(k.data<float>()[1], 22.f);
  EXPECT_EQ(k.data<float>()[2], 0.f);  // row 1 was not part of the copy
  EXPECT_EQ(v.data<float>()[1], 32.f);
  const std::vector<BlockCopy> bad{{0, 3, 1}};
  EXPECT_FALSE(storage->apply(bad).ok());
}

}  // namespace
}  // namespace day0
