// RoPE's q rotation deferred to the tensor-core attention (rope_kv_write_cuda's q_cos_sin table, then
// AttentionSplit::q_cos_sin): the output, its bf16 copy, both KV pools and the error flag are the bits of q rotated by
// the rope kernel and then attended; prompts and mixed batches, block sizes 16 and 7, windows, sinks, partial rotary
// dims, a row past its table, ragged last tiles (rows past S). Skipped visibly without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "ops/cuda/attention_cuda.h"
#include "ops/cuda/attention_tc_cuda.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/op_test_util.h"
#include "ops/paged_kv_scenario.h"
#include "paged_attention_run.h"

namespace day0 {
namespace {

using cudatest::download;
using cudatest::make_context;
using cudatest::poisoned;
using cudatest::same_bits;
using cudatest::upload;
using cudatest::zeroed;

// A scenario, its rotary dim, and whether one query sits at a position past its table (a NaN row, no slot).
struct RopeCase {
  cudatest::PagedCase paged;
  int rotary_dim;
  bool bad_row;
};

// Each query's own slot (its position through its sequence's table), -1 past the table.
std::vector<std::int32_t> step_slots(const optest::PagedScenario& sc) {
  const std::int64_t S = sc.q.size(0), max_blocks = sc.tables.size(1);
  std::vector<std::int32_t> slots(static_cast<std::size_t>(S));
  for (std::int64_t s = 0; s < S; ++s) {
    const std::int64_t pos = sc.q_pos.data<std::int32_t>()[s], seq = sc.q_seq.data<std::int32_t>()[s];
    const std::int64_t b = pos / sc.block_size;
    const std::int32_t id = b < max_blocks ? sc.tables.data<std::int32_t>()[seq * max_blocks + b] : -1;
    slots[static_cast<std::size_t>(s)] =
        id < 0 ? -1 : static_cast<std::int32_t>(id * sc.block_size + pos % sc.block_size);
  }
  return slots;
}

// What one step leaves: the attention output and its bf16 copy, both pools, q and the error flag, on the host.
struct Step {
  Tensor out, out_bf16, k_pool, v_pool, q;
  std::int32_t flag = 0;
};

// One step as the executor runs it: rope_kv_write_cuda over the step's q, k, v into bf16 pools, then the tensor-core
// attention with bf16 operands over them; q rotated by the rope kernel, or (defer_q) left with its cos/sin table.
void run_step(CudaContext& ctx, const optest::PagedScenario& sc, const Tensor& k, const Tensor& v, const Tensor& inv,
              float attention_factor, const std::vector<std::int32_t>& slots, bool defer_q, Step& step) {
  const AttentionParams& p = sc.p;
  const std::int64_t S = sc.q.size(0), half = inv.size(0);
  Tensor q = upload(ctx, sc.q), dk = upload(ctx, k);
  Tensor k_pool = upload(ctx, optest::to_bf16(sc.k_pool)), v_pool = upload(ctx, optest::to_bf16(sc.v_pool));
  Tensor flag = zeroed(ctx, {1}, DType::i32);
  const Tensor positions = upload(ctx, sc.q_pos);
  AttentionSplit split;
  split.tensor_cores = split.bf16_operands = true;
  split.out_bf16 = poisoned(ctx, sc.want.shape(), DType::bf16);
  ASSERT_TRUE(attention_rotates_q(q, k_pool, v_pool, p, split, half)) << "the tensor-core bf16 kernel must serve";
  if (defer_q) split.q_cos_sin = poisoned(ctx, {S, 2 * half}, DType::f32);
  D0_ASSERT_OK(rope_kv_write_cuda(q, p.n_heads, dk, p.n_kv_heads, upload(ctx, v), p.head_dim, positions,
                                  upload(ctx, inv), attention_factor, upload(ctx, optest::i32_tensor(slots)), k_pool,
                                  v_pool, flag, ctx.stream(), defer_q ? &split.q_cos_sin : nullptr));
  Tensor out = poisoned(ctx, sc.want.shape(), DType::f32);
  const PagedKv kv{upload(ctx, sc.tables), upload(ctx, sc.q_seq), sc.block_size};
  D0_ASSERT_OK(
      paged_attention_cuda(q, k_pool, v_pool, positions, kv, upload(ctx, sc.sinks), p, out, ctx.stream(), split));
  step.out = download(ctx, out);
  step.out_bf16 = download(ctx, split.out_bf16);
  step.k_pool = download(ctx, k_pool);
  step.v_pool = download(ctx, v_pool);
  step.q = download(ctx, q);
  step.flag = cudatest::download_flag(ctx, flag);
}

// Which steps may leave q unrotated: the tensor-core kernel with bf16 operands over a bf16 pool, one split, lane
// pairs within a thread's fragment (a rotary half of 8, 16, 24 or 32). Host tensors: the decision reads shapes only.
TEST(CudaAttentionTcRope, q_is_left_to_the_attention_only_where_the_bf16_tensor_core_kernel_serves) {
  const AttentionParams gpt_oss{64, 8, 64, 0, 0.125f};
  const Tensor q = Tensor::zeros({64, 64 * 64}, DType::f32), pool = Tensor::zeros({16, 8 * 64}, DType::bf16);
  const Tensor f32_pool = Tensor::zeros({16, 8 * 64}, DType::f32), short_q = Tensor::zeros({63, 64 * 64}, DType::f32);
  AttentionSplit split;
  split.tensor_cores = split.bf16_operands = true;
  EXPECT_TRUE(attention_rotates_q(q, pool, pool, gpt_oss, split, 32));
  for (const std::int64_t half : {8, 16, 24}) EXPECT_TRUE(attention_rotates_q(q, pool, pool, gpt_oss, split, half));
  for (const std::int64_t half : {0, 4, 12, 40}) EXPECT_FALSE(attention_rotates_q(q, pool, pool, gpt_oss, split, half));
  EXPECT_FALSE(attention_rotates_q(short_q, pool, pool, gpt_oss, split, 32)) << "63 rows: the per-query kernel";
  EXPECT_FALSE(attention_rotates_q(q, f32_pool, f32_pool, gpt_oss, split, 32)) << "f32 pool: f16 operands";
  AttentionSplit f16 = split, two = split, none = split;
  f16.bf16_operands = false;
  two.splits = 2;
  none.tensor_cores = false;
  for (const AttentionSplit& s : {f16, two, none}) EXPECT_FALSE(attention_rotates_q(q, pool, pool, gpt_oss, s, 32));
}

TEST(CudaAttentionTcRope, q_rotated_in_the_attention_gives_the_bits_of_rope_then_attention) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(7311);
  const std::vector<RopeCase> cases = {
      {{{64, 8, 64, 0, 0.125f}, 16, {300}, {300}}, 64, false},  // gpt-oss: one prompt, a ragged tile
      {{{64, 8, 64, 0, 0.125f}, 16, {400, 129, 33, 1}, {150, 70, 33, 1}}, 64, true},  // tiles straddle sequences
      {{{64, 8, 64, 128, 0.125f}, 16, {700, 90}, {260, 90}}, 64, false},  // sliding window, chunk at an offset
      {{{8, 1, 64, 0, 0.125f}, 7, {200, 64}, {130, 64}}, 64, true},       // block size 7, one KV head
      {{{8, 1, 64, 5, 0.3f}, 7, {100}, {64}}, 32, false},                 // a short window; rotary half 16
      {{{16, 2, 64, 0, 0.125f}, 16, {150}, {150}}, 48, false},            // rotary half 24: chunk pairs 3 apart
      {{{16, 2, 64, 128, 0.125f}, 7, {333}, {90}}, 16, true},             // rotary half 8
  };
  for (const RopeCase& c : cases) {
    const cudatest::PagedCase& pc = c.paged;
    auto sc = optest::make_paged_scenario(rng, pc.p, pc.block_size, pc.lengths, pc.queries, /*with_sinks=*/true,
                                          /*bf16_kv=*/true);
    const std::int64_t S = sc.q.size(0), kv_width = std::int64_t(pc.p.n_kv_heads) * pc.p.head_dim;
    // The bad row: a position past its sequence's table.
    if (c.bad_row) sc.q_pos.data<std::int32_t>()[S / 3] = 1 << 20;
    const std::vector<std::int32_t> slots = step_slots(sc);
    const Tensor k = optest::random_f32({S, kv_width}, rng), v = optest::random_f32({S, kv_width}, rng);
    const Tensor inv = optest::gpt_oss_inv_freq(c.rotary_dim);
    SCOPED_TRACE(::testing::Message() << "heads " << pc.p.n_heads << "/" << pc.p.n_kv_heads << " block "
                                      << pc.block_size << " window " << pc.p.sliding_window << " rotary "
                                      << c.rotary_dim << " rows " << S << " bad row " << c.bad_row);
    ASSERT_TRUE(attention_tc_fits(S, pc.p));
    Step want, got;
    run_step(*ctx, sc, k, v, inv, 1.3465736f, slots, /*defer_q=*/false, want);
    run_step(*ctx, sc, k, v, inv, 1.3465736f, slots, /*defer_q=*/true, got);
    EXPECT_TRUE(same_bits(got.out, want.out)) << "attention output";
    EXPECT_TRUE(same_bits(got.out_bf16, want.out_bf16)) << "its bf16 copy";
    EXPECT_TRUE(same_bits(got.k_pool, want.k_pool)) << "k pool";
    EXPECT_TRUE(same_bits(got.v_pool, want.v_pool)) << "v pool";
    EXPECT_EQ(got.flag, want.flag);
    EXPECT_EQ(want.flag, c.bad_row ? 1 : 0);
    EXPECT_TRUE(same_bits(got.q, sc.q)) << "q is left unrotated";
    EXPECT_FALSE(same_bits(want.q, sc.q)) << "the rope kernel rotated q on the other path";
    // NaN only in the bad row (attention rows there are NaN by contract), none elsewhere.
    EXPECT_EQ(cudatest::count_nan(got.out), c.bad_row ? std::int64_t(pc.p.n_heads) * pc.p.head_dim : 0);
  }
}

// The table is written by the rope kernel's both forms alike: the per-token form (decode sizes) gives the rows form's
// bits for the same tokens, leaves q as it is, and rotates k and writes the pools as without the table.
TEST(CudaAttentionTcRope, both_rope_forms_write_the_same_cos_sin_table_and_leave_q_unrotated) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(7312);
  const int n_heads = 64, n_kv = 8, d = 64;
  const std::int64_t S = 70, few = 3, n_slots = 2 * S, w = std::int64_t(n_kv) * d;
  for (const int rotary_dim : {64, 32}) {
    SCOPED_TRACE(::testing::Message() << "rotary " << rotary_dim);
    const Tensor inv = optest::gpt_oss_inv_freq(rotary_dim);
    std::vector<std::int32_t> pos(S), slots(S);
    for (std::int64_t s = 0; s < S; ++s) {
      pos[s] = static_cast<std::int32_t>(rng() % 131072);
      slots[s] = static_cast<std::int32_t>(2 * s + 1);
    }
    const Tensor q = optest::random_f32({S, n_heads * d}, rng), k = optest::random_f32({S, w}, rng),
                 v = optest::random_f32({S, w}, rng);
    // tokens [0, n) with the table or without: the table, q, k and both pools.
    auto run = [&](std::int64_t n, bool table, std::vector<Tensor>& got) {
      const std::vector<std::int32_t> p(pos.begin(), pos.begin() + n), sl(slots.begin(), slots.begin() + n);
      Tensor dq = upload(*ctx, q.slice_rows(0, n).clone()), dk = upload(*ctx, k.slice_rows(0, n).clone());
      Tensor kp = zeroed(*ctx, {n_slots, w}, DType::bf16), vp = zeroed(*ctx, {n_slots, w}, DType::bf16);
      Tensor flag = zeroed(*ctx, {1}, DType::i32), cs = poisoned(*ctx, {n, rotary_dim}, DType::f32);
      D0_ASSERT_OK(rope_kv_write_cuda(dq, n_heads, dk, n_kv, upload(*ctx, v.slice_rows(0, n).clone()), d,
                                      upload(*ctx, optest::i32_tensor(p)), upload(*ctx, inv), 1.3465736f,
                                      upload(*ctx, optest::i32_tensor(sl)), kp, vp, flag, ctx->stream(),
                                      table ? &cs : nullptr));
      got = {download(*ctx, cs), download(*ctx, dq), download(*ctx, dk), download(*ctx, kp), download(*ctx, vp)};
      EXPECT_EQ(cudatest::download_flag(*ctx, flag), 0);
    };
    std::vector<Tensor> rows, rows_plain, token, token_plain;
    run(S, true, rows);
    run(S, false, rows_plain);
    run(few, true, token);
    run(few, false, token_plain);
    EXPECT_EQ(cudatest::count_nan(rows[0]), 0) << "every token's row of the table written";
    EXPECT_TRUE(same_bits(token[0], rows[0].slice_rows(0, few).clone())) << "the per-token form's table";
    EXPECT_TRUE(same_bits(rows[1], q)) << "q left as it is (rows form)";
    EXPECT_TRUE(same_bits(token[1], q.slice_rows(0, few).clone())) << "q left as it is (per-token form)";
    for (int i = 2; i < 5; ++i) {
      EXPECT_TRUE(same_bits(rows[i], rows_plain[i])) << "k or a pool, rows form, output " << i;
      EXPECT_TRUE(same_bits(token[i], token_plain[i])) << "k or a pool, per-token form, output " << i;
    }
  }
}

}  // namespace
}  // namespace day0
