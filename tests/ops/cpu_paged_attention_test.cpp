// Paged attention and the KV slot write on the CPU: attention over keys scattered through block tables equals
// attention over the same keys gathered contiguously, for batches of sequences of different lengths mixing
// prefill chunks and decode rows, with windows and sinks; bad slots and tables are errors naming the fault.
#include <gtest/gtest.h>

#include "op_test_util.h"
#include "ops/cpu/cpu_ops.h"
#include "paged_kv_scenario.h"

namespace day0 {
namespace {

using optest::make_paged_scenario;

TEST(CpuPagedAttention, equals_contiguous_attention_for_a_mixed_batch_with_windows_and_sinks) {
  std::mt19937 rng(7);
  for (int window : {0, 5}) {
    for (bool sinks : {false, true}) {
      const AttentionParams p{4, 2, 16, window, 0.25f};
      // A decode row, a prefill chunk at an offset, a whole prompt, a sequence ending on a block boundary.
      auto sc = make_paged_scenario(rng, p, 4, {13, 9, 6, 8}, {1, 5, 6, 1}, sinks);
      CpuOps cpu;
      Tensor out = Tensor::zeros(sc.want.shape(), DType::f32);
      PagedKv kv{sc.tables, sc.q_seq, sc.block_size};
      ASSERT_TRUE(cpu.paged_attention(sc.q, sc.k_pool, sc.v_pool, sc.q_pos, kv, sc.sinks, p, out).ok());
      // Same keys, same order of summation: bit-identical to the contiguous path.
      for (std::int64_t i = 0; i < out.numel(); ++i) ASSERT_EQ(out.data<float>()[i], sc.want.data<float>()[i]) << i;
    }
  }
}

TEST(CpuPagedAttention, a_table_that_does_not_cover_the_query_position_is_an_error) {
  std::mt19937 rng(8);
  const AttentionParams p{2, 1, 8, 0, 0.3f};
  auto sc = make_paged_scenario(rng, p, 4, {6}, {2}, false);
  sc.tables.data<std::int32_t>()[1] = -1;  // positions 4..7 lose their block
  CpuOps cpu;
  Tensor out = Tensor::zeros(sc.want.shape(), DType::f32);
  auto st = cpu.paged_attention(sc.q, sc.k_pool, sc.v_pool, sc.q_pos, PagedKv{sc.tables, sc.q_seq, 4}, Tensor(), p, out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("has no key at position 4"), std::string::npos) << st.error().message;
  sc.q_seq.data<std::int32_t>()[0] = 3;  // there is one sequence
  st = cpu.paged_attention(sc.q, sc.k_pool, sc.v_pool, sc.q_pos, PagedKv{sc.tables, sc.q_seq, 4}, Tensor(), p, out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("names sequence 3 of 1"), std::string::npos) << st.error().message;
}

TEST(CpuKvWrite, rows_land_in_their_slots_and_a_slot_outside_the_pool_is_an_error) {
  std::mt19937 rng(9);
  CpuOps cpu;
  Tensor k = optest::random_f32({3, 4}, rng), v = optest::random_f32({3, 4}, rng);
  Tensor kp = Tensor::zeros({8, 4}, DType::f32), vp = Tensor::zeros({8, 4}, DType::f32);
  ASSERT_TRUE(cpu.kv_write(k, v, optest::i32_tensor({5, 0, 7}), kp, vp).ok());
  for (int c = 0; c < 4; ++c) {
    EXPECT_EQ(kp.data<float>()[5 * 4 + c], k.data<float>()[c]);
    EXPECT_EQ(vp.data<float>()[7 * 4 + c], v.data<float>()[2 * 4 + c]);
  }
  auto st = cpu.kv_write(k, v, optest::i32_tensor({1, 8, 2}), kp, vp);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("slot 8 outside the pool of 8"), std::string::npos) << st.error().message;
}

}  // namespace
}  // namespace day0
