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

// The attention block's op (Ops::linears_rope_attention_linear) as the CPU runs it: the bits of q/k/v with rope
// and the KV write, then the attention with its o projection; q, k, v, both pools and the output alike.
TEST(CpuAttentionBlock, is_linears_rope_kv_write_then_paged_attention_linear) {
  std::mt19937 rng(10);
  const AttentionParams p{4, 2, 16, 0, 0.25f};
  const std::int64_t H = 24, N = 20, qw = 4 * 16, kvw = 2 * 16;
  auto sc = make_paged_scenario(rng, p, 4, {13, 9}, {5, 9}, true);
  const std::int64_t S = sc.q.size(0), max_blocks = sc.tables.size(1);
  std::vector<std::int32_t> slots;  // each query's own slot
  for (std::int64_t s = 0; s < S; ++s) {
    const std::int32_t pos = sc.q_pos.data<std::int32_t>()[s], seq = sc.q_seq.data<std::int32_t>()[s];
    slots.push_back(sc.tables.data<std::int32_t>()[seq * max_blocks + pos / 4] * 4 + pos % 4);
  }
  const Tensor x = optest::random_f32({S, H}, rng), o_w = optest::random_f32({N, qw}, rng);
  const Tensor wq = optest::random_f32({qw, H}, rng), wk = optest::random_f32({kvw, H}, rng),
               wv = optest::random_f32({kvw, H}, rng), bq = optest::random_f32({qw}, rng);
  const PagedKv kv{sc.tables, sc.q_seq, sc.block_size};
  struct Outputs {
    Tensor q, k, v, k_pool, v_pool, mixed, out;
  };
  auto outputs = [&] {
    return Outputs{Tensor::zeros({S, qw}, DType::f32), Tensor::zeros({S, kvw}, DType::f32),
                   Tensor::zeros({S, kvw}, DType::f32), sc.k_pool.clone(), sc.v_pool.clone(),
                   Tensor::zeros({S, qw}, DType::f32), Tensor::zeros({S, N}, DType::f32)};
  };
  auto args = [&](Outputs& o) {
    const std::vector<LinearTarget> qkv{{wq, bq, o.q}, {wk, Tensor(), o.k}, {wv, Tensor(), o.v}};
    const RopeKvArgs r{4, 2, 16, sc.q_pos, optest::gpt_oss_inv_freq(16), 1.3465736f,
                       optest::i32_tensor(slots), o.k_pool, o.v_pool};
    return std::pair{qkv, r};
  };
  CpuOps cpu;
  Outputs one = outputs(), two = outputs();
  {
    const auto [qkv, r] = args(one);
    ASSERT_TRUE(cpu.linears_rope_attention_linear(x, qkv, r, nullptr, kv, sc.sinks, p, one.mixed,
                                                  {o_w, Tensor(), one.out}).ok());
  }
  {
    const auto [qkv, r] = args(two);
    ASSERT_TRUE(cpu.linears_rope_kv_write(x, qkv, r, nullptr).ok());
    ASSERT_TRUE(cpu.paged_attention_linear(two.q, two.k_pool, two.v_pool, sc.q_pos, kv, sc.sinks, p, two.mixed,
                                           {o_w, Tensor(), two.out}).ok());
  }
  const std::vector<std::pair<Tensor*, Tensor*>> pairs = {{&one.q, &two.q},           {&one.k, &two.k},
                                                          {&one.v, &two.v},           {&one.k_pool, &two.k_pool},
                                                          {&one.v_pool, &two.v_pool}, {&one.mixed, &two.mixed},
                                                          {&one.out, &two.out}};
  for (const auto& [a, b] : pairs)
    for (std::int64_t i = 0; i < a->numel(); ++i) ASSERT_EQ(a->data<float>()[i], b->data<float>()[i]) << i;
  EXPECT_NE(one.out.data<float>()[0], 0.f);
}

}  // namespace
}  // namespace day0
