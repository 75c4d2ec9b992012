// CUDA elementwise and row kernels against the CPU reference ops on fresh seeded random inputs: embedding,
// residual add + RMSNorm, f32 -> bf16, RoPE (alone and fused with the KV write), clamped SwiGLU, greedy picks from
// logits, and the benchmarks' uniform fill. Outputs are NaN-poisoned before each launch,
// so an element a kernel fails to write fails the comparison. Skipped visibly without a GPU.
#include "ops/cuda/cuda_kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cuda/random_fill_cuda.h"
#include "ops/op_test_util.h"
#include "quant/mxfp4.h"

namespace day0 {
namespace {

using cudatest::count_nan;
using cudatest::download;
using cudatest::download_flag;
using cudatest::make_context;
using cudatest::poisoned;
using cudatest::upload;
using cudatest::zeroed;
using optest::all_close;
using optest::random_f32;
using optest::to_bf16;
using optest::to_double;

TEST(CudaKernels, embedding_gathers_rows_exactly_for_bf16_and_f32_tables_at_odd_and_vector_widths) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(1001);
  CpuOps cpu;
  // H = 2880 takes the 16-byte vector path, 13 the scalar one; S = 1 is decode, 37 a prefill.
  for (std::int64_t H : {13, 64, 2880})
    for (std::int64_t S : {1, 37})
      for (bool bf16 : {true, false}) {
        const std::int64_t V = 101;
        Tensor table = random_f32({V, H}, rng, -2.f, 2.f);
        if (bf16) table = to_bf16(table);
        std::vector<std::int32_t> id_values(S);
        for (auto& id : id_values) id = static_cast<std::int32_t>(rng() % V);
        id_values[0] = static_cast<std::int32_t>(V - 1);  // the last row, an edge of the bounds check
        const Tensor ids = optest::i32_tensor(id_values);
        Tensor want = Tensor::zeros({S, H}, DType::f32);
        D0_ASSERT_OK(cpu.embedding(table, ids, want));
        Tensor d_out = poisoned(*ctx, {S, H}, DType::f32), flag = zeroed(*ctx, {1}, DType::i32);
        D0_ASSERT_OK(embedding_cuda(upload(*ctx, table), upload(*ctx, ids), d_out, flag, ctx->stream()));
        // A copy is exact: tolerance zero.
        EXPECT_TRUE(all_close(download(*ctx, d_out), to_double(want), 0, 0)) << "H " << H << " S " << S;
        EXPECT_EQ(download_flag(*ctx, flag), 0);
      }
}

TEST(CudaKernels, embedding_clamps_an_out_of_range_id_and_raises_the_error_flag) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(1002);
  const Tensor table = to_bf16(random_f32({5, 16}, rng));
  Tensor d_out = poisoned(*ctx, {3, 16}, DType::f32), flag = zeroed(*ctx, {1}, DType::i32);
  D0_ASSERT_OK(embedding_cuda(upload(*ctx, table), upload(*ctx, optest::i32_tensor({1, 7, -2})), d_out, flag,
                              ctx->stream()));
  EXPECT_EQ(download_flag(*ctx, flag), 1);
  const Tensor got = download(*ctx, d_out);
  EXPECT_EQ(count_nan(got), 0);  // clamped rows are still written: no garbage flows on
  EXPECT_EQ(got.data<float>()[16], bf16_to_f32(table.data<std::uint16_t>()[4 * 16]));  // 7 -> row 4
  EXPECT_EQ(got.data<float>()[32], bf16_to_f32(table.data<std::uint16_t>()[0]));       // -2 -> row 0
}

TEST(CudaKernels, embedding_rejects_host_tensors_with_a_message_naming_the_argument) {
  // No device needed: validation happens before any CUDA call.
  Tensor table = Tensor::zeros({4, 8}, DType::bf16), ids = optest::i32_tensor({0}), out = Tensor::zeros({1, 8}, DType::f32);
  Tensor flag = Tensor::zeros({1}, DType::i32);
  const Status st = embedding_cuda(table, ids, out, flag, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(optest::contains(st.error().message, "table")) << st.error().message;
  EXPECT_TRUE(optest::contains(st.error().message, "on cuda")) << st.error().message;
}

// And its bf16 copy (written by the vector kernels as they go, converted after by the others) is the RNE of its f32
// output, bit for bit.
TEST(CudaKernels, rms_norm_with_residual_matches_cpu_add_then_rms_norm) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(1003);
  CpuOps cpu;
  for (std::int64_t H : {7, 64, 2880, 8192})  // 64, 2880: the vector form; 7, 8192: the scalar one
    for (std::int64_t S : {1, 3, 64})
      for (bool bf16_w : {true, false})
        for (bool plus_one : {false, true}) {
          const Tensor x = random_f32({S, H}, rng, -3.f, 3.f), y = random_f32({S, H}, rng, -1.f, 1.f);
          Tensor w = random_f32({H}, rng, 0.5f, 1.5f);
          if (bf16_w) w = to_bf16(w);
          Tensor x_ref = x.clone(), want = Tensor::zeros({S, H}, DType::f32);
          D0_ASSERT_OK(cpu.add(x_ref, y));
          D0_ASSERT_OK(cpu.rms_norm(x_ref, w, 1e-5f, plus_one, want));
          Tensor d_x = upload(*ctx, x), d_out = poisoned(*ctx, {S, H}, DType::f32);
          Tensor d_out_bf16 = poisoned(*ctx, {S, H}, DType::bf16);
          D0_ASSERT_OK(rms_norm_residual_cuda(d_x, upload(*ctx, y), upload(*ctx, w), 1e-5f, plus_one, d_out,
                                              ctx->stream(), &d_out_bf16));
          // The residual sum is one f32 add on both sides: exact.
          EXPECT_TRUE(all_close(download(*ctx, d_x), to_double(x_ref), 0, 0)) << "x, H " << H << " S " << S;
          // The sum of squares is reduced in another order (tree vs sequential): a few f32 ulps, ~sqrt(H) eps.
          const Tensor got = download(*ctx, d_out);
          EXPECT_TRUE(all_close(got, to_double(want), 1e-5, 1e-6)) << "H " << H << " S " << S;
          const Tensor want_bf16 = to_bf16(got), got_bf16 = download(*ctx, d_out_bf16);
          EXPECT_EQ(std::memcmp(got_bf16.raw(), want_bf16.raw(), want_bf16.nbytes()), 0) << "H " << H << " S " << S;
        }
}

TEST(CudaKernels, rms_norm_without_residual_leaves_x_unchanged) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(1004);
  CpuOps cpu;
  const std::int64_t S = 5, H = 2880;
  const Tensor x = random_f32({S, H}, rng, -3.f, 3.f), w = to_bf16(random_f32({H}, rng, 0.5f, 1.5f));
  Tensor want = Tensor::zeros({S, H}, DType::f32);
  D0_ASSERT_OK(cpu.rms_norm(x, w, 1e-6f, false, want));
  Tensor d_x = upload(*ctx, x), d_out = poisoned(*ctx, {S, H}, DType::f32);
  D0_ASSERT_OK(rms_norm_residual_cuda(d_x, Tensor(), upload(*ctx, w), 1e-6f, false, d_out, ctx->stream()));
  EXPECT_TRUE(all_close(download(*ctx, d_x), to_double(x), 0, 0));
  // Reduction order only, as above.
  EXPECT_TRUE(all_close(download(*ctx, d_out), to_double(want), 1e-5, 1e-6));
}

TEST(CudaKernels, convert_f32_to_bf16_rounds_to_nearest_even_bit_for_bit_at_odd_sizes) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(1005);
  // Odd sizes exercise the scalar tail after the 4-wide body; 257 x 2880 is a prefill activation.
  for (const Shape& shape : {Shape{1}, Shape{3, 5}, Shape{1, 2880}, Shape{257, 2880}}) {
    Tensor x = random_f32(shape, rng, -100.f, 100.f);
    x.data<float>()[0] = 1.00390625f;  // exactly halfway between two bf16 values: ties to even
    const Tensor want = to_bf16(x);
    Tensor d_out = poisoned(*ctx, shape, DType::bf16);
    D0_ASSERT_OK(convert_f32_to_bf16_cuda(upload(*ctx, x), d_out, ctx->stream()));
    const Tensor got = download(*ctx, d_out);
    // Rounding is specified exactly (RNE), so bit-exact.
    for (std::int64_t i = 0; i < x.numel(); ++i)
      ASSERT_EQ(got.data<std::uint16_t>()[i], want.data<std::uint16_t>()[i]) << shape_to_string(shape) << " " << i;
  }
}

TEST(CudaKernels, rope_matches_the_cpu_reference_for_full_and_partial_rotary_dims_and_yarn_factor) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(1006);
  CpuOps cpu;
  struct Case { int n_heads, head_dim, rotary_dim; float attention_factor; };
  // gpt-oss: 64 heads x 64, YaRN factor 32 (attention factor ~1.35); a partial rotary dim; an odd head count.
  for (const Case c : {Case{64, 64, 64, 1.3465736f}, Case{8, 64, 64, 1.f}, Case{3, 80, 32, 1.f}})
    for (std::int64_t S : {1, 3, 64}) {
      const Tensor inv = optest::gpt_oss_inv_freq(c.rotary_dim);
      std::vector<std::int32_t> pos(S);
      for (auto& p : pos) p = static_cast<std::int32_t>(rng() % 131072);  // up to gpt-oss's context
      const Tensor positions = optest::i32_tensor(pos);
      const Tensor x = random_f32({S, std::int64_t(c.n_heads) * c.head_dim}, rng);
      Tensor want = x.clone();
      D0_ASSERT_OK(cpu.rope(want, c.n_heads, c.head_dim, positions, inv, c.attention_factor));
      Tensor d_x = upload(*ctx, x);
      D0_ASSERT_OK(rope_cuda(d_x, c.n_heads, c.head_dim, upload(*ctx, positions), upload(*ctx, inv),
                             c.attention_factor, ctx->stream()));
      // Same f32 angle, double cos/sin, no FMA contraction: equal unless libm and CUDA's double cos differ in
      // the last double ulp and that flips the float rounding; 1e-6 relative covers that one-ulp case.
      EXPECT_TRUE(all_close(download(*ctx, d_x), to_double(want), 1e-6, 1e-6))
          << "heads " << c.n_heads << " d " << c.head_dim << " rot " << c.rotary_dim << " S " << S;
    }
}

// The fused form: q and k rotated exactly as rope_cuda rotates them (bit for bit), k and v rows in their pool
// slots, other slots untouched; a slot outside the pool raises the flag and writes nothing for that token. Decode
// sizes (a block per token and KV head) and prefill sizes (70 tokens: blocks of 8 tokens, a ragged last one).
TEST(CudaKernels, rope_kv_write_rotates_q_and_k_as_rope_and_writes_k_v_into_their_slots) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(1009);
  struct Case { int n_heads, n_kv_heads, head_dim, rotary_dim; float attention_factor; };
  // Prefill sizes take the rows form: 70 and 128 tokens split the KV heads over blocks (5 KV heads at 128: chunks
  // of 2, the last of 1), 1,101 puts 2 tokens a block and 1 in the last.
  for (const Case c : {Case{64, 8, 64, 64, 1.3465736f}, Case{3, 1, 80, 32, 1.f}, Case{10, 5, 64, 64, 1.f}})
    for (const std::int64_t S : {3, 70, 128, 1101}) {
      SCOPED_TRACE(::testing::Message() << "heads " << c.n_heads << " d " << c.head_dim << " S " << S);
      const Tensor inv = optest::gpt_oss_inv_freq(c.rotary_dim);
      const std::int64_t qw = std::int64_t(c.n_heads) * c.head_dim, w = std::int64_t(c.n_kv_heads) * c.head_dim;
      const std::int64_t n_slots = 2 * S + 2;
      std::vector<std::int32_t> pos(S), order(n_slots);
      for (auto& p : pos) p = static_cast<std::int32_t>(rng() % 131072);
      pos[0] = 0;
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), rng);
      const std::vector<std::int32_t> slots(order.begin(), order.begin() + S);
      const Tensor positions = upload(*ctx, optest::i32_tensor(pos)), d_inv = upload(*ctx, inv);
      const Tensor q = random_f32({S, qw}, rng), k = random_f32({S, w}, rng), v = random_f32({S, w}, rng);
      Tensor want_q = upload(*ctx, q), want_k = upload(*ctx, k);
      D0_ASSERT_OK(rope_cuda(want_q, c.n_heads, c.head_dim, positions, d_inv, c.attention_factor, ctx->stream()));
      D0_ASSERT_OK(rope_cuda(want_k, c.n_kv_heads, c.head_dim, positions, d_inv, c.attention_factor, ctx->stream()));
      const Tensor hq = download(*ctx, want_q), hk = download(*ctx, want_k);

      Tensor d_q = upload(*ctx, q), d_k = upload(*ctx, k);
      Tensor kp = zeroed(*ctx, {n_slots, w}, DType::f32), vp = zeroed(*ctx, {n_slots, w}, DType::f32);
      Tensor flag = zeroed(*ctx, {1}, DType::i32);
      D0_ASSERT_OK(rope_kv_write_cuda(d_q, c.n_heads, d_k, c.n_kv_heads, upload(*ctx, v), c.head_dim, positions, d_inv,
                                      c.attention_factor, upload(*ctx, optest::i32_tensor(slots)), kp, vp, flag,
                                      ctx->stream()));
      const Tensor gq = download(*ctx, d_q), gk = download(*ctx, kp), gv = download(*ctx, vp), rk = download(*ctx, d_k);
      for (std::int64_t i = 0; i < S * qw; ++i) ASSERT_EQ(gq.data<float>()[i], hq.data<float>()[i]) << "q " << i;
      for (std::int64_t i = 0; i < S * w; ++i) ASSERT_EQ(rk.data<float>()[i], hk.data<float>()[i]) << "k " << i;
      for (std::int64_t slot = 0; slot < n_slots; ++slot) {
        const auto it = std::find(slots.begin(), slots.end(), static_cast<std::int32_t>(slot));
        for (std::int64_t j = 0; j < w; ++j) {
          const float kk = gk.data<float>()[slot * w + j], vv = gv.data<float>()[slot * w + j];
          if (it == slots.end()) {
            ASSERT_EQ(kk, 0.f) << "slot " << slot;
            ASSERT_EQ(vv, 0.f) << "slot " << slot;
            continue;
          }
          const std::int64_t s = it - slots.begin();
          ASSERT_EQ(kk, hk.data<float>()[s * w + j]) << "k slot " << slot << " " << j;
          ASSERT_EQ(vv, v.data<float>()[s * w + j]) << "v slot " << slot << " " << j;
        }
      }
      EXPECT_EQ(cudatest::download_flag(*ctx, flag), 0);
      // One token's slot past the pool: the flag, and that token's pool rows untouched.
      std::vector<std::int32_t> bad = slots;
      bad[S / 2] = static_cast<std::int32_t>(n_slots + 7);
      Tensor kp2 = zeroed(*ctx, {n_slots, w}, DType::f32), vp2 = zeroed(*ctx, {n_slots, w}, DType::f32);
      D0_ASSERT_OK(rope_kv_write_cuda(d_q, c.n_heads, d_k, c.n_kv_heads, upload(*ctx, v), c.head_dim, positions, d_inv,
                                      c.attention_factor, upload(*ctx, optest::i32_tensor(bad)), kp2, vp2, flag,
                                      ctx->stream()));
      EXPECT_EQ(cudatest::download_flag(*ctx, flag), 1);
      const Tensor gv2 = download(*ctx, vp2);
      for (std::int64_t j = 0; j < w; ++j)
        ASSERT_EQ(gv2.data<float>()[slots[S / 2] * w + j], 0.f) << "the bad token's old slot was written";
    }
}

// Benchmark operands: in range, centred, repeatable for a seed, different for another seed, in every dtype.
TEST(CudaKernels, fill_uniform_is_uniform_in_range_and_repeatable_per_seed) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  for (DType dt : {DType::f32, DType::bf16, DType::f8_e4m3}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    const float scale = dt == DType::f8_e4m3 ? 448.f : 2.f;
    Tensor a = poisoned(*ctx, {4096}, dt), b = poisoned(*ctx, {4096}, dt), c = poisoned(*ctx, {4096}, dt);
    D0_ASSERT_OK(fill_uniform_cuda(a, 7, scale, ctx->stream()));
    D0_ASSERT_OK(fill_uniform_cuda(b, 7, scale, ctx->stream()));
    D0_ASSERT_OK(fill_uniform_cuda(c, 8, scale, ctx->stream()));
    const Tensor ha = download(*ctx, a).to_f32(), hb = download(*ctx, b).to_f32(), hc = download(*ctx, c).to_f32();
    double sum = 0, abs_sum = 0;
    std::int64_t same_as_other_seed = 0;
    for (std::int64_t i = 0; i < 4096; ++i) {
      const float v = ha.data<float>()[i];
      ASSERT_TRUE(v >= -scale && v <= scale) << i << ": " << v;
      ASSERT_EQ(v, hb.data<float>()[i]) << i;
      same_as_other_seed += v == hc.data<float>()[i];
      sum += v;
      abs_sum += std::fabs(v);
    }
    EXPECT_LT(std::fabs(sum / 4096), 0.05 * scale);           // mean 0 (sd of the mean ~0.009 scale)
    EXPECT_NEAR(abs_sum / 4096, 0.5 * scale, 0.05 * scale);  // E|U(-s, s)| = s / 2
    EXPECT_LT(same_as_other_seed, 400);                       // fp8 ties are common, not the rule
  }
}

TEST(CudaKernels, swiglu_clamped_matches_the_cpu_reference_for_both_layouts) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(1007);
  CpuOps cpu;
  for (std::int64_t I : {1, 33, 2880})
    for (std::int64_t n : {1, 3, 64})
      for (bool interleaved : {true, false}) {
        SwigluParams p;
        p.interleaved = interleaved;
        // Values past +-limit so the clamps are exercised.
        const Tensor gu = random_f32({n, 2 * I}, rng, -10.f, 10.f);
        Tensor want = Tensor::zeros({n, I}, DType::f32);
        D0_ASSERT_OK(cpu.swiglu_clamped(gu, p, want));
        Tensor d_out = poisoned(*ctx, {n, I}, DType::f32);
        D0_ASSERT_OK(swiglu_clamped_cuda(upload(*ctx, gu), p, d_out, ctx->stream()));
        // CUDA's expf is within 2 ulp, glibc's within 1: a few ulp after the division. atol for outputs near 0.
        EXPECT_TRUE(all_close(download(*ctx, d_out), to_double(want), 1e-6, 1e-7))
            << "I " << I << " n " << n << " interleaved " << interleaved;
      }
}

// Rows of every kind the picks must agree on with the CPU reference, at gpt-oss's vocabulary (16-byte loads), an
// odd width (the scalar path) and a tiny one: random logits; the largest value repeated at random ids (the lowest
// wins: across threads and within one thread's loads); every value equal; -inf everywhere but one id; and the
// unusable rows (a NaN, a +inf, both: the lowest id; every value -inf). Outputs are poisoned first.
TEST(CudaKernels, greedy_tokens_match_the_cpu_reference_on_ties_and_unusable_rows) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(1011);
  CpuOps cpu;
  const float inf = INFINITY;
  for (const std::int64_t V : {std::int64_t{201088}, std::int64_t{1001}, std::int64_t{3}}) {
    SCOPED_TRACE(::testing::Message() << "V " << V);
    constexpr int kKinds = 10, kRepeats = 7;
    const std::int64_t R = kKinds * kRepeats;
    Tensor x = random_f32({R, V}, rng, -10.f, 10.f);
    std::uniform_int_distribution<std::int64_t> id(0, V - 1);
    for (std::int64_t r = 0; r < R; ++r) {
      float* row = x.data<float>() + r * V;
      switch (r % kKinds) {
        case 1:  // the maximum three times, anywhere
          for (int k = 0; k < 3; ++k) row[id(rng)] = 11.f;
          break;
        case 2: {  // the maximum at neighbouring ids (one thread's 16-byte load, or the next thread's)
          const std::int64_t at = id(rng);
          row[at] = 12.f;
          row[std::min(at + 1, V - 1)] = 12.f;
          break;
        }
        case 3:
          std::fill(row, row + V, -2.5f);
          break;
        case 4:
          std::fill(row, row + V, -inf);
          row[id(rng)] = -30.f;
          break;
        case 5:
          row[id(rng)] = NAN;
          break;
        case 6:
          row[id(rng)] = inf;
          break;
        case 7:
          row[id(rng)] = inf;
          row[id(rng)] = NAN;
          break;
        case 8:
          std::fill(row, row + V, -inf);
          break;
        case 9:  // the maximum at the last id
          row[V - 1] = 13.f;
          break;
        default:
          break;
      }
    }
    Tensor want = Tensor::zeros({R, 2}, DType::i32);
    D0_ASSERT_OK(cpu.greedy_tokens(x, want, nullptr));
    Tensor d_out = poisoned(*ctx, {R, 2}, DType::i32), d_tokens = poisoned(*ctx, {R}, DType::i32);
    const Tensor d_x = upload(*ctx, x);
    D0_ASSERT_OK(greedy_tokens_cuda(d_x, d_out, &d_tokens, ctx->stream()));
    const Tensor got = download(*ctx, d_out), tokens = download(*ctx, d_tokens);
    for (std::int64_t r = 0; r < R; ++r) {
      const std::int32_t* g = got.data<std::int32_t>() + 2 * r;
      const std::int32_t* w = want.data<std::int32_t>() + 2 * r;
      EXPECT_EQ(g[1], w[1]) << "row " << r;
      if (w[1] == -1) {
        EXPECT_EQ(g[0], w[0]) << "row " << r;
      }
      // The next step's id: the pick again, a valid id even where the row is unusable.
      EXPECT_EQ(tokens.data<std::int32_t>()[r], g[0]) << "row " << r;
      EXPECT_TRUE(g[0] >= 0 && g[0] < V) << "row " << r << ": " << g[0];
    }
    // Without the tokens: the same picks.
    Tensor d_alone = poisoned(*ctx, {R, 2}, DType::i32);
    D0_ASSERT_OK(greedy_tokens_cuda(d_x, d_alone, nullptr, ctx->stream()));
    const Tensor alone = download(*ctx, d_alone);
    EXPECT_EQ(std::memcmp(alone.raw(), got.raw(), got.nbytes()), 0);
    // The kinds above must be what the reference says they are: usable, flagged, all -inf.
    EXPECT_GE(want.data<std::int32_t>()[2 * 5 + 1], 0);
    EXPECT_EQ(want.data<std::int32_t>()[2 * 8 + 1], -2);
  }
}

}  // namespace
}  // namespace day0
