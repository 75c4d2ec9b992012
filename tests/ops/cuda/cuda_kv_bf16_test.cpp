// The bf16 KV cache (BackendOptions::kv_cache_dtype) on CUDA: writes round K and V to bf16 (round to nearest even)
// and the tensor-core prefill and per-head kernels widen them back exactly, so attention over bf16 pools gives the
// bits of attention over f32 pools that hold the same rounded values (with and without splits). GQA-group decode
// over bf16 pools runs on tensor cores (attention_group_tc_cuda.h, its own tests): within their tolerance of the
// f32 kernel here. The f32 path itself is checked against the CPU reference in the other tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "cuda_test_util.h"
#include "ops/cuda/attention_cuda.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/op_test_util.h"
#include "ops/paged_kv_scenario.h"
#include "paged_attention_run.h"

namespace day0 {
namespace {

using cudatest::download;
using cudatest::make_context;
using cudatest::poisoned;
using cudatest::upload;
using cudatest::zeroed;

// The pool's values rounded to bf16: as bf16 bits, and as f32 holding the same values.
struct RoundedPool {
  Tensor bf16, f32;
};

RoundedPool rounded(const Tensor& pool) {
  RoundedPool r{Tensor::zeros(pool.shape(), DType::bf16), Tensor::zeros(pool.shape(), DType::f32)};
  for (std::int64_t i = 0; i < pool.numel(); ++i) {
    const std::uint16_t b = f32_to_bf16(pool.data<float>()[i]);
    r.bf16.data<std::uint16_t>()[i] = b;
    r.f32.data<float>()[i] = bf16_to_f32(b);
  }
  return r;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

TEST(CudaKvBf16, attention_over_bf16_pools_matches_f32_pools_holding_the_rounded_values) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(31);
  struct Case {
    cudatest::PagedCase c;
    bool tensor_cores;
    bool same_bits = true;  // false: the GQA-group shapes, whose bf16 form is the tensor-core decode kernel
  };
  const std::vector<Case> cases = {
      // A prefill chunk of 70 rows at d = 64: the tensor-core kernel.
      {{{64, 8, 64, 0, 0.125f}, 16, {400, 129, 33}, {1, 70, 33}}, true},
      // gpt-oss decode (GQA groups of 8), windowed and not: the group kernels.
      {{{64, 8, 64, 0, 0.125f}, 16, {300, 17, 64, 5, 90, 33, 200, 7, 1000}, {1, 1, 1, 1, 1, 1, 1, 1, 1}}, false, false},
      {{{64, 8, 64, 128, 0.125f}, 16, {2000, 3}, {1, 1}}, false, false},
      // Small odd shapes: the per-head kernel (vector and scalar key loads).
      {{{4, 2, 16, 0, 0.25f}, 1, {5, 3, 9}, {1, 3, 2}}, false},
      {{{6, 3, 24, 5, 0.2f}, 7, {50, 8, 14}, {3, 8, 1}}, false},
      {{{3, 1, 6, 0, 0.4f}, 4, {20, 9}, {2, 1}}, false},
  };
  for (const Case& t : cases)
    for (bool sinks : {false, true})
      for (int splits : {1, 3}) {
        if (t.tensor_cores && splits > 1) continue;  // the tensor-core kernel does not split
        auto sc = optest::make_paged_scenario(rng, t.c.p, t.c.block_size, t.c.lengths, t.c.queries, sinks);
        const RoundedPool k = rounded(sc.k_pool), v = rounded(sc.v_pool);
        AttentionSplit split;
        split.splits = splits;
        split.tensor_cores = t.tensor_cores;
        SCOPED_TRACE(::testing::Message() << "heads " << t.c.p.n_heads << " d " << t.c.p.head_dim << " sinks "
                                          << sinks << " splits " << splits);
        auto run = [&](const Tensor& k_pool, const Tensor& v_pool) {
          if (split.splits > 1)
            split.partials = poisoned(*ctx, {attention_partials_floats(sc.q.size(0), t.c.p, split.splits)}, DType::f32);
          sc.k_pool = k_pool;
          sc.v_pool = v_pool;
          return cudatest::run_paged_attention(*ctx, sc, sinks, split);
        };
        const Tensor want = run(k.f32, v.f32), got = run(k.bf16, v.bf16);
        EXPECT_EQ(cudatest::count_nan(want), 0);
        if (t.same_bits)
          EXPECT_TRUE(same_bits(got, want));
        else
          EXPECT_LE(cudatest::relative_norm_error(got, want), 4e-5);  // cuda_attention_group_tc_test's tolerance
      }
}

TEST(CudaKvBf16, kv_write_and_rope_kv_write_store_the_rounded_values) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(32);
  const std::int64_t S = 3, n_heads = 64, n_kv = 8, d = 64, w = n_kv * d;
  const Tensor k = optest::random_f32({S, w}, rng), v = optest::random_f32({S, w}, rng);
  const Tensor q = optest::random_f32({S, n_heads * d}, rng);
  const Tensor slots = upload(*ctx, optest::i32_tensor({5, 0, 7}));
  Tensor flag = zeroed(*ctx, {1}, DType::i32);
  // Each form once into f32 pools and once into bf16 pools: the bf16 pool holds the f32 pool's values rounded.
  auto check = [&](const Tensor& kp32, const Tensor& vp32, const Tensor& kp16, const Tensor& vp16) {
    const RoundedPool k_want = rounded(download(*ctx, kp32)), v_want = rounded(download(*ctx, vp32));
    EXPECT_TRUE(same_bits(download(*ctx, kp16), k_want.bf16));
    EXPECT_TRUE(same_bits(download(*ctx, vp16), v_want.bf16));
  };
  {
    Tensor kp32 = zeroed(*ctx, {8, w}, DType::f32), vp32 = zeroed(*ctx, {8, w}, DType::f32);
    Tensor kp16 = zeroed(*ctx, {8, w}, DType::bf16), vp16 = zeroed(*ctx, {8, w}, DType::bf16);
    D0_ASSERT_OK(kv_write_cuda(upload(*ctx, k), upload(*ctx, v), slots, kp32, vp32, flag, ctx->stream()));
    D0_ASSERT_OK(kv_write_cuda(upload(*ctx, k), upload(*ctx, v), slots, kp16, vp16, flag, ctx->stream()));
    check(kp32, vp32, kp16, vp16);
    Tensor mixed = zeroed(*ctx, {8, w}, DType::f32);
    EXPECT_FALSE(kv_write_cuda(upload(*ctx, k), upload(*ctx, v), slots, kp16, mixed, flag, ctx->stream()).ok());
  }
  {
    std::vector<float> inv(d / 2);
    for (std::int64_t i = 0; i < d / 2; ++i) inv[i] = std::pow(10000.f, -2.f * float(i) / float(d));
    Tensor inv_host = Tensor::zeros({d / 2}, DType::f32);
    std::copy(inv.begin(), inv.end(), inv_host.data<float>());
    const Tensor d_inv = upload(*ctx, inv_host), positions = upload(*ctx, optest::i32_tensor({0, 17, 4000}));
    Tensor kp32 = zeroed(*ctx, {8, w}, DType::f32), vp32 = zeroed(*ctx, {8, w}, DType::f32);
    Tensor kp16 = zeroed(*ctx, {8, w}, DType::bf16), vp16 = zeroed(*ctx, {8, w}, DType::bf16);
    for (Tensor* kp : {&kp32, &kp16}) {
      Tensor d_q = upload(*ctx, q), d_k = upload(*ctx, k);
      D0_ASSERT_OK(rope_kv_write_cuda(d_q, n_heads, d_k, n_kv, upload(*ctx, v), d, positions, d_inv, 1.f, slots, *kp,
                                      kp == &kp32 ? vp32 : vp16, flag, ctx->stream()));
    }
    check(kp32, vp32, kp16, vp16);
  }
  EXPECT_EQ(cudatest::download_flag(*ctx, flag), 0);
}

}  // namespace
}  // namespace day0
