// CPU MoE ops against naive double references: router top-k + softmax, clamped SwiGLU, the MXFP4 expert
// matmul (weights decoded into dense double matrices) and the routed-expert combination.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "op_test_util.h"
#include "ops/cpu/cpu_ops.h"
#include "quant/fp8_experts.h"
#include "quant/mxfp4.h"

namespace day0 {
namespace {

using optest::all_close;
using optest::i32_tensor;
using optest::random_f32;
using optest::to_double;

// --- router ---

TEST(CpuOpsMoe, router_picks_top_k_descending_and_softmaxes_the_selected_logits) {
  std::mt19937 rng(501);
  CpuOps ops;
  for (std::int64_t E : {5, 8, 32})
    for (int k : {1, 2, 4, static_cast<int>(E)}) {
      if (k > E) continue;
      const std::int64_t S = 3;
      Tensor logits = random_f32({S, E}, rng, -4.f, 4.f);
      Tensor idx = Tensor::zeros({S, k}, DType::i32), w = Tensor::zeros({S, k}, DType::f32);
      ASSERT_TRUE(ops.router_topk_softmax(logits, k, idx, w).ok());
      const std::vector<double> lv = to_double(logits);
      std::vector<double> want_w;
      for (std::int64_t s = 0; s < S; ++s) {
        std::vector<int> order(E);
        std::iota(order.begin(), order.end(), 0);
        std::sort(order.begin(), order.end(),
                  [&](int a, int b) { return lv[s * E + a] != lv[s * E + b] ? lv[s * E + a] > lv[s * E + b] : a < b; });
        double denom = 0, sum = 0;
        for (int j = 0; j < k; ++j) denom += std::exp(lv[s * E + order[j]]);
        for (int j = 0; j < k; ++j) {
          EXPECT_EQ(idx.data<std::int32_t>()[s * k + j], order[j]) << "E=" << E << " k=" << k << " s=" << s;
          want_w.push_back(std::exp(lv[s * E + order[j]]) / denom);
          sum += w.data<float>()[s * k + j];
        }
        EXPECT_NEAR(sum, 1.0, 1e-6);  // k f32 probabilities, each within a few ulps
      }
      // f32 exp and division vs double: a few ulps relative.
      EXPECT_TRUE(all_close(w, want_w, 1e-6, 1e-7)) << "E=" << E << " k=" << k;
    }
}

TEST(CpuOpsMoe, router_breaks_exact_ties_by_lower_index_first) {
  CpuOps ops;
  Tensor logits = optest::f32_tensor({2, 5}, {1, 3, 3, 0, 3, /**/ 2, 2, 2, 2, 2});
  Tensor idx = Tensor::zeros({2, 3}, DType::i32), w = Tensor::zeros({2, 3}, DType::f32);
  ASSERT_TRUE(ops.router_topk_softmax(logits, 3, idx, w).ok());
  const std::vector<int> want = {1, 2, 4, 0, 1, 2};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(idx.data<std::int32_t>()[i], want[i]) << i;
  // Equal logits give equal weights 1/3 (one f32 rounding).
  EXPECT_TRUE(all_close(w, std::vector<double>(6, 1.0 / 3.0), 1e-7, 0));
}

TEST(CpuOpsMoe, router_rejects_k_outside_one_to_E) {
  std::mt19937 rng(502);
  CpuOps ops;
  Tensor logits = random_f32({2, 4}, rng);
  for (int k : {0, -1, 5}) {
    Tensor idx = Tensor::zeros({2, std::max(k, 1)}, DType::i32), w = Tensor::zeros({2, std::max(k, 1)}, DType::f32);
    EXPECT_FALSE(ops.router_topk_softmax(logits, k, idx, w).ok()) << "k=" << k;
  }
}

// --- swiglu ---

double ref_swiglu(double gate, double up, const SwigluParams& p) {
  const double g = std::min(gate, double(p.limit)), u = std::clamp(up, -double(p.limit), double(p.limit));
  return (u + 1.0) * g / (1.0 + std::exp(-p.alpha * g));
}

// Packs gate/up [n, I] into gate_up [n, 2I] in the chosen layout.
Tensor pack(const std::vector<float>& gate, const std::vector<float>& up, std::int64_t n, std::int64_t I, bool inter) {
  Tensor gu = Tensor::zeros({n, 2 * I}, DType::f32);
  for (std::int64_t s = 0; s < n; ++s)
    for (std::int64_t j = 0; j < I; ++j) {
      gu.data<float>()[s * 2 * I + (inter ? 2 * j : j)] = gate[s * I + j];
      gu.data<float>()[s * 2 * I + (inter ? 2 * j + 1 : I + j)] = up[s * I + j];
    }
  return gu;
}

TEST(CpuOpsMoe, swiglu_clamped_matches_formula_for_interleaved_and_split_layouts) {
  std::mt19937 rng(601);
  std::uniform_real_distribution<float> dist(-12.f, 12.f);  // beyond the limit 7 on both sides
  CpuOps ops;
  for (bool inter : {true, false})
    for (auto [n, I] : {std::pair<std::int64_t, std::int64_t>{1, 5}, {3, 16}, {4, 33}}) {
      std::vector<float> gate(n * I), up(n * I);
      for (auto& g : gate) g = dist(rng);
      for (auto& u : up) u = dist(rng);
      SwigluParams p;
      p.interleaved = inter;
      std::vector<double> want(n * I);
      for (std::int64_t i = 0; i < n * I; ++i) want[i] = ref_swiglu(gate[i], up[i], p);
      Tensor out = Tensor::zeros({n, I}, DType::f32);
      ASSERT_TRUE(ops.swiglu_clamped(pack(gate, up, n, I, inter), p, out).ok());
      // f32 exp/divide/multiply chain: a few ulps relative; atol for outputs near 0.
      EXPECT_TRUE(all_close(out, want, 1e-5, 1e-6)) << "interleaved " << inter << " n=" << n << " I=" << I;
    }
}

TEST(CpuOpsMoe, swiglu_clamps_gate_from_above_only_and_up_on_both_sides) {
  CpuOps ops;
  SwigluParams p;
  p.alpha = 0.1f;  // a soft sigmoid, so a clamp at -7 on the gate would show
  p.interleaved = false;
  const std::vector<float> gate = {-50.f, 30.f, 2.f, 2.f}, up = {0.5f, 0.5f, -30.f, 30.f};
  Tensor out = Tensor::zeros({1, 4}, DType::f32);
  ASSERT_TRUE(ops.swiglu_clamped(pack(gate, up, 1, 4, false), p, out).ok());
  std::vector<double> want(4);
  for (int j = 0; j < 4; ++j) want[j] = ref_swiglu(gate[j], up[j], p);
  EXPECT_TRUE(all_close(out, want, 1e-5, 1e-6));  // same f32-chain bound as above
  const double gate_clamped_below = 1.5 * -7.0 / (1.0 + std::exp(0.7));
  EXPECT_GT(std::fabs(out.data<float>()[0] - gate_clamped_below), 1.0);          // -0.33 vs -2.32
  EXPECT_NEAR(out.data<float>()[2], -6.0 * 2.0 / (1.0 + std::exp(-0.2)), 1e-5);  // up -30 -> -7
  EXPECT_NEAR(out.data<float>()[3], 8.0 * 2.0 / (1.0 + std::exp(-0.2)), 1e-5);   // up 30 -> 7
}

// --- MXFP4 experts ---

struct Experts {
  ExpertWeights w;
  std::vector<double> dense;  // [E, out, in], decoded
};

// Random weights in [-scale, scale] quantised row by row; bias random f32.
Experts make_experts(std::mt19937& rng, int E, int out, int in, float scale) {
  Experts ex;
  const std::int64_t groups = in / kMxfp4GroupSize;
  ex.w.storage = ExpertStorage::mxfp4;
  ex.w.blocks = Tensor::zeros({E, out, groups, kMxfp4GroupBytes}, DType::u8);
  ex.w.scales = Tensor::zeros({E, out, groups}, DType::u8);
  ex.w.bias = random_f32({E, out}, rng, -0.5f, 0.5f);
  ex.w.n_experts = E, ex.w.out = out, ex.w.in = in;
  Tensor raw = random_f32({E, out, in}, rng, -scale, scale);
  ex.dense.resize(std::size_t(E) * out * in);
  std::vector<float> row(in);
  for (std::int64_t r = 0; r < std::int64_t(E) * out; ++r) {
    std::uint8_t* blocks = ex.w.blocks.data<std::uint8_t>() + r * groups * kMxfp4GroupBytes;
    std::uint8_t* scales = ex.w.scales.data<std::uint8_t>() + r * groups;
    mxfp4_encode_row(raw.data<float>() + r * in, in, blocks, scales);
    mxfp4_decode_row(blocks, scales, in, row.data());
    std::copy(row.begin(), row.end(), ex.dense.begin() + r * in);
  }
  EXPECT_GT(*std::max_element(ex.dense.begin(), ex.dense.end()), 0.0);  // the quantised weights are not all zero
  return ex;
}

// y = W_e x + b_e in double.
std::vector<double> ref_expert(const Experts& ex, int e, const std::vector<double>& x) {
  const std::vector<double> b = to_double(ex.w.bias);
  std::vector<double> y(ex.w.out);
  for (int o = 0; o < ex.w.out; ++o) {
    double acc = b[std::size_t(e) * ex.w.out + o];
    for (int i = 0; i < ex.w.in; ++i) acc += ex.dense[(std::size_t(e) * ex.w.out + o) * ex.w.in + i] * x[i];
    y[o] = acc;
  }
  return y;
}

TEST(CpuOpsMoe, expert_matmul_matches_the_decoded_dense_matrix_times_x_plus_bias) {
  std::mt19937 rng(701);
  CpuOps ops;
  for (auto [out_dim, in_dim] : {std::pair<int, int>{5, 32}, {17, 96}})
    for (std::int64_t n : {1, 4}) {
      Experts ex = make_experts(rng, 3, out_dim, in_dim, 2.f);
      Tensor x = random_f32({n, in_dim}, rng);
      const std::vector<double> xv = to_double(x);
      for (int e = 0; e < 3; ++e) {
        std::vector<double> want;
        for (std::int64_t s = 0; s < n; ++s) {
          auto y = ref_expert(ex, e, std::vector<double>(xv.begin() + s * in_dim, xv.begin() + (s + 1) * in_dim));
          want.insert(want.end(), y.begin(), y.end());
        }
        Tensor out = Tensor::zeros({n, out_dim}, DType::f32);
        ASSERT_TRUE(ops.expert_matmul(x, ex.w, e, out).ok());
        // Decoded weights are exact; f32 dot of <= 96 terms of size <= 2: absolute error < 1e-5.
        EXPECT_TRUE(all_close(out, want, 1e-5, 1e-5))
            << "out " << out_dim << " in " << in_dim << " n " << n << " e " << e;
      }
    }
}

TEST(CpuOpsMoe, expert_matmul_rejects_an_out_of_range_expert_and_malformed_weights) {
  std::mt19937 rng(702);
  CpuOps ops;
  Experts ex = make_experts(rng, 3, 4, 32, 1.f);
  Tensor x = random_f32({2, 32}, rng), out = Tensor::zeros({2, 4}, DType::f32);
  EXPECT_FALSE(ops.expert_matmul(x, ex.w, 3, out).ok());
  EXPECT_FALSE(ops.expert_matmul(x, ex.w, -1, out).ok());
  ExpertWeights bad = ex.w;
  bad.in = 64;  // blocks hold 32 inputs per row
  EXPECT_FALSE(ops.expert_matmul(x, bad, 0, out).ok());
  ExpertWeights int_bias = ex.w;  // an i32 bias used to read as NaN
  int_bias.bias = Tensor::zeros({3, 4}, DType::i32);
  EXPECT_FALSE(ops.expert_matmul(x, int_bias, 0, out).ok());
  ExpertWeights device_blocks = ex.w;
  device_blocks.blocks = Tensor::borrow(ex.w.blocks.raw(), ex.w.blocks.shape(), DType::u8, nullptr, Device::cuda);
  EXPECT_FALSE(ops.expert_matmul(x, device_blocks, 0, out).ok());
}

// MXFP4 experts as `day0 convert` stores them: bf16 (exact decode) or e4m3 codes with power-of-two row scales.
ExpertWeights stored(const ExpertWeights& mx, ExpertStorage storage) {
  ExpertWeights w = mx;
  w.storage = storage;
  w.blocks = w.scales = Tensor();
  const std::int64_t rows = std::int64_t(mx.n_experts) * mx.out, groups = mx.in / kMxfp4GroupSize;
  const bool bf16 = storage == ExpertStorage::bf16;
  w.values = Tensor::zeros({mx.n_experts, mx.out, mx.in}, bf16 ? DType::bf16 : DType::f8_e4m3);
  if (!bf16) w.row_scales = Tensor::zeros({mx.n_experts, mx.out}, DType::f32);
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::uint8_t* b = mx.blocks.data<std::uint8_t>() + r * groups * kMxfp4GroupBytes;
    const std::uint8_t* sc = mx.scales.data<std::uint8_t>() + r * groups;
    if (bf16) {
      mxfp4_decode_row_bf16(b, sc, mx.in, w.values.data<std::uint16_t>() + r * mx.in);
    } else {
      const Fp8Row row = mxfp4_row_to_fp8(b, sc, mx.in, w.values.data<std::uint8_t>() + r * mx.in);
      EXPECT_EQ(row.inexact, 0);  // exponents of encoded random rows span far fewer than 14 binades
      w.row_scales.data<float>()[r] = row.scale;
    }
  }
  return w;
}

TEST(CpuOpsMoe, expert_matmul_over_stored_bf16_and_fp8_experts_equals_the_mxfp4_result_bit_for_bit) {
  std::mt19937 rng(703);
  CpuOps ops;
  Experts ex = make_experts(rng, 3, 17, 96, 2.f);
  const Tensor x = random_f32({4, 96}, rng);
  for (ExpertStorage storage : {ExpertStorage::bf16, ExpertStorage::fp8_rowwise}) {
    const ExpertWeights w = stored(ex.w, storage);
    for (int e = 0; e < 3; ++e) {
      Tensor want = Tensor::zeros({4, 17}, DType::f32), got = Tensor::zeros({4, 17}, DType::f32);
      ASSERT_TRUE(ops.expert_matmul(x, ex.w, e, want).ok());
      const Status st = ops.expert_matmul(x, w, e, got);
      ASSERT_TRUE(st.ok()) << st.error().message;
      // The decoded rows are equal, so are the f32 dot products in the same order.
      EXPECT_EQ(std::memcmp(want.raw(), got.raw(), want.nbytes()), 0)
          << expert_storage_name(storage) << " expert " << e;
    }
    ExpertWeights wrong_dtype = w;  // values of the other storage's dtype
    wrong_dtype.values = Tensor::zeros({3, 17, 96}, storage == ExpertStorage::bf16 ? DType::u8 : DType::bf16);
    Tensor out = Tensor::zeros({4, 17}, DType::f32);
    const Status st = ops.expert_matmul(x, wrong_dtype, 0, out);
    ASSERT_FALSE(st.ok());
    EXPECT_TRUE(optest::contains(st.error().message, "expert values")) << st.error().message;
  }
  ExpertWeights no_scales = stored(ex.w, ExpertStorage::fp8_rowwise);
  no_scales.row_scales = Tensor();
  Tensor out = Tensor::zeros({4, 17}, DType::f32);
  EXPECT_FALSE(ops.expert_matmul(x, no_scales, 0, out).ok());
}

// The tiled block order (ExpertStorage::mxfp4_tiled) decodes to the same rows: the same bits, with a last tile
// part-filled (3 groups); out off the tile height is refused.
TEST(CpuOpsMoe, expert_matmul_over_tiled_mxfp4_blocks_equals_the_row_major_result_bit_for_bit) {
  std::mt19937 rng(704);
  CpuOps ops;
  Experts ex = make_experts(rng, 3, 32, 96, 2.f);
  const Tensor x = random_f32({4, 96}, rng);
  auto tiled = mxfp4_tiled_experts(ex.w);
  ASSERT_TRUE(tiled.ok()) << tiled.error().message;
  EXPECT_EQ(tiled->blocks.shape(), (Shape{3, 32, 4, 16}));
  for (int e = 0; e < 3; ++e) {
    Tensor want = Tensor::zeros({4, 32}, DType::f32), got = Tensor::zeros({4, 32}, DType::f32);
    ASSERT_TRUE(ops.expert_matmul(x, ex.w, e, want).ok());
    const Status st = ops.expert_matmul(x, *tiled, e, got);
    ASSERT_TRUE(st.ok()) << st.error().message;
    EXPECT_EQ(std::memcmp(want.raw(), got.raw(), want.nbytes()), 0) << "expert " << e;
  }
  const auto odd = mxfp4_tiled_experts(make_experts(rng, 1, 17, 96, 2.f).w);
  ASSERT_FALSE(odd.ok());
  EXPECT_TRUE(optest::contains(odd.error().message, "multiple of 16")) << odd.error().message;
  ExpertWeights unpadded = *tiled;  // row-major-sized blocks under the tiled storage
  unpadded.blocks = ex.w.blocks;
  Tensor out = Tensor::zeros({4, 32}, DType::f32);
  const Status st = ops.expert_matmul(x, unpadded, 0, out);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(optest::contains(st.error().message, "expert blocks")) << st.error().message;
}

struct Moe {
  Experts gate_up, down;
  SwigluParams p;
};

// out[s] = sum_j w[s,j] * down_e(swiglu(gate_up_e(x[s]))) in double, interleaved gate/up as gpt-oss.
std::vector<double> ref_moe(const Moe& m, const Tensor& x, const std::vector<int>& idx, const std::vector<double>& w) {
  const std::int64_t S = x.size(0), H = x.size(1), k = static_cast<std::int64_t>(idx.size()) / S;
  const std::vector<double> xv = to_double(x);
  std::vector<double> out(S * H, 0.0);
  for (std::int64_t s = 0; s < S; ++s)
    for (std::int64_t j = 0; j < k; ++j) {
      const int e = idx[s * k + j];
      auto gu = ref_expert(m.gate_up, e, std::vector<double>(xv.begin() + s * H, xv.begin() + (s + 1) * H));
      std::vector<double> h(gu.size() / 2);
      for (std::size_t i = 0; i < h.size(); ++i) h[i] = ref_swiglu(gu[2 * i], gu[2 * i + 1], m.p);
      auto y = ref_expert(m.down, e, h);
      for (std::int64_t c = 0; c < H; ++c) out[s * H + c] += w[s * k + j] * y[c];
    }
  return out;
}

Moe make_moe(std::mt19937& rng, int E, int H, int I) {
  // gate_up weights large enough that some gate/up values pass the limit 7 (so the clamps take part).
  return {make_experts(rng, E, 2 * I, H, 1.5f), make_experts(rng, E, H, I, 0.3f), SwigluParams{}};
}

TEST(CpuOpsMoe, moe_experts_matches_reference_with_repeated_and_unused_experts) {
  std::mt19937 rng(801);
  CpuOps ops;
  const int E = 3, H = 64, I = 32;
  Moe m = make_moe(rng, E, H, I);
  // Expert 1 is routed by nobody: poison its bias so any read of it would show as NaN.
  for (int o = 0; o < 2 * I; ++o) m.gate_up.w.bias.data<float>()[1 * 2 * I + o] = NAN;
  struct Case {
    std::vector<int> idx;
    std::int64_t S;
  };
  // Token 2 routes to expert 0 twice; tokens 0 and 1 pick {0, 2} in both orders.
  for (const Case& c : {Case{{2, 0}, 1}, Case{{0, 2, 2, 0, 0, 0, 2, 2, 0, 2}, 5}}) {
    Tensor x = random_f32({c.S, H}, rng), w = random_f32({c.S, 2}, rng, 0.1f, 0.9f);
    Tensor out = Tensor::zeros({c.S, H}, DType::f32);
    Status st = ops.moe_experts(x, i32_tensor(c.idx).view({c.S, 2}), w, m.gate_up.w, m.down.w, m.p, out);
    ASSERT_TRUE(st.ok()) << st.error().message;
    // Two chained f32 matmuls (64 and 32 terms) and swiglu vs double: outputs are O(1), 1e-5 relative + 1e-5 abs.
    EXPECT_TRUE(all_close(out, ref_moe(m, x, c.idx, to_double(w)), 1e-5, 1e-5)) << "S=" << c.S;
  }
}

TEST(CpuOpsMoe, moe_experts_rejects_an_out_of_range_expert_id) {
  std::mt19937 rng(802);
  CpuOps ops;
  Moe m = make_moe(rng, 3, 32, 32);
  Tensor x = random_f32({2, 32}, rng), w = random_f32({2, 2}, rng), out = Tensor::zeros({2, 32}, DType::f32);
  for (int bad : {3, -1}) {
    Status st = ops.moe_experts(x, i32_tensor({0, 1, bad, 2}).view({2, 2}), w, m.gate_up.w, m.down.w, m.p, out);
    ASSERT_FALSE(st.ok()) << bad;
    EXPECT_TRUE(optest::contains(st.error().message, std::to_string(bad))) << st.error().message;
  }
}

}  // namespace
}  // namespace day0
