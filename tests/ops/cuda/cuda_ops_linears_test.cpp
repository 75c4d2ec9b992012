// CudaOps::linears picks a kernel per row count and weight size: every target on the small-M kernel (decode
// sizes), the medium ones on it and the rest on cuBLASLt (k and v beside q at 17-64 rows), or every target on
// cuBLASLt. Each form against CpuOps::linear on x rounded to bf16. And the ops that hand a GEMM its bf16 rows at
// prefill sizes (the MoE block's norm + router, attention + o projection, the whole attention block with q rotated
// in the attention): the bits of their parts one after the other. Skipped visibly without a GPU.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "cuda_test_util.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/linear_small_cuda.h"
#include "ops/op_test_util.h"
#include "ops/paged_kv_scenario.h"

namespace day0 {
namespace {

using cudatest::make_cuda_ops;

// An upload into the CudaOps' step scratch (a failed one fails the test, giving no tensor).
Tensor upload(CudaOps& cuda, const Tensor& t) {
  auto d = cuda.upload(t, "operand");
  EXPECT_TRUE(d.ok()) << d.error().message;
  return d.ok() ? *d : Tensor();
}

// Two device tensors hold the same bytes (the fused op's result against its parts run one after the other).
void expect_same_bits(CudaOps& cuda, const Tensor& a, const Tensor& b) {
  auto ga = cuda.download(a), gb = cuda.download(b);
  ASSERT_TRUE(ga.ok() && gb.ok());
  EXPECT_TRUE(cudatest::same_bits(*ga, *gb));
}

TEST(CudaOpsLinears, q_k_v_give_the_cpu_products_on_every_kernel_split) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  const std::unique_ptr<CudaOps> ops = make_cuda_ops();
  ASSERT_TRUE(ops);
  CudaOps& cuda = *ops;
  std::mt19937 rng(7301);
  // q 12 MiB (large), k and v 1.5 MiB each (medium: alone they take up to kLinearSmallMediumMaxRows rows).
  const std::int64_t K = 1536;
  const std::vector<std::int64_t> widths = {4096, 512, 512};
  std::vector<Tensor> host_w, host_b;
  for (std::int64_t n : widths) {
    host_w.push_back(optest::to_bf16(optest::random_f32({n, K}, rng)));
    host_b.push_back(optest::random_f32({n}, rng));
  }
  ASSERT_EQ(linear_small_max_rows({{host_w[1], Tensor(), Tensor()}}), kLinearSmallMediumMaxRows);
  CpuOps cpu;
  for (const std::int64_t M : {std::int64_t{8}, std::int64_t{40}, kLinearSmallMediumMaxRows + 36}) {
    SCOPED_TRACE("M " + std::to_string(M));
    const Tensor x = optest::random_f32({M, K}, rng);
    auto d_x = cuda.upload(x, "x");
    ASSERT_TRUE(d_x.ok());
    std::vector<LinearTarget> targets;
    for (size_t i = 0; i < widths.size(); ++i) {
      // Step scratch, all of it (a persistent allocation is refused while scratch is live).
      auto w = cuda.upload(host_w[i], "w"), b = cuda.upload(host_b[i], "b");
      auto out = cuda.upload(Tensor::zeros({M, widths[i]}, DType::f32), "out");
      ASSERT_TRUE(w.ok() && b.ok() && out.ok())
          << (!w.ok() ? w.error().message : !b.ok() ? b.error().message : out.error().message);
      targets.push_back({*w, *b, *out});
    }
    D0_ASSERT_OK(cuda.linears(*d_x, targets));
    for (size_t i = 0; i < widths.size(); ++i) {
      SCOPED_TRACE("target " + std::to_string(i));
      Tensor want = Tensor::zeros({M, widths[i]}, DType::f32);
      D0_ASSERT_OK(cpu.linear(optest::to_bf16(x).to_f32(), host_w[i], host_b[i], want));
      auto got = cuda.download(targets[i].out);
      ASSERT_TRUE(got.ok());
      // The same bf16 products summed in f32 in another order (split-K partials, MMA trees, cuBLASLt's tiles).
      EXPECT_LE(cudatest::relative_norm_error(*got, want), 1e-5);
    }
  }
}

TEST(CudaOpsLinears, norm_and_router_give_the_bits_of_the_norm_then_the_router_at_every_size) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  const std::unique_ptr<CudaOps> ops = make_cuda_ops();
  ASSERT_TRUE(ops);
  CudaOps& cuda = *ops;
  std::mt19937 rng(7302);
  const std::int64_t H = 2880, E = 128;
  const int k = 4;
  auto up = [&](const Tensor& t) { return upload(cuda, t); };
  const Tensor norm_w = up(optest::to_bf16(optest::random_f32({H}, rng, 0.5f, 1.5f)));
  const Tensor router_w = up(optest::to_bf16(optest::random_f32({E, H}, rng)));
  const Tensor router_b = up(optest::random_f32({E}, rng));
  for (const std::int64_t S : {std::int64_t{1}, std::int64_t{64}, std::int64_t{600}}) {  // decode to GEMM sizes
    SCOPED_TRACE("S " + std::to_string(S));
    const Tensor x = optest::random_f32({S, H}, rng, -3.f, 3.f), y = optest::random_f32({S, H}, rng);
    Tensor x1 = up(x), x2 = up(x), d_y = up(y);
    Tensor out1 = up(Tensor::zeros({S, H}, DType::f32)), out2 = up(Tensor::zeros({S, H}, DType::f32));
    Tensor logits1 = up(Tensor::zeros({S, E}, DType::f32)), logits2 = up(Tensor::zeros({S, E}, DType::f32));
    Tensor idx1 = up(Tensor::zeros({S, k}, DType::i32)), idx2 = up(Tensor::zeros({S, k}, DType::i32));
    Tensor wts1 = up(Tensor::zeros({S, k}, DType::f32)), wts2 = up(Tensor::zeros({S, k}, DType::f32));
    D0_ASSERT_OK(cuda.add_rms_norm_router(x1, d_y, norm_w, 1e-5f, false, out1, router_w, router_b, k, logits1, idx1,
                                          wts1));
    D0_ASSERT_OK(cuda.add_rms_norm(x2, d_y, norm_w, 1e-5f, false, out2));
    D0_ASSERT_OK(cuda.router(out2, router_w, router_b, k, logits2, idx2, wts2));
    for (const auto& [a, b] : {std::pair{&out1, &out2}, {&logits1, &logits2}, {&idx1, &idx2}, {&wts1, &wts2}})
      expect_same_bits(cuda, *a, *b);
  }
}

TEST(CudaOpsLinears, attention_and_o_projection_give_the_bits_of_the_attention_then_the_projection) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  const std::unique_ptr<CudaOps> ops = make_cuda_ops();
  ASSERT_TRUE(ops);
  CudaOps& cuda = *ops;
  std::mt19937 rng(7303);
  auto up = [&](const Tensor& t) { return upload(cuda, t); };
  const AttentionParams p{64, 8, 64, 0, 0.125f};
  const std::int64_t width = p.n_heads * p.head_dim, N = 256;
  const Tensor o_w = up(optest::to_bf16(optest::random_f32({N, width}, rng))), o_b = up(optest::random_f32({N}, rng));
  // One prompt (the tensor-core kernel and the projection's GEMM: `mixed` left unwritten, AttentionSplit::
  // bf16_only, so only the outputs compare), 80 decode rows (the group kernel and the GEMM: likewise), and a few
  // decode rows (the small-M projection: `mixed` written and compared too).
  for (const auto& [lengths, queries, mixed_written] :
       {std::tuple{std::vector<std::int64_t>{300}, std::vector<std::int64_t>{300}, false},
        std::tuple{std::vector<std::int64_t>(80, 37), std::vector<std::int64_t>(80, 1), false},
        std::tuple{std::vector<std::int64_t>{40, 9}, std::vector<std::int64_t>{1, 1}, true}}) {
    auto sc = optest::make_paged_scenario(rng, p, 16, lengths, queries, true, /*bf16_kv=*/true);
    const std::int64_t S = sc.q.size(0);
    SCOPED_TRACE("rows " + std::to_string(S));
    const PagedKv kv{up(sc.tables), up(sc.q_seq), sc.block_size};
    const Tensor q = up(sc.q), q_pos = up(sc.q_pos), sinks = up(sc.sinks);
    const Tensor k_pool = up(optest::to_bf16(sc.k_pool)), v_pool = up(optest::to_bf16(sc.v_pool));
    Tensor mixed1 = up(Tensor::zeros({S, width}, DType::f32)), mixed2 = up(Tensor::zeros({S, width}, DType::f32));
    Tensor out1 = up(Tensor::zeros({S, N}, DType::f32)), out2 = up(Tensor::zeros({S, N}, DType::f32));
    D0_ASSERT_OK(cuda.paged_attention_linear(q, k_pool, v_pool, q_pos, kv, sinks, p, mixed1, {o_w, o_b, out1}));
    D0_ASSERT_OK(cuda.paged_attention(q, k_pool, v_pool, q_pos, kv, sinks, p, mixed2));
    D0_ASSERT_OK(cuda.linear(mixed2, o_w, o_b, out2));
    expect_same_bits(cuda, out1, out2);
    if (mixed_written) expect_same_bits(cuda, mixed1, mixed2);
  }
}

// The attention block from its input (linears_rope_attention_linear): the bits of q/k/v with rope and the KV write,
// then the attention with its o projection. A prompt leaves q unrotated (the tensor-core kernel rotates it as it
// loads it); decode rows (the small-M kernel's rope epilogue) are the two ops as they are.
TEST(CudaOpsLinears, attention_block_gives_the_bits_of_rope_kv_write_then_attention_and_projection) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  const std::unique_ptr<CudaOps> ops = make_cuda_ops();
  ASSERT_TRUE(ops);
  CudaOps& cuda = *ops;
  std::mt19937 rng(7304);
  auto up = [&](const Tensor& t) { return upload(cuda, t); };
  auto zeros = [&](const Shape& shape, DType dtype) { return up(Tensor::zeros(shape, dtype)); };
  const AttentionParams p{64, 8, 64, 128, 0.125f};
  const std::int64_t H = 512, qw = p.n_heads * p.head_dim, kvw = p.n_kv_heads * p.head_dim, N = 1024;
  const Tensor wq = up(optest::to_bf16(optest::random_f32({qw, H}, rng))), bq = up(optest::random_f32({qw}, rng));
  const Tensor wk = up(optest::to_bf16(optest::random_f32({kvw, H}, rng))), bk = up(optest::random_f32({kvw}, rng));
  const Tensor wv = up(optest::to_bf16(optest::random_f32({kvw, H}, rng))), bv = up(optest::random_f32({kvw}, rng));
  const Tensor o_w = up(optest::to_bf16(optest::random_f32({N, qw}, rng))), o_b = up(optest::random_f32({N}, rng));
  const Tensor inv = up(optest::gpt_oss_inv_freq(p.head_dim));
  for (const auto& [lengths, queries, defers] :
       {std::tuple{std::vector<std::int64_t>{700, 90}, std::vector<std::int64_t>{260, 90}, true},
        std::tuple{std::vector<std::int64_t>{40, 9}, std::vector<std::int64_t>{1, 1}, false}}) {
    auto sc = optest::make_paged_scenario(rng, p, 16, lengths, queries, true, /*bf16_kv=*/true);
    const std::int64_t S = sc.q.size(0), max_blocks = sc.tables.size(1);
    SCOPED_TRACE("rows " + std::to_string(S));
    std::vector<std::int32_t> slots;  // each query's own slot
    for (std::int64_t s = 0; s < S; ++s) {
      const std::int32_t pos = sc.q_pos.data<std::int32_t>()[s], seq = sc.q_seq.data<std::int32_t>()[s];
      slots.push_back(sc.tables.data<std::int32_t>()[seq * max_blocks + pos / 16] * 16 + pos % 16);
    }
    const Tensor x = up(optest::random_f32({S, H}, rng)), positions = up(sc.q_pos),
                 d_slots = up(optest::i32_tensor(slots));
    const PagedKv kv{up(sc.tables), up(sc.q_seq), sc.block_size};
    const Tensor sinks = up(sc.sinks);
    struct Run {
      Tensor q, k, v, k_pool, v_pool, mixed, out;
    };
    auto run = [&](bool one_op, Run& r) {
      r = {zeros({S, qw}, DType::f32), zeros({S, kvw}, DType::f32), zeros({S, kvw}, DType::f32),
           up(optest::to_bf16(sc.k_pool)), up(optest::to_bf16(sc.v_pool)), zeros({S, qw}, DType::f32),
           zeros({S, N}, DType::f32)};
      const std::vector<LinearTarget> qkv{{wq, bq, r.q}, {wk, bk, r.k}, {wv, bv, r.v}};
      const RopeKvArgs rope{p.n_heads, p.n_kv_heads, p.head_dim, positions, inv,
                            1.3465736f, d_slots,      r.k_pool,   r.v_pool};
      const LinearTarget o{o_w, o_b, r.out};
      if (one_op) {
        D0_ASSERT_OK(cuda.linears_rope_attention_linear(x, qkv, rope, nullptr, kv, sinks, p, r.mixed, o));
        return;
      }
      D0_ASSERT_OK(cuda.linears_rope_kv_write(x, qkv, rope, nullptr));
      D0_ASSERT_OK(cuda.paged_attention_linear(r.q, r.k_pool, r.v_pool, positions, kv, sinks, p, r.mixed, o));
    };
    Run one, two;
    run(true, one);
    run(false, two);
    for (const auto& [a, b] : {std::pair{&one.k, &two.k}, {&one.v, &two.v}, {&one.k_pool, &two.k_pool},
                               {&one.v_pool, &two.v_pool}, {&one.out, &two.out}})
      expect_same_bits(cuda, *a, *b);
    auto q1 = cuda.download(one.q), q2 = cuda.download(two.q);
    ASSERT_TRUE(q1.ok() && q2.ok());
    EXPECT_EQ(cudatest::same_bits(*q1, *q2), !defers) << "q left unrotated only where the attention rotates it";
  }
}

}  // namespace
}  // namespace day0
