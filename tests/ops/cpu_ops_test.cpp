// CPU reference ops (embedding, rms_norm, linear, lm_head, add) against naive double formulas written here,
// on seeded random inputs at several shapes; greedy_tokens on rows with known answers; plus the backend registry
// and its coverage table.
#include "ops/cpu/cpu_ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "op_test_util.h"
#include "ops/registry.h"

namespace day0 {
namespace {

using optest::all_close;
using optest::contains;
using optest::i32_tensor;
using optest::random_f32;
using optest::to_bf16;
using optest::to_double;

// --- embedding ---

TEST(CpuOps, embedding_copies_table_rows_exactly_for_f32_and_bf16_tables) {
  std::mt19937 rng(101);
  CpuOps ops;
  const std::int64_t V = 7, H = 5;
  for (bool bf16 : {false, true}) {
    Tensor table = random_f32({V, H}, rng, -3.f, 3.f);
    if (bf16) table = to_bf16(table);
    const std::vector<double> rows = to_double(table);
    for (const std::vector<std::int32_t>& ids : {std::vector<std::int32_t>{4}, {3, 0, 6, 3, 1}}) {
      const std::int64_t S = static_cast<std::int64_t>(ids.size());
      Tensor out = Tensor::zeros({S, H}, DType::f32);
      ASSERT_TRUE(ops.embedding(table, i32_tensor(ids), out).ok());
      std::vector<double> want;
      for (auto id : ids) want.insert(want.end(), rows.begin() + id * H, rows.begin() + (id + 1) * H);
      // A copy (bf16 -> f32 is exact): no tolerance.
      EXPECT_TRUE(all_close(out, want, 0, 0)) << (bf16 ? "bf16" : "f32") << " S=" << S;
    }
  }
}

TEST(CpuOps, embedding_rejects_an_out_of_range_id_naming_the_id_and_vocabulary_size) {
  std::mt19937 rng(102);
  CpuOps ops;
  Tensor table = random_f32({7, 4}, rng), out = Tensor::zeros({2, 4}, DType::f32);
  Status st = ops.embedding(table, i32_tensor({2, 42}), out);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(contains(st.error().message, "42")) << st.error().message;
  EXPECT_TRUE(contains(st.error().message, "7")) << st.error().message;
  EXPECT_FALSE(ops.embedding(table, i32_tensor({-1, 0}), out).ok());
  EXPECT_FALSE(ops.embedding(table, i32_tensor({7, 0}), out).ok());  // V itself is one past the end
}

// --- rms_norm ---

std::vector<double> ref_rms_norm(const Tensor& x, const Tensor& w, double eps, bool plus_one) {
  const std::int64_t S = x.size(0), H = x.size(1);
  const std::vector<double> xv = to_double(x), wv = to_double(w);
  std::vector<double> out(xv.size());
  for (std::int64_t s = 0; s < S; ++s) {
    double ss = 0;
    for (std::int64_t h = 0; h < H; ++h) ss += xv[s * H + h] * xv[s * H + h];
    const double rms = std::sqrt(ss / H + eps);
    for (std::int64_t h = 0; h < H; ++h) out[s * H + h] = (wv[h] + (plus_one ? 1.0 : 0.0)) * xv[s * H + h] / rms;
  }
  return out;
}

TEST(CpuOps, rms_norm_matches_w_times_x_over_root_mean_square_for_f32_and_bf16_weights_and_plus_one) {
  std::mt19937 rng(201);
  CpuOps ops;
  for (auto [S, H] : {std::pair<std::int64_t, std::int64_t>{1, 7}, {3, 64}, {5, 33}})
    for (bool bf16 : {false, true})
      for (bool plus_one : {false, true}) {
        Tensor x = random_f32({S, H}, rng, -4.f, 4.f), w = random_f32({H}, rng, 0.5f, 1.5f);
        if (bf16) w = to_bf16(w);
        Tensor out = Tensor::zeros({S, H}, DType::f32);
        ASSERT_TRUE(ops.rms_norm(x, w, 1e-5f, plus_one, out).ok());
        // f32 sum of H squares and one rsqrt vs double: a few ulps relative per element.
        EXPECT_TRUE(all_close(out, ref_rms_norm(x, w, 1e-5, plus_one), 1e-5, 1e-6))
            << "S=" << S << " H=" << H << " bf16=" << bf16 << " plus_one=" << plus_one;
      }
}

TEST(CpuOps, rms_norm_eps_dominates_a_near_zero_row) {
  CpuOps ops;
  Tensor x = optest::f32_tensor({1, 4}, {1e-4f, -2e-4f, 3e-4f, 0.f}), w = optest::f32_tensor({4}, {1, 2, 3, 4});
  Tensor out = Tensor::zeros({1, 4}, DType::f32);
  ASSERT_TRUE(ops.rms_norm(x, w, 1e-2f, false, out).ok());
  // Same f32-vs-double bound; with eps = 1e-2 >> mean(x^2) the output is ~ w * x / 0.1.
  EXPECT_TRUE(all_close(out, ref_rms_norm(x, w, 1e-2, false), 1e-5, 1e-9));
}

// --- linear / lm_head / add ---

// out[s,o] = sum_i x[s,i] w[o,i] + b[o] in double.
std::vector<double> ref_linear(const Tensor& x, const Tensor& w, const Tensor* bias) {
  const std::int64_t S = x.size(0), in = x.size(1), n_out = w.size(0);
  const std::vector<double> xv = to_double(x), wv = to_double(w);
  const std::vector<double> bv = bias ? to_double(*bias) : std::vector<double>(n_out, 0.0);
  std::vector<double> out(S * n_out);
  for (std::int64_t s = 0; s < S; ++s)
    for (std::int64_t o = 0; o < n_out; ++o) {
      double acc = bv[o];
      for (std::int64_t i = 0; i < in; ++i) acc += xv[s * in + i] * wv[o * in + i];
      out[s * n_out + o] = acc;
    }
  return out;
}

TEST(CpuOps, linear_matches_x_times_w_transposed_plus_bias_for_f32_and_bf16_weights) {
  std::mt19937 rng(301);
  CpuOps ops;
  struct Case {
    std::int64_t S, in, out;
  };
  for (Case c : {Case{1, 5, 3}, Case{4, 33, 7}, Case{3, 64, 17}})
    for (bool bf16 : {false, true})
      for (bool with_bias : {false, true}) {
        Tensor x = random_f32({c.S, c.in}, rng), w = random_f32({c.out, c.in}, rng);
        Tensor b = random_f32({c.out}, rng, -2.f, 2.f);
        if (bf16) w = to_bf16(w), b = to_bf16(b);
        Tensor out = Tensor::zeros({c.S, c.out}, DType::f32);
        ASSERT_TRUE(ops.linear(x, w, with_bias ? b : Tensor(), out).ok());
        // f32 dot products of <= 64 terms in [-1, 1]: absolute error well under 1e-5.
        EXPECT_TRUE(all_close(out, ref_linear(x, w, with_bias ? &b : nullptr), 1e-5, 1e-5))
            << "S=" << c.S << " in=" << c.in << " out=" << c.out << " bf16=" << bf16 << " bias=" << with_bias;
      }
}

TEST(CpuOps, linear_rejects_mismatched_shapes_with_an_error_instead_of_crashing) {
  std::mt19937 rng(302);
  CpuOps ops;
  Tensor x = random_f32({2, 8}, rng), w = random_f32({3, 8}, rng), out = Tensor::zeros({2, 3}, DType::f32);
  ASSERT_TRUE(ops.linear(x, w, Tensor(), out).ok());
  Tensor w_bad_in = random_f32({3, 9}, rng), bias_bad = random_f32({4}, rng),
         out_bad = Tensor::zeros({2, 4}, DType::f32);
  Tensor w_1d = random_f32({24}, rng), x_i32 = Tensor::zeros({2, 8}, DType::i32);
  // A weight marked as device memory must be refused, never dereferenced on the host.
  Tensor w_cuda = Tensor::borrow(w.raw(), w.shape(), DType::f32, nullptr, Device::cuda);
  for (Status st :
       {ops.linear(x, w_bad_in, Tensor(), out), ops.linear(x, w, bias_bad, out), ops.linear(x, w, Tensor(), out_bad),
        ops.linear(x, w_1d, Tensor(), out), ops.linear(x_i32, w, Tensor(), out), ops.lm_head(x, w_bad_in, out),
        ops.linear(x, w_cuda, Tensor(), out)}) {
    ASSERT_FALSE(st.ok());
    EXPECT_TRUE(contains(st.error().message, "linear")) << st.error().message;
  }
}

TEST(CpuOps, lm_head_is_linear_without_bias) {
  std::mt19937 rng(303);
  CpuOps ops;
  for (std::int64_t S : {1, 3}) {
    Tensor x = random_f32({S, 40}, rng), w = to_bf16(random_f32({11, 40}, rng));
    Tensor out = Tensor::zeros({S, 11}, DType::f32);
    ASSERT_TRUE(ops.lm_head(x, w, out).ok());
    // Same f32-dot bound as linear.
    EXPECT_TRUE(all_close(out, ref_linear(x, w, nullptr), 1e-5, 1e-5)) << "S=" << S;
  }
}

TEST(CpuOps, add_accumulates_y_into_x_and_rejects_a_shape_mismatch) {
  std::mt19937 rng(304);
  CpuOps ops;
  Tensor x = random_f32({3, 7}, rng), y = random_f32({3, 7}, rng);
  std::vector<double> want = to_double(x);
  const std::vector<double> yv = to_double(y);
  for (std::size_t i = 0; i < want.size(); ++i) want[i] += yv[i];
  ASSERT_TRUE(ops.add(x, y).ok());
  // One f32 rounding of the sum: 2^-24 relative.
  EXPECT_TRUE(all_close(x, want, 1e-7, 0));
  Tensor y_bad = random_f32({3, 6}, rng);
  EXPECT_FALSE(ops.add(x, y_bad).ok());
}

// --- greedy_tokens ---

// Rows with known answers: ties (the lowest id), -0 against +0 (equal: the lowest), -inf around one finite logit,
// then the unusable rows the host sampler rejects: a NaN and a +inf (the lowest such id), every logit -inf.
TEST(CpuOps, greedy_tokens_picks_the_lowest_id_of_the_largest_logit_and_flags_unusable_rows) {
  CpuOps ops;
  const float inf = INFINITY;
  const std::vector<std::vector<float>> rows = {
      {1.f, 3.f, -2.f, 3.f, 0.f},     {-0.f, 0.f, -1.f, -3.f, -5.f},  {-inf, -inf, -inf, -7.f, -inf},
      {1.f, NAN, 9.f, inf, 2.f},      {0.f, 1.f, 2.f, 3.f, inf},      {-inf, -inf, -inf, -inf, -inf},
      {-1.f, -1.f, -1.f, -1.f, -1.f}};
  const std::vector<std::pair<int, int>> want = {{1, -1}, {0, -1}, {3, -1}, {-1, 1}, {-1, 4}, {-1, -2}, {0, -1}};
  Tensor x = Tensor::zeros({static_cast<std::int64_t>(rows.size()), 5}, DType::f32);
  for (size_t r = 0; r < rows.size(); ++r)
    for (int i = 0; i < 5; ++i) x.data<float>()[r * 5 + i] = rows[r][i];
  const auto R = static_cast<std::int64_t>(rows.size());
  Tensor out = Tensor::zeros({R, 2}, DType::i32), tokens = Tensor::zeros({R}, DType::i32);
  std::fill_n(tokens.data<std::int32_t>(), R, -7);
  ASSERT_TRUE(ops.greedy_tokens(x, out, &tokens).ok());
  for (std::int64_t r = 0; r < R; ++r) {
    const std::int32_t* o = out.data<std::int32_t>() + 2 * r;
    EXPECT_EQ(o[1], want[r].second) << "row " << r;
    if (want[r].second == -1) {
      EXPECT_EQ(o[0], want[r].first) << "row " << r;
    }
    // The next step's ids: the picks again, valid ids even for unusable rows.
    EXPECT_EQ(tokens.data<std::int32_t>()[r], o[0]) << "row " << r;
    EXPECT_TRUE(o[0] >= 0 && o[0] < 5) << "row " << r;
  }
  Tensor wrong = Tensor::zeros({3, 2}, DType::i32);
  Status st = ops.greedy_tokens(x, wrong, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(contains(st.error().message, "out must be contiguous i32 [7, 2]")) << st.error().message;
  Tensor short_tokens = Tensor::zeros({3}, DType::i32);
  st = ops.greedy_tokens(x, out, &short_tokens);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(contains(st.error().message, "tokens must be contiguous i32 [7]")) << st.error().message;
}

// --- registry ---

TEST(OpRegistry, make_ops_cpu_gives_the_cpu_backend) {
  auto ops = make_ops("cpu");
  ASSERT_TRUE(ops.ok()) << ops.error().message;
  EXPECT_EQ((*ops)->backend(), "cpu");
}

// A bf16 KV cache is a cuda option; other dtypes are refused before any device is touched.
TEST(OpRegistry, the_cpu_backend_refuses_a_bf16_kv_cache_by_name) {
  BackendOptions o;
  o.kv_cache_dtype = DType::bf16;
  auto cpu = make_ops("cpu", o);
  ASSERT_FALSE(cpu.ok());
  EXPECT_NE(cpu.error().message.find("KV cache"), std::string::npos) << cpu.error().message;
  o.kv_cache_dtype = DType::f16;
  auto bad = make_ops("cuda", o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("f32 or bf16"), std::string::npos) << bad.error().message;
}

TEST(OpRegistry, unknown_backend_error_lists_the_known_backends) {
  auto ops = make_ops("nope");
  ASSERT_FALSE(ops.ok());
  const std::string& msg = ops.error().message;
  EXPECT_TRUE(contains(msg, "nope")) << msg;
  for (auto name : backend_names()) EXPECT_TRUE(contains(msg, std::string(name))) << msg;
  EXPECT_FALSE(op_coverage("nope", OpKind::linear).ok());
}

// The MXFP4 blocks' placed order (CudaOps::place_weights and inspect's plan both ask): tiles where every tensor's
// rows fit them, rows where one does not or where asked; asking for tiles then is an error naming that tensor.
TEST(OpRegistry, mxfp4_blocks_are_placed_tiled_only_where_every_tensor_fits_the_tiles) {
  const std::vector<Mxfp4BlocksTensor> fit = {{"gate_up", 5760}, {"down", 2880}};
  const std::vector<Mxfp4BlocksTensor> misfit = {{"gate_up", 64}, {"down", 40}};
  for (Mxfp4Order order : {Mxfp4Order::automatic, Mxfp4Order::tiles}) {
    auto r = mxfp4_places_tiled(order, fit);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_TRUE(*r) << mxfp4_order_name(order);
    auto none = mxfp4_places_tiled(order, {});
    ASSERT_TRUE(none.ok());
    EXPECT_FALSE(*none) << mxfp4_order_name(order);
  }
  auto rows = mxfp4_places_tiled(Mxfp4Order::rows, fit);
  ASSERT_TRUE(rows.ok());
  EXPECT_FALSE(*rows);
  auto automatic = mxfp4_places_tiled(Mxfp4Order::automatic, misfit);
  ASSERT_TRUE(automatic.ok()) << automatic.error().message;
  EXPECT_FALSE(*automatic);
  auto tiles = mxfp4_places_tiled(Mxfp4Order::tiles, misfit);
  ASSERT_FALSE(tiles.ok());
  const std::string& msg = tiles.error().message;
  EXPECT_TRUE(contains(msg, "down") && contains(msg, "got 40") && contains(msg, "--mxfp4-order rows")) << msg;
}

TEST(OpRegistry, cuda_coverage_answers_for_every_op_without_a_gpu) {
  for (int k = 0; k < static_cast<int>(OpKind::count_); ++k) {
    auto entry = op_coverage("cuda", static_cast<OpKind>(k));
    ASSERT_TRUE(entry.ok()) << op_kind_name(static_cast<OpKind>(k)) << ": " << entry.error().message;
    EXPECT_NE(op_entry_name(*entry), "?");
  }
}

TEST(OpRegistry, cpu_lm_head_moe_experts_and_add_rms_norm_are_composed_and_every_other_op_is_native) {
  for (int k = 0; k < static_cast<int>(OpKind::count_); ++k) {
    const OpKind kind = static_cast<OpKind>(k);
    auto entry = op_coverage("cpu", kind);
    ASSERT_TRUE(entry.ok());
    const bool composed = kind == OpKind::lm_head || kind == OpKind::moe_experts || kind == OpKind::add_rms_norm;
    EXPECT_EQ(*entry, composed ? OpEntry::composed : OpEntry::native) << op_kind_name(kind);
    EXPECT_EQ(CpuOps().entry(kind), *entry) << op_kind_name(kind);
  }
}

TEST(OpRegistry, cuda_covers_every_op_natively_or_composed_even_without_a_gpu) {
  for (int k = 0; k < static_cast<int>(OpKind::count_); ++k) {
    auto entry = op_coverage("cuda", static_cast<OpKind>(k));
    ASSERT_TRUE(entry.ok());
    EXPECT_TRUE(*entry == OpEntry::native || *entry == OpEntry::composed) << op_kind_name(static_cast<OpKind>(k));
  }
}

}  // namespace
}  // namespace day0
