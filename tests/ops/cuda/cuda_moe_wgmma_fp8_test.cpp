// The FP8 warpgroup-MMA grouped expert GEMM (moe_mxfp4_wgmma_fp8_cuda.h, every form) against a CPU reference on fresh
// random inputs: each token row quantised by fp8_quantize_row, each weight row converted by the kernel's rule (the
// row's largest group exponent minus 6, groups through mxfp4_fp8_table), exact products summed in double, then
// fp8_moe::scaled_output's two roundings, then for the SwiGLU form gpt-oss's clamped SwiGLU of each row pair.
// Skipped visibly without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "core/dtype.h"
#include "cuda_test_util.h"
#include "moe_test_util.h"
#include "ops/cuda/moe_mxfp4_wgmma_cuda.h"
#include "ops/cuda/moe_mxfp4_wgmma_fp8_cuda.h"
#include "ops/op_test_util.h"
#include "quant/fp8_experts.h"
#include "quant/fp8_row_order.h"
#include "quant/mxfp4.h"
#include "quant/mxfp4_to_fp8_table.h"

namespace day0 {
namespace {

using cudatest::download;
using cudatest::make_context;
using cudatest::poisoned;
using cudatest::relative_norm_error;
using cudatest::upload;
using moetest::encoded_experts;
using moetest::group;
using moetest::Groups;
using moetest::random_routing;
using moetest::upload_experts;

// One weight row as the kernel converts it: E4M3 values (decoded to f32) and the row scale 2^R.
void reference_row(const ExpertWeights& w, std::int64_t row, std::vector<float>& values, float& scale) {
  const std::int64_t groups = w.in / kMxfp4GroupSize;
  const std::uint8_t* codes = w.scales.data<std::uint8_t>() + row * groups;
  const std::uint8_t* blocks = w.blocks.data<std::uint8_t>() + row * groups * kMxfp4GroupBytes;
  const int max_code = *std::max_element(codes, codes + groups);
  scale = std::ldexp(1.f, max_code - 127 - kFp8RowExponentShift);
  values.assign(w.in, 0.f);
  for (std::int64_t g = 0; g < groups; ++g) {
    const Mxfp4Fp8Table t = mxfp4_fp8_table(mxfp4_fp8_clamped_shift(codes[g] - max_code + kFp8RowExponentShift));
    for (int b = 0; b < kMxfp4GroupBytes; ++b) {
      const std::uint8_t byte = blocks[g * kMxfp4GroupBytes + b];
      values[g * 32 + 2 * b] = e4m3_to_f32(static_cast<std::uint8_t>(mxfp4_fp8_code(byte & 0xF, t)));
      values[g * 32 + 2 * b + 1] = e4m3_to_f32(static_cast<std::uint8_t>(mxfp4_fp8_code(byte >> 4, t)));
    }
  }
}

float swiglu_reference(float gate, float up, const SwigluParams& p) {
  gate = std::min(gate, p.limit);
  up = std::min(std::max(up, -p.limit), p.limit);
  return (up + 1.f) * (gate / (1.f + std::exp(-p.alpha * gate)));
}

// The GEMM's inputs: quantised rows by grouped entry (the down GEMM's), or by token, read through groups.rows
// (the gate_up GEMM's). Either way entry p sees the codes and scale of its token's row.
enum class Inputs { by_entry, by_token };

void compare_with_cpu(CudaContext& ctx, int tile, int E, int k, int out, int in, std::int64_t S, int max_code,
                      DType bias_dtype, bool swiglu, Inputs inputs, std::mt19937& rng) {
  SCOPED_TRACE(::testing::Message() << tile << "-token tiles, E " << E << " k " << k << " out " << out << " in " << in
                                    << " S " << S << " scale codes " << (max_code ? "1.." : "as encoded ") << max_code
                                    << (swiglu ? ", SwiGLU" : "")
                                    << (inputs == Inputs::by_token ? ", rows by token" : ""));
  ExpertWeights w = encoded_experts(E, out, in, bias_dtype, rng);
  if (max_code > 0)  // spread block exponents: groups far below their row's largest (shifts down to the clamp)
    for (std::int64_t i = 0; i < w.scales.numel(); ++i)
      w.scales.data<std::uint8_t>()[i] = static_cast<std::uint8_t>(1 + rng() % max_code);
  const ExpertWeights d = upload_experts(ctx, w);
  const Tensor x = optest::random_f32({S, in}, rng);
  Tensor indices, weights;
  random_routing(S, E, k, rng, indices, weights);
  const Groups g = group(ctx, indices, E);
  const std::int64_t A = S * k;
  const Tensor rows = download(ctx, g.rows), assignments = download(ctx, g.assignments);

  // Token rows in grouped order, quantised as gather_quantize_fp8_cuda does.
  Tensor x8 = Tensor::zeros({A, in}, DType::f8_e4m3), sx = Tensor::zeros({A}, DType::f32);
  for (std::int64_t p = 0; p < A; ++p)
    sx.data<float>()[p] =
        fp8_quantize_row(x.data<float>() + rows.data<std::int32_t>()[p] * in, in, x8.data<std::uint8_t>() + p * in)
            .scale;
  // The same rows by token, for Inputs::by_token.
  Tensor x8t = Tensor::zeros({S, in}, DType::f8_e4m3), sxt = Tensor::zeros({S}, DType::f32);
  for (std::int64_t s = 0; s < S; ++s)
    sxt.data<float>()[s] = fp8_quantize_row(x.data<float>() + s * in, in, x8t.data<std::uint8_t>() + s * in).scale;
  const bool by_token = inputs == Inputs::by_token;
  SwigluParams sp;
  sp.alpha = 1.702f;
  sp.limit = 7.f;
  Tensor y = poisoned(ctx, {A, swiglu ? out / 2 : out}, DType::f32);
  const std::int64_t routed = std::min<std::int64_t>(E, A);
  // The kernel's row order (the decode-sized form's staged one); the reference below reads the natural rows.
  auto in_kernel_order = [&](const Tensor& natural) {
    if (mxfp4_wgmma_fp8_row_order(tile) == Fp8RowOrder::natural) return natural;
    Tensor staged = Tensor::zeros(natural.shape(), DType::f8_e4m3);
    fp8_rows_to_staged(natural.data<std::uint8_t>(), natural.size(0), in, staged.data<std::uint8_t>());
    return staged;
  };
  const Status st = mxfp4_grouped_gemm_wgmma_fp8_cuda(
      upload(ctx, in_kernel_order(by_token ? x8t : x8)), upload(ctx, by_token ? sxt : sx), by_token, d, g.view(), tile,
      mxfp4_wgmma_launch_slots(routed, A, tile), swiglu ? &sp : nullptr, y, ctx.stream());
  if (tile == 192 && by_token) {  // the warp-specialised form: its tensor copies need an expert's rows contiguous
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message.find("by entry"), std::string::npos) << st.error().message;
    return;
  }
  D0_ASSERT_OK(st);
  const Tensor got = download(ctx, y);

  Tensor want = Tensor::zeros({A, swiglu ? out / 2 : out}, DType::f32);
  std::vector<float> wrow, v(out);
  // Every weight row converted once (rows x in values and a scale each), not once per entry that reads it.
  std::vector<float> w8(static_cast<std::size_t>(E) * out * in), w_scale(static_cast<std::size_t>(E) * out);
  for (std::int64_t row = 0; row < std::int64_t(E) * out; ++row) {
    reference_row(w, row, wrow, w_scale[row]);
    std::copy(wrow.begin(), wrow.end(), w8.begin() + row * in);
  }
  for (std::int64_t p = 0; p < A; ++p) {
    const std::int64_t a = assignments.data<std::int32_t>()[p];
    const int e = indices.data<std::int32_t>()[a];
    for (int r = 0; r < out; ++r) {
      const std::int64_t row = std::int64_t(e) * out + r;
      const float* w_row = w8.data() + row * in;
      double sum = 0;
      for (int i = 0; i < in; ++i) sum += double(e4m3_to_f32(x8.data<std::uint8_t>()[p * in + i])) * w_row[i];
      float v_r = float(sum) * sx.data<float>()[p];
      v_r *= w_scale[row];
      if (w.bias.raw() != nullptr)
        v_r += w.bias.dtype() == DType::f32 ? w.bias.data<float>()[e * out + r]
                                          : bf16_to_f32(w.bias.data<std::uint16_t>()[e * out + r]);
      v[r] = v_r;
    }
    for (int r = 0; r < out; ++r) {
      if (!swiglu)
        want.data<float>()[a * out + r] = v[r];
      else if (r % 2 == 0)  // by grouped entry
        want.data<float>()[p * (out / 2) + r / 2] = swiglu_reference(v[r], v[r + 1], sp);
    }
  }
  EXPECT_EQ(cudatest::count_nan(got), 0);
  // Both sides multiply exact E4M3 values; the reference sums in double, the MMAs in f32 but at Hopper's FP8
  // accumulation precision (about 14 bits a 32-deep step, truncated: the error grows with K). Measured on the
  // H200: 4e-5 to 9e-5 at K <= 320, 4.2e-4 at K = 2,880; 1e-3 leaves 2x at the largest (cuBLASLt's FP8 GEMM test
  // allows the same). A wrong group, scale or token is off by ~1.
  EXPECT_LT(relative_norm_error(got, want), 1e-3);
}

TEST(CudaMoeWgmmaFp8, grouped_gemm_matches_the_cpu_reference) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(4121);
  // 16: the decode-sized form (moe_mxfp4_rs_fp8_cuda.cuh); 192: the warp-specialised form (moe_mxfp4_ws_fp8_cuda.cuh)
  for (int tile : {16, 32, 64, 128, 192}) {
    // A lone token; ~300 tokens an expert (several tiles, the last ragged); out 64 (the second warpgroup past the
    // rows) and 192; in 96 (one k-tile ending in zeros), 320 (three, the last half zeros), 2,880 (gpt-oss: 23).
    const Inputs entry = Inputs::by_entry, token = Inputs::by_token;
    for (std::int64_t S : {1, 40, 300})
      compare_with_cpu(*ctx, tile, 4, 4, 64, 128, S, 0, DType::f32, false, entry, rng);
    for (std::int64_t S : {9, 130}) compare_with_cpu(*ctx, tile, 32, 4, 192, 320, S, 0, DType::bf16, false, entry, rng);
    compare_with_cpu(*ctx, tile, 8, 2, 128, 96, 70, 0, DType::f32, false, token, rng);
    compare_with_cpu(*ctx, tile, 4, 2, 64, 2880, 150, 0, DType::bf16, false, entry, rng);
    // The SwiGLU epilogue (halves by grouped entry), on rows by token as the gate_up GEMM runs.
    compare_with_cpu(*ctx, tile, 4, 4, 192, 320, 100, 0, DType::bf16, true, token, rng);
    compare_with_cpu(*ctx, tile, 4, 4, 192, 320, 100, 0, DType::bf16, true, entry, rng);
    // Block exponents spread over 1..200 (250 overflowed f32 sums): most groups sit far below their row's largest
    // and take the clamped, rounded tables.
    compare_with_cpu(*ctx, tile, 4, 2, 128, 320, 50, 200, DType::f32, false, entry, rng);
  }
  // The decode-sized form's staged rows ending in a k-tile of one group (in 160), by token, and tiles with 1-3
  // absent tokens' rows left unwritten.
  compare_with_cpu(*ctx, 16, 4, 2, 64, 160, 29, 0, DType::bf16, false, Inputs::by_token, rng);
  compare_with_cpu(*ctx, 16, 8, 4, 128, 2880, 7, 0, DType::f32, true, Inputs::by_token, rng);
  // More items than an H200 has SMs (28 token tiles x 15 row blocks): the persistent form's CTAs take 3-4 items each,
  // through both scale blocks and every stage's phases.
  compare_with_cpu(*ctx, 192, 4, 4, 1920, 256, 1200, 0, DType::bf16, false, Inputs::by_entry, rng);
  compare_with_cpu(*ctx, 192, 4, 4, 1920, 256, 1200, 0, DType::bf16, true, Inputs::by_entry, rng);
  // Out 1,984 = 15.5 row blocks: each token tile's last item has 64 rows (the second warpgroup runs no k-tiles, the
  // converters convert half a tile), among 128-row items on the same CTAs' stages and barriers.
  compare_with_cpu(*ctx, 192, 4, 4, 1984, 256, 1200, 0, DType::bf16, false, Inputs::by_entry, rng);
  compare_with_cpu(*ctx, 192, 4, 4, 1984, 256, 1200, 0, DType::bf16, true, Inputs::by_entry, rng);
  // The slots' order: 32 experts of ~87 tokens (one tile each, of several widths: widest first) and of ~190 (several
  // tiles, each expert's side by side, then the one-tile experts), with 64-row items (out 192); 300 experts (their
  // offsets in global memory: expert order).
  for (std::int64_t S : {700, 1500})
    compare_with_cpu(*ctx, 192, 32, 4, 192, 320, S, 0, DType::bf16, false, Inputs::by_entry, rng);
  compare_with_cpu(*ctx, 192, 300, 4, 192, 320, 400, 0, DType::bf16, false, Inputs::by_entry, rng);
}

// The warp-specialised form's CTAs claim items as they free up: the same bits as fixed shares (each item's sums do
// not depend on which CTA runs it), launch after launch on one counter, which each launch leaves at zero. Uneven
// experts (items of different widths), 64-row items among 128-row ones (out 1,984); 2 k-tiles (fewer than the
// stages: item hand-overs back to back) and 23.
TEST(CudaMoeWgmmaFp8, claimed_items_give_the_fixed_shares_bits) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(907);
  for (const int in : {256, 2880}) {
    SCOPED_TRACE(::testing::Message() << "in " << in);
    const int E = 8, k = 2, out = 1984;
    const std::int64_t S = 1500, A = S * k;
    const ExpertWeights d = upload_experts(*ctx, encoded_experts(E, out, in, DType::bf16, rng));
    Tensor indices = Tensor::zeros({S, k}, DType::i32);
    for (std::int64_t s = 0; s < S; ++s) {  // expert 0 in every token, the second expert skewed to low ids
      indices.data<std::int32_t>()[s * k] = 0;
      indices.data<std::int32_t>()[s * k + 1] = 1 + static_cast<int>((rng() % 7) * (rng() % 7) / 6);
    }
    const Groups g = group(*ctx, indices, E);
    Tensor x8 = Tensor::zeros({A, in}, DType::f8_e4m3), sx = Tensor::zeros({A}, DType::f32);
    const Tensor x = optest::random_f32({A, in}, rng);
    for (std::int64_t p = 0; p < A; ++p)
      sx.data<float>()[p] = fp8_quantize_row(x.data<float>() + p * in, in, x8.data<std::uint8_t>() + p * in).scale;
    const Tensor dx8 = upload(*ctx, x8), dsx = upload(*ctx, sx);
    const std::int64_t slots = mxfp4_wgmma_launch_slots(E, A, 192);
    auto run = [&](bool claims) {
      Tensor y = poisoned(*ctx, {A, out}, DType::f32);
      const Status st = mxfp4_grouped_gemm_wgmma_fp8_cuda(dx8, dsx, false, d, g.view(claims), 192, slots, nullptr, y,
                                                          ctx->stream());
      EXPECT_TRUE(st.ok()) << st.error().message;
      return download(*ctx, y);
    };
    const Tensor fixed = run(false);
    EXPECT_EQ(cudatest::count_nan(fixed), 0);
    for (int launch = 0; launch < 3; ++launch) {
      const Tensor claimed = run(true);
      EXPECT_EQ(std::memcmp(claimed.raw(), fixed.raw(), fixed.nbytes()), 0) << "launch " << launch;
      EXPECT_EQ(download(*ctx, g.item_counter).data<std::int32_t>()[0], 0) << "launch " << launch;
    }
  }
}

}  // namespace
}  // namespace day0
