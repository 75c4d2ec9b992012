// CudaOps::linears_rope_kv_write where q, k and v (and their biases) lie back to back, as place_weights puts them:
// at decode batches past the small-M kernel's rows (17-128) one GEMM over the three, then the RoPE kernel reading
// its rows (rope_kv_write_from_qkv_cuda). Against CpuOps' linears then rope_kv_write on x rounded to bf16: q, k, v
// and both KV pools; and the one GEMM seen in the profile, so the test fails if the fused path stops being taken.
// Skipped visibly without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/op_test_util.h"

namespace day0 {
namespace {

// The RoPE kernel reading one GEMM's rows [S, q | k | v] gives the bits of rope_kv_write_cuda on the three ranges
// copied out: q and k rotated (lanes past a partial rotary dim as read), v as read, both pools (f32 and bf16), k and
// v written to their own rows; a slot past the pool raises the flag and leaves the pools' rows as they were.
TEST(CudaQkvGemm, rope_from_one_gemms_rows_gives_the_bits_of_rope_kv_write_on_the_three_ranges) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  using cudatest::download;
  using cudatest::upload;
  using cudatest::zeroed;
  auto ctx = cudatest::make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(7312);
  struct Case {
    int n_heads, n_kv_heads, head_dim, rotary_dim;
  };
  for (const Case c : {Case{64, 8, 64, 64}, Case{3, 1, 80, 32}, Case{10, 5, 64, 64}})
    for (const std::int64_t S : {1, 17, 70, 128})
      for (const DType pool_dtype : {DType::f32, DType::bf16}) {
        SCOPED_TRACE(::testing::Message() << "heads " << c.n_heads << " d " << c.head_dim << " S " << S << " pool "
                                          << dtype_name(pool_dtype));
        const Tensor inv = optest::gpt_oss_inv_freq(c.rotary_dim);
        const std::int64_t qw = std::int64_t(c.n_heads) * c.head_dim, w = std::int64_t(c.n_kv_heads) * c.head_dim;
        const std::int64_t N = qw + 2 * w, n_slots = S + 5;
        std::vector<std::int32_t> pos(S), slots(n_slots);
        for (auto& p : pos) p = static_cast<std::int32_t>(rng() % 131072);
        std::iota(slots.begin(), slots.end(), 0);  // distinct slots: a shared one is written by whichever lands last
        std::shuffle(slots.begin(), slots.end(), rng);
        slots.resize(S);
        slots[S / 2] = static_cast<std::int32_t>(n_slots + 2);  // past the pool
        const Tensor rows = optest::random_f32({S, N}, rng), pool0 = optest::random_f32({n_slots, w}, rng);
        const Tensor pool_host = pool_dtype == DType::bf16 ? optest::to_bf16(pool0) : pool0;
        const Tensor positions = upload(*ctx, optest::i32_tensor(pos)), d_inv = upload(*ctx, inv);
        const Tensor d_slots = upload(*ctx, optest::i32_tensor(slots));
        // The three ranges copied out on the host, then the kernel as it is.
        Tensor q_host = Tensor::zeros({S, qw}, DType::f32), k_host = Tensor::zeros({S, w}, DType::f32);
        Tensor v_host = Tensor::zeros({S, w}, DType::f32);
        for (std::int64_t s = 0; s < S; ++s) {
          const float* r = rows.data<float>() + s * N;
          std::copy(r, r + qw, q_host.data<float>() + s * qw);
          std::copy(r + qw, r + qw + w, k_host.data<float>() + s * w);
          std::copy(r + qw + w, r + N, v_host.data<float>() + s * w);
        }
        Tensor want_q = upload(*ctx, q_host), want_k = upload(*ctx, k_host);
        Tensor want_kp = upload(*ctx, pool_host), want_vp = upload(*ctx, pool_host);
        Tensor want_flag = zeroed(*ctx, {1}, DType::i32);
        D0_ASSERT_OK(rope_kv_write_cuda(want_q, c.n_heads, want_k, c.n_kv_heads, upload(*ctx, v_host), c.head_dim,
                                        positions, d_inv, 1.25f, d_slots, want_kp, want_vp, want_flag, ctx->stream()));
        Tensor q = zeroed(*ctx, {S, qw}, DType::f32), k = zeroed(*ctx, {S, w}, DType::f32);
        Tensor v = zeroed(*ctx, {S, w}, DType::f32), flag = zeroed(*ctx, {1}, DType::i32);
        Tensor kp = upload(*ctx, pool_host), vp = upload(*ctx, pool_host);
        ASSERT_TRUE(rope_kv_write_from_qkv_fits(c.n_heads, c.n_kv_heads, c.head_dim, d_inv, q, k, v, kp, vp));
        D0_ASSERT_OK(rope_kv_write_from_qkv_cuda(upload(*ctx, rows), q, c.n_heads, k, c.n_kv_heads, v, c.head_dim,
                                                 positions, d_inv, 1.25f, d_slots, kp, vp, flag, ctx->stream()));
        EXPECT_EQ(cudatest::download_flag(*ctx, flag), 1);
        EXPECT_EQ(cudatest::download_flag(*ctx, want_flag), 1);
        const std::vector<std::pair<Tensor, Tensor>> pairs = {
            {q, want_q}, {k, want_k}, {v, upload(*ctx, v_host)}, {kp, want_kp}, {vp, want_vp}};
        const char* names[] = {"q", "k", "v", "k pool", "v pool"};
        for (size_t i = 0; i < pairs.size(); ++i)
          EXPECT_TRUE(cudatest::same_bits(download(*ctx, pairs[i].first), download(*ctx, pairs[i].second))) << names[i];
      }
}

TEST(CudaQkvGemm, adjacent_q_k_v_run_as_one_gemm_and_give_the_cpu_rope_and_pools) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  const std::unique_ptr<CudaOps> ops = cudatest::make_cuda_ops();
  ASSERT_TRUE(ops);
  CudaOps& cuda = *ops;
  CpuOps cpu;
  std::mt19937 rng(7311);
  // gpt-oss's heads; K 1,536 makes q 12 MiB of bf16, past the small-M kernel's rows from 17 on.
  const int n_heads = 64, n_kv_heads = 8, head_dim = 64;
  const std::int64_t K = 1536, qw = n_heads * head_dim, kvw = n_kv_heads * head_dim, N = qw + 2 * kvw;
  const std::int64_t n_slots = 300;
  const Tensor w = optest::to_bf16(optest::random_f32({N, K}, rng)), b = optest::random_f32({N}, rng);
  const Tensor inv_freq = optest::gpt_oss_inv_freq(head_dim);
  const float attention_factor = 1.3465736f;
  auto up = [&](const Tensor& t) {
    auto d = cuda.upload(t, "operand");
    EXPECT_TRUE(d.ok()) << d.error().message;
    return d.ok() ? *d : Tensor();
  };
  // One upload each, then row slices: the three weights (and biases) back to back, as placed.
  const Tensor d_w = up(w), d_b = up(b), d_inv = up(inv_freq);
  const std::vector<std::pair<std::int64_t, std::int64_t>> ranges = {{0, qw}, {qw, qw + kvw}, {qw + kvw, N}};
  for (const std::int64_t S : {std::int64_t{17}, std::int64_t{64}, std::int64_t{128}}) {
    SCOPED_TRACE("S " + std::to_string(S));
    const Tensor x = optest::random_f32({S, K}, rng);
    std::vector<std::int32_t> positions(S), slots(S);
    for (std::int64_t s = 0; s < S; ++s) {
      positions[s] = static_cast<std::int32_t>(rng() % 4096);
      slots[s] = static_cast<std::int32_t>((s * 7 + 3) % n_slots);  // distinct: 7 and 300 share no factor
    }
    const Tensor pool0 = optest::random_f32({n_slots, kvw}, rng);

    std::vector<LinearTarget> targets;
    for (const auto& [r0, r1] : ranges)
      targets.push_back({d_w.slice_rows(r0, r1), d_b.slice_rows(r0, r1), up(Tensor::zeros({S, r1 - r0}, DType::f32))});
    Tensor k_pool = up(pool0), v_pool = up(pool0);
    const RopeKvArgs rope{n_heads,
                          n_kv_heads,
                          head_dim,
                          up(optest::i32_tensor(positions)),
                          d_inv,
                          attention_factor,
                          up(optest::i32_tensor(slots)),
                          k_pool,
                          v_pool};
    cuda.enable_profiling(true);
    D0_ASSERT_OK(cuda.linears_rope_kv_write(up(x), targets, rope, nullptr));
    cuda.enable_profiling(false);
    auto spans = cuda.profile_report();
    ASSERT_TRUE(spans.ok()) << spans.error().message;
    const std::string one_gemm = "N " + std::to_string(N) + " K";
    EXPECT_TRUE(std::any_of(spans->begin(), spans->end(), [&](const ProfileEntry& e) {
      return e.span.find(one_gemm) != std::string::npos;
    })) << "no GEMM over the three weights";

    // The CPU: each linear on x rounded to bf16, then the rope and the pool writes.
    const Tensor xb = optest::to_bf16(x).to_f32();
    std::vector<Tensor> want;
    for (const auto& [r0, r1] : ranges) {
      Tensor out = Tensor::zeros({S, r1 - r0}, DType::f32);
      D0_ASSERT_OK(cpu.linear(xb, w.slice_rows(r0, r1).to_f32(), b.slice_rows(r0, r1), out));
      want.push_back(out);
    }
    Tensor cpu_k_pool = pool0.clone(), cpu_v_pool = pool0.clone();
    D0_ASSERT_OK(cpu.rope_kv_write(want[0], n_heads, want[1], n_kv_heads, want[2], head_dim,
                                   optest::i32_tensor(positions), inv_freq, attention_factor, optest::i32_tensor(slots),
                                   cpu_k_pool, cpu_v_pool));
    // The same bf16 products summed in f32 in another order (cuBLASLt's tiles), then the same rotation.
    const std::vector<std::pair<Tensor, Tensor>> pairs = {{targets[0].out, want[0]},
                                                          {targets[1].out, want[1]},
                                                          {targets[2].out, want[2]},
                                                          {k_pool, cpu_k_pool},
                                                          {v_pool, cpu_v_pool}};
    const char* names[] = {"q", "k", "v", "k pool", "v pool"};
    for (size_t i = 0; i < pairs.size(); ++i) {
      auto got = cuda.download(pairs[i].first);
      ASSERT_TRUE(got.ok()) << got.error().message;
      EXPECT_LE(cudatest::relative_norm_error(*got, pairs[i].second), 1e-5) << names[i];
    }

    // x's bf16 copy handed over (as a MoE block's norm writes it where linear_reads_bf16 says so): the GEMM reads
    // it instead of converting x, the same bits.
    EXPECT_TRUE(cuda.linear_reads_bf16(S, targets[0].w));
    std::vector<LinearTarget> again;
    for (const auto& [r0, r1] : ranges)
      again.push_back({d_w.slice_rows(r0, r1), d_b.slice_rows(r0, r1), up(Tensor::zeros({S, r1 - r0}, DType::f32))});
    RopeKvArgs rope_again = rope;
    rope_again.k_pool = up(pool0);
    rope_again.v_pool = up(pool0);
    const Tensor x_bf16 = up(optest::to_bf16(x));
    D0_ASSERT_OK(cuda.linears_rope_kv_write(up(x), again, rope_again, &x_bf16));
    const std::vector<std::pair<Tensor, Tensor>> same = {{again[0].out, targets[0].out},
                                                         {again[1].out, targets[1].out},
                                                         {again[2].out, targets[2].out},
                                                         {rope_again.k_pool, k_pool},
                                                         {rope_again.v_pool, v_pool}};
    for (size_t i = 0; i < same.size(); ++i) {
      auto a = cuda.download(same[i].first), b = cuda.download(same[i].second);
      ASSERT_TRUE(a.ok() && b.ok());
      EXPECT_TRUE(cudatest::same_bits(*a, *b)) << names[i] << " with the copy handed over";
    }
    D0_ASSERT_OK(cuda.synchronize());
  }
  EXPECT_FALSE(cuda.linear_reads_bf16(16, d_w.slice_rows(0, qw))) << "16 rows: the small-M kernel";
}

}  // namespace
}  // namespace day0
