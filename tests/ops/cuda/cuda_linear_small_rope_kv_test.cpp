// linear_small_rope_kv_cuda (q/k/v with the rope and the KV write in the small-M kernel's epilogue) against
// linear_small_cuda followed by rope_kv_write_cuda, bit for bit: the q, k, v rows, both pools and the error flag.
// Head shapes that take each CTA shape (the wide one, the deep one, the cp.async ring of q/k/v's many row tiles),
// one token to 37 (slices of 16), biases f32 / bf16 / none, f32 and bf16 pools, a slot outside the pool. Skipped
// visibly without a GPU; the shape checks run everywhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/linear_small_cuda.h"
#include "ops/op_test_util.h"

namespace day0 {
namespace {

using cudatest::download;
using cudatest::make_context;
using cudatest::poisoned;
using cudatest::same_bits;
using cudatest::upload;
using cudatest::zeroed;
using optest::Bias;
using optest::random_f32;
using optest::to_bf16;

struct Case {
  int n_heads, n_kv_heads, head_dim;
  std::int64_t K;
};

// q, k, v outputs and the two pools of one path.
struct Outputs {
  std::vector<LinearTarget> qkv;
  Tensor k_pool, v_pool, flag;
};

TEST(CudaLinearSmallRopeKv, gives_the_bits_of_the_linear_then_rope_kv_write) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(4099);
  // Row tiles: 8 (wide CTAs), 128 (deep), 320 (the ring: more than two an SM on an H200).
  for (const Case c : {Case{4, 2, 16, 72}, Case{24, 4, 64, 136}, Case{64, 8, 64, 200}})
    for (const std::int64_t M : {1, 5, 16, 37})
      for (const DType pool_dtype : {DType::bf16, DType::f32}) {
        SCOPED_TRACE(::testing::Message() << "heads " << c.n_heads << "/" << c.n_kv_heads << " d " << c.head_dim
                                          << " K " << c.K << " M " << M << " pool " << dtype_name(pool_dtype));
        const auto mark = ctx->arena().mark();
        const std::int64_t qw = std::int64_t(c.n_heads) * c.head_dim, w = std::int64_t(c.n_kv_heads) * c.head_dim;
        const std::int64_t n_slots = 2 * M + 3;
        std::vector<std::int32_t> pos(M), order(n_slots);
        for (auto& p : pos) p = static_cast<std::int32_t>(rng() % 131072);
        pos[0] = 0;
        std::iota(order.begin(), order.end(), 0);
        std::shuffle(order.begin(), order.end(), rng);
        std::vector<std::int32_t> slots(order.begin(), order.begin() + M);
        const Tensor x = upload(*ctx, random_f32({M, c.K}, rng));
        const Tensor positions = upload(*ctx, optest::i32_tensor(pos)),
                     inv = upload(*ctx, optest::gpt_oss_inv_freq(c.head_dim));
        const std::int64_t rows[3] = {qw, w, w};
        const Bias biases[3] = {Bias::f32, Bias::bf16, Bias::none};
        Tensor weight[3], bias[3];
        for (int i = 0; i < 3; ++i) {
          weight[i] = upload(*ctx, to_bf16(random_f32({rows[i], c.K}, rng)));
          if (biases[i] != Bias::none) bias[i] = upload(*ctx, optest::random_bias(rows[i], biases[i], rng));
        }
        auto outputs = [&] {
          Outputs o;
          for (int i = 0; i < 3; ++i) o.qkv.push_back({weight[i], bias[i], poisoned(*ctx, {M, rows[i]}, DType::f32)});
          o.k_pool = zeroed(*ctx, {n_slots, w}, pool_dtype);
          o.v_pool = zeroed(*ctx, {n_slots, w}, pool_dtype);
          o.flag = zeroed(*ctx, {1}, DType::i32);
          return o;
        };
        auto expect_same = [&](const Outputs& a, const Outputs& b, const char* what) {
          SCOPED_TRACE(what);
          for (int i = 0; i < 3; ++i)
            EXPECT_TRUE(same_bits(download(*ctx, a.qkv[i].out), download(*ctx, b.qkv[i].out))) << "target " << i;
          EXPECT_TRUE(same_bits(download(*ctx, a.k_pool), download(*ctx, b.k_pool))) << "k pool";
          EXPECT_TRUE(same_bits(download(*ctx, a.v_pool), download(*ctx, b.v_pool))) << "v pool";
          EXPECT_EQ(cudatest::download_flag(*ctx, a.flag), cudatest::download_flag(*ctx, b.flag));
        };
        const float factor = 1.3465736f;
        for (const bool bad_slot : {false, true}) {
          if (bad_slot) slots[M / 2] = static_cast<std::int32_t>(n_slots + 5);
          const Tensor d_slots = upload(*ctx, optest::i32_tensor(slots));
          Outputs two = outputs(), one = outputs();
          D0_ASSERT_OK(linear_small_cuda(x, two.qkv, ctx->sm_count(), ctx->stream()));
          Tensor q = two.qkv[0].out, k = two.qkv[1].out;
          D0_ASSERT_OK(rope_kv_write_cuda(q, c.n_heads, k, c.n_kv_heads, two.qkv[2].out, c.head_dim, positions, inv,
                                          factor, d_slots, two.k_pool, two.v_pool, two.flag, ctx->stream()));
          const RopeKvArgs r{c.n_heads, c.n_kv_heads, c.head_dim, positions, inv,
                             factor,    d_slots,      one.k_pool, one.v_pool};
          ASSERT_TRUE(linear_small_rope_kv_fits(x, one.qkv, r, kLinearSmallMaxSlicedRows));
          D0_ASSERT_OK(linear_small_rope_kv_cuda(x, one.qkv, r, one.flag, ctx->sm_count(), ctx->stream()));
          EXPECT_EQ(cudatest::download_flag(*ctx, one.flag), bad_slot ? 1 : 0);
          expect_same(one, two, bad_slot ? "a slot outside the pool" : "every slot in the pool");
        }
        D0_ASSERT_OK(ctx->arena().release(mark));  // this case's tensors: the next ones reuse the arena
      }
}

// What the fused form does not take goes to the two launches (CudaOps): a partial rotary dim, half a rotary dim
// that is not a multiple of 8, weights that are not the heads' shapes, pools that are neither f32 nor bf16.
TEST(LinearSmallRopeKv, takes_only_full_rotary_q_k_v_of_the_heads_shapes) {
  const std::int64_t M = 2, K = 64;
  const Tensor x = Tensor::zeros({M, K}, DType::f32);
  auto targets = [&](std::int64_t q_rows, std::int64_t kv_rows) {
    std::vector<LinearTarget> t;
    for (const std::int64_t n : {q_rows, kv_rows, kv_rows})
      t.push_back({Tensor::zeros({n, K}, DType::bf16), Tensor(), Tensor::zeros({M, n}, DType::f32)});
    return t;
  };
  const Tensor pool = Tensor::zeros({8, 2 * 64}, DType::bf16);
  auto args = [&](int head_dim, std::int64_t half, const Tensor& k_pool) {
    return RopeKvArgs{4, 2, head_dim, Tensor(), Tensor::zeros({half}, DType::f32), 1.f, Tensor(), k_pool, k_pool};
  };
  EXPECT_TRUE(linear_small_rope_kv_fits(x, targets(256, 128), args(64, 32, pool)));
  EXPECT_FALSE(linear_small_rope_kv_fits(x, targets(256, 128), args(64, 16, pool))) << "partial rotary";
  EXPECT_FALSE(linear_small_rope_kv_fits(x, targets(48, 24), args(12, 6, pool))) << "half not a multiple of 8";
  EXPECT_FALSE(linear_small_rope_kv_fits(x, targets(256, 64), args(64, 32, pool))) << "k/v rows not kv heads";
  EXPECT_FALSE(linear_small_rope_kv_fits(x, targets(128, 128), args(64, 32, pool))) << "q rows not q heads";
  EXPECT_FALSE(linear_small_rope_kv_fits(x, targets(256, 128), args(64, 32, Tensor::zeros({8, 128}, DType::i32))))
      << "pool dtype";
  auto two = targets(256, 128);
  two.pop_back();
  EXPECT_FALSE(linear_small_rope_kv_fits(x, two, args(64, 32, pool))) << "two targets";
  EXPECT_FALSE(linear_small_rope_kv_fits(Tensor::zeros({M, K + 4}, DType::f32), targets(256, 128), args(64, 32, pool)))
      << "K not a multiple of 8";
}

}  // namespace
}  // namespace day0
