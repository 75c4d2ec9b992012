// A random paged-attention scenario shared by the CPU and CUDA tests: B sequences of different lengths, each
// with its last n_b tokens as queries, keys scattered over a pool through shuffled block tables (with -1
// padding), and the expected output from CpuOps::attention over each sequence's keys gathered contiguously.
#pragma once

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "op_test_util.h"
#include "ops/cpu/cpu_ops.h"

namespace day0::optest {

struct PagedScenario {
  AttentionParams p;
  std::int64_t block_size = 0;
  Tensor q, k_pool, v_pool, q_pos, q_seq, tables, sinks, want;
};

// lengths[b]: tokens of sequence b so far (including its queries); queries[b]: how many of its last are queried.
// bf16_kv: the pools hold bf16 values (as f32), so a bf16 pool made from them holds the keys `want` was made with.
inline PagedScenario make_paged_scenario(std::mt19937& rng, const AttentionParams& p, std::int64_t block_size,
                                         const std::vector<std::int64_t>& lengths,
                                         const std::vector<std::int64_t>& queries, bool with_sinks,
                                         bool bf16_kv = false) {
  PagedScenario sc;
  sc.p = p;
  sc.block_size = block_size;
  const std::int64_t d = p.head_dim, q_width = p.n_heads * d, kv_width = p.n_kv_heads * d;
  const std::int64_t B = static_cast<std::int64_t>(lengths.size());
  std::int64_t max_blocks = 0, total_blocks = 0, S = 0;
  for (std::int64_t b = 0; b < B; ++b) {
    const std::int64_t nb = (lengths[b] + block_size - 1) / block_size;
    max_blocks = std::max(max_blocks, nb + 1);  // one padding entry at least
    total_blocks += nb;
    S += queries[b];
  }
  const std::int64_t pool_blocks = total_blocks + 3;  // some blocks nobody uses
  std::vector<std::int32_t> ids(pool_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  sc.k_pool = random_f32({pool_blocks * block_size, kv_width}, rng);
  sc.v_pool = random_f32({pool_blocks * block_size, kv_width}, rng);
  if (bf16_kv)
    for (Tensor* pool : {&sc.k_pool, &sc.v_pool})
      for (std::int64_t i = 0; i < pool->numel(); ++i)
        pool->data<float>()[i] = bf16_to_f32(f32_to_bf16(pool->data<float>()[i]));
  sc.tables = Tensor::zeros({B, max_blocks}, DType::i32);
  sc.q = random_f32({S, q_width}, rng);
  sc.q_pos = Tensor::zeros({S}, DType::i32);
  sc.q_seq = Tensor::zeros({S}, DType::i32);
  sc.want = Tensor::zeros({S, q_width}, DType::f32);
  if (with_sinks) sc.sinks = random_f32({p.n_heads}, rng, -1.f, 2.f);
  CpuOps cpu;
  std::int64_t next = 0, row = 0;
  for (std::int64_t b = 0; b < B; ++b) {
    const std::int64_t nb = (lengths[b] + block_size - 1) / block_size;
    std::int32_t* table = sc.tables.data<std::int32_t>() + b * max_blocks;
    for (std::int64_t i = 0; i < max_blocks; ++i) table[i] = i < nb ? ids[next++] : -1;
    // The sequence's keys, gathered in position order.
    Tensor k = Tensor::zeros({lengths[b], kv_width}, DType::f32), v = k.clone();
    for (std::int64_t t = 0; t < lengths[b]; ++t) {
      const std::int64_t slot = std::int64_t(table[t / block_size]) * block_size + t % block_size;
      std::copy_n(sc.k_pool.data<float>() + slot * kv_width, kv_width, k.data<float>() + t * kv_width);
      std::copy_n(sc.v_pool.data<float>() + slot * kv_width, kv_width, v.data<float>() + t * kv_width);
    }
    Tensor qb = sc.q.slice_rows(row, row + queries[b]).clone();
    Tensor pos = Tensor::zeros({queries[b]}, DType::i32);
    for (std::int64_t i = 0; i < queries[b]; ++i) {
      pos.data<std::int32_t>()[i] = static_cast<std::int32_t>(lengths[b] - queries[b] + i);
      sc.q_pos.data<std::int32_t>()[row + i] = pos.data<std::int32_t>()[i];
      sc.q_seq.data<std::int32_t>()[row + i] = static_cast<std::int32_t>(b);
    }
    Tensor out = Tensor::zeros({queries[b], q_width}, DType::f32);
    EXPECT_TRUE(cpu.attention(qb, k, v, pos, sc.sinks, p, out).ok());
    std::copy_n(out.data<float>(), out.numel(), sc.want.data<float>() + row * q_width);
    row += queries[b];
  }
  return sc;
}

}  // namespace day0::optest
