// group_by_expert_cuda against the CPU reference, exactly, on fresh random routings: decode (1 token) to prefill
// (2,048 tokens), top-1/4/8, 8 to 128 experts (gpt-oss-20b and -120b: 32 and 128, top-4), skewed routings where a
// few experts take most tokens; the inverse map (entries) names each assignment's place; and a bad id raises the
// flag and leaves its entry -1, in the one-warp kernel (up to 256 assignments) and in the block / cluster one.
#include <gtest/gtest.h>

#include <cstring>
#include <iterator>
#include <memory>
#include <random>

#include "cuda_test_util.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/expert_grouping_cuda.h"
#include "ops/expert_grouping.h"

namespace day0 {
namespace {

using cudatest::download;
using cudatest::make_context;
using cudatest::poisoned;
using cudatest::upload;

std::vector<std::int32_t> to_vector(const Tensor& t) {
  return std::vector<std::int32_t>(t.data<std::int32_t>(), t.data<std::int32_t>() + t.numel());
}

TEST(CudaExpertGrouping, equals_the_cpu_reference_exactly_from_decode_to_prefill) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(31);
  for (int E : {8, 32, 128, 1000})  // 1,000: 32 experts a lane in the offsets scan, the last lane part-filled
    for (int k : {1, 4, 8})
      // Up to 256 assignments one warp groups them (S 64 at top-4, 32 at top-8; 33 at top-8 is the block's);
      // 1,031 tokens: 4,124 or 8,248 assignments split over a cluster's blocks in chunks of uneven length
      for (std::int64_t S : {1, 3, 16, 32, 33, 64, 65, 1031, 2048})
        for (bool skewed : {false, true}) {
          if (k > E) continue;
          SCOPED_TRACE(::testing::Message() << "E " << E << " k " << k << " S " << S << " skewed " << skewed);
          Tensor idx = Tensor::zeros({S, k}, DType::i32);
          for (std::int64_t i = 0; i < idx.numel(); ++i)
            idx.data<std::int32_t>()[i] = static_cast<std::int32_t>(skewed ? rng() % 3 : rng() % static_cast<unsigned>(E));
          auto want = group_by_expert(to_vector(idx), k, E);
          ASSERT_TRUE(want.ok());
          const std::int64_t A = S * k;
          Tensor counts = poisoned(*ctx, {E}, DType::i32), offsets = poisoned(*ctx, {E + 1}, DType::i32);
          Tensor rows = poisoned(*ctx, {A}, DType::i32), assigns = poisoned(*ctx, {A}, DType::i32);
          Tensor experts = poisoned(*ctx, {E}, DType::i32), n_routed = poisoned(*ctx, {1}, DType::i32);
          Tensor flag = cudatest::zeroed(*ctx, {1}, DType::i32), entries = poisoned(*ctx, {S, k}, DType::i32);
          D0_ASSERT_OK(group_by_expert_cuda(upload(*ctx, idx), E, counts, offsets, rows, assigns, experts, n_routed,
                                            flag, ctx->stream(), &entries));
          const auto got_entries = to_vector(download(*ctx, entries));
          for (std::int64_t p = 0; p < A; ++p)
            ASSERT_EQ(got_entries[static_cast<size_t>(want->assignments[p])], p) << "entry of assignment " << p;
          EXPECT_EQ(to_vector(download(*ctx, counts)), want->counts);
          EXPECT_EQ(to_vector(download(*ctx, offsets)), want->offsets);
          EXPECT_EQ(to_vector(download(*ctx, rows)), want->rows);
          EXPECT_EQ(to_vector(download(*ctx, assigns)), want->assignments);
          const auto got_experts = to_vector(download(*ctx, experts));
          const std::int32_t routed = download(*ctx, n_routed).data<std::int32_t>()[0];
          ASSERT_EQ(routed, static_cast<std::int32_t>(want->experts.size()));
          EXPECT_EQ(std::vector<std::int32_t>(got_experts.begin(), got_experts.begin() + routed), want->experts);
          for (int e = routed; e < E; ++e) EXPECT_EQ(got_experts[e], -1);
          EXPECT_EQ(cudatest::download_flag(*ctx, flag), 0);
        }
}

TEST(CudaExpertGrouping, an_id_outside_the_experts_raises_the_flag) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  // 4 assignments (the one-warp kernel) and 2,400 (a cluster of blocks): ids cycle 0-3, one of them 9 or -2.
  for (std::int64_t S : {2, 1200})
    for (std::int32_t bad : {9, -2}) {
      SCOPED_TRACE(::testing::Message() << "S " << S << " bad id " << bad);
      const std::int64_t A = S * 2;
      Tensor host = Tensor::zeros({S, 2}, DType::i32);
      for (std::int64_t a = 0; a < A; ++a) host.data<std::int32_t>()[a] = static_cast<std::int32_t>(a % 4);
      host.data<std::int32_t>()[1] = bad;
      Tensor counts = poisoned(*ctx, {4}, DType::i32), offsets = poisoned(*ctx, {5}, DType::i32);
      Tensor rows = poisoned(*ctx, {A}, DType::i32), assigns = poisoned(*ctx, {A}, DType::i32);
      Tensor experts = poisoned(*ctx, {4}, DType::i32), n_routed = poisoned(*ctx, {1}, DType::i32);
      Tensor flag = cudatest::zeroed(*ctx, {1}, DType::i32), entries = poisoned(*ctx, {S, 2}, DType::i32);
      D0_ASSERT_OK(group_by_expert_cuda(upload(*ctx, host), 4, counts, offsets, rows, assigns, experts, n_routed, flag,
                                        ctx->stream(), &entries));
      EXPECT_EQ(cudatest::download_flag(*ctx, flag), 1);
      // Assignment 1 is not grouped; the others keep their places among their experts' (expert 1 one fewer).
      const auto got = to_vector(download(*ctx, entries));
      EXPECT_EQ(got[1], -1);
      if (S == 2) {
        EXPECT_EQ(got, (std::vector<std::int32_t>{0, -1, 1, 2}));
      }
      EXPECT_EQ(to_vector(download(*ctx, counts)),
                (std::vector<std::int32_t>{static_cast<std::int32_t>(A / 4), static_cast<std::int32_t>(A / 4 - 1),
                                           static_cast<std::int32_t>(A / 4), static_cast<std::int32_t>(A / 4)}));
    }
}

// The grouping with the tokens' FP8 quantisation in one launch (decode's fp8 MoE) gives what the two launches give,
// every output byte for byte: random routings at 1-64 tokens of top-4 over 32 experts (up to the one-warp bound of
// 256 assignments), gpt-oss's width and a short one, both row orders, a bad id flagged alike; past the bound
// (65 tokens) the fused launcher runs the two launches itself.
TEST(CudaExpertGrouping, the_grouping_with_the_fp8_quantisation_gives_the_two_launches_bytes) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(33);
  std::normal_distribution<float> value(0.f, 3.f);
  const int E = 32, k = 4;
  for (std::int64_t S : {1, 3, 17, 64, 65})
    for (std::int64_t H : {2880, 64})
      for (Fp8RowOrder order : {Fp8RowOrder::natural, Fp8RowOrder::staged})
        for (bool bad : {false, true}) {
          SCOPED_TRACE(::testing::Message()
                       << "S " << S << " H " << H << " staged " << (order == Fp8RowOrder::staged) << " bad " << bad);
          const std::int64_t A = S * k;
          Tensor idx = Tensor::zeros({S, k}, DType::i32), x = Tensor::zeros({S, H}, DType::f32);
          for (std::int64_t i = 0; i < A; ++i)
            idx.data<std::int32_t>()[i] = static_cast<std::int32_t>(rng() % static_cast<unsigned>(E));
          if (bad) idx.data<std::int32_t>()[A / 2] = E + 3;
          for (std::int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = value(rng);
          const Tensor d_idx = upload(*ctx, idx), d_x = upload(*ctx, x);
          struct Outputs {
            Tensor counts, offsets, rows, assigns, experts, n_routed, flag, entries, q, scales;
          };
          auto outputs = [&] {
            return Outputs{poisoned(*ctx, {E}, DType::i32),         poisoned(*ctx, {E + 1}, DType::i32),
                           poisoned(*ctx, {A}, DType::i32),         poisoned(*ctx, {A}, DType::i32),
                           poisoned(*ctx, {E}, DType::i32),         poisoned(*ctx, {1}, DType::i32),
                           cudatest::zeroed(*ctx, {1}, DType::i32), poisoned(*ctx, {S, k}, DType::i32),
                           poisoned(*ctx, {S, H}, DType::f8_e4m3),  poisoned(*ctx, {S}, DType::f32)};
          };
          Outputs two = outputs(), one = outputs();
          EXPECT_EQ(group_quantize_fp8_fused(d_idx, d_x, one.q, order), A <= 256);
          D0_ASSERT_OK(group_by_expert_cuda(d_idx, E, two.counts, two.offsets, two.rows, two.assigns, two.experts,
                                            two.n_routed, two.flag, ctx->stream(), &two.entries));
          D0_ASSERT_OK(gather_quantize_fp8_cuda(d_x, Tensor(), two.q, two.scales, two.flag, ctx->stream(), order));
          D0_ASSERT_OK(group_by_expert_quantize_fp8_cuda(d_idx, E, one.counts, one.offsets, one.rows, one.assigns,
                                                         one.experts, one.n_routed, one.flag, d_x, one.q, one.scales,
                                                         order, ctx->stream(), &one.entries));
          const Tensor Outputs::*fields[] = {&Outputs::counts,  &Outputs::offsets,  &Outputs::rows, &Outputs::assigns,
                                             &Outputs::experts, &Outputs::n_routed, &Outputs::flag, &Outputs::entries,
                                             &Outputs::q,       &Outputs::scales};
          for (std::size_t i = 0; i < std::size(fields); ++i) {
            const Tensor a = download(*ctx, two.*fields[i]), b = download(*ctx, one.*fields[i]);
            ASSERT_EQ(a.nbytes(), b.nbytes());
            EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0) << "output " << i;
          }
          EXPECT_EQ(cudatest::download_flag(*ctx, one.flag), bad ? 1 : 0);
        }
}

// A q whose rows do not start on a 4-byte word (the held-row kernels store 4 codes a word): the fused launch is not
// taken, the natural order's codes come from the two launches (the scalar quantisation), the same bytes as into an
// aligned q; the staged order, which needs the word stores, is refused by name.
TEST(CudaExpertGrouping, a_q_off_its_word_takes_the_two_launches_or_is_refused) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(35);
  std::normal_distribution<float> value(0.f, 3.f);
  const int E = 32, k = 4;
  const std::int64_t S = 3, H = 64;
  Tensor idx = Tensor::zeros({S, k}, DType::i32), x = Tensor::zeros({S, H}, DType::f32);
  for (std::int64_t i = 0; i < S * k; ++i)
    idx.data<std::int32_t>()[i] = static_cast<std::int32_t>(rng() % static_cast<unsigned>(E));
  for (std::int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = value(rng);
  const Tensor d_idx = upload(*ctx, idx), d_x = upload(*ctx, x);
  const auto store = std::make_shared<Tensor>(poisoned(*ctx, {S * H + 4}, DType::f8_e4m3));
  Tensor q_off =
      Tensor::borrow(static_cast<std::uint8_t*>(store->raw()) + 1, {S, H}, DType::f8_e4m3, store, Device::cuda);
  Tensor q = poisoned(*ctx, {S, H}, DType::f8_e4m3);
  for (Fp8RowOrder order : {Fp8RowOrder::natural, Fp8RowOrder::staged}) {
    SCOPED_TRACE(::testing::Message() << "staged " << (order == Fp8RowOrder::staged));
    EXPECT_TRUE(group_quantize_fp8_fused(d_idx, d_x, q, order));
    EXPECT_FALSE(group_quantize_fp8_fused(d_idx, d_x, q_off, order));
    const auto group = [&](Tensor& into) {
      Tensor counts = poisoned(*ctx, {E}, DType::i32), offsets = poisoned(*ctx, {E + 1}, DType::i32);
      Tensor rows = poisoned(*ctx, {S * k}, DType::i32), assigns = poisoned(*ctx, {S * k}, DType::i32);
      Tensor experts = poisoned(*ctx, {E}, DType::i32), n_routed = poisoned(*ctx, {1}, DType::i32);
      Tensor flag = cudatest::zeroed(*ctx, {1}, DType::i32), scales = poisoned(*ctx, {S}, DType::f32);
      return group_by_expert_quantize_fp8_cuda(d_idx, E, counts, offsets, rows, assigns, experts, n_routed, flag, d_x,
                                               into, scales, order, ctx->stream());
    };
    D0_ASSERT_OK(group(q));
    const Status off = group(q_off);
    if (order == Fp8RowOrder::staged) {
      ASSERT_FALSE(off.ok());
      EXPECT_NE(off.error().message.find("staged order"), std::string::npos) << off.error().message;
      EXPECT_NE(off.error().message.find("q off its 4-byte word"), std::string::npos) << off.error().message;
      continue;
    }
    D0_ASSERT_OK(off);
    const Tensor a = download(*ctx, q), b = download(*ctx, q_off);
    EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0);
  }
}

}  // namespace
}  // namespace day0
