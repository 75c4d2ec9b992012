// RoPE: the CPU rotation of half-split pairs (i, i + r/2) against a double reference, and the inverse
// frequency tables (default and YaRN) against the formula of REFERENCE §0.2 evaluated in double here.
#include "ops/rope.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>
#include <vector>

#include "op_test_util.h"
#include "ops/cpu/cpu_ops.h"

namespace day0 {
namespace {

using optest::i32_tensor;
using optest::random_f32;

// Random inverse frequencies in (0, 1], the first one 1 (the fastest lane), as a real table has.
std::vector<float> random_inv_freq(std::mt19937& rng, int half) {
  std::uniform_real_distribution<float> dist(1e-4f, 1.f);
  std::vector<float> inv(half);
  for (auto& f : inv) f = dist(rng);
  if (half > 0) inv[0] = 1.f;
  return inv;
}

Tensor table(const std::vector<float>& inv) {
  Tensor t = Tensor::zeros({static_cast<std::int64_t>(inv.size())}, DType::f32);
  std::copy(inv.begin(), inv.end(), t.data<float>());
  return t;
}

// Checks x_after against the rotation of x_before in double: for each head, pair (i, i + half) rotated by
// pos * inv_freq[i] and scaled by `af`; lanes from 2 * half on untouched.
void expect_rotated(const Tensor& before, const Tensor& after, int n_heads, int head_dim, const std::vector<int>& pos,
                    const std::vector<float>& inv, double af) {
  const int half = static_cast<int>(inv.size());
  for (std::size_t s = 0; s < pos.size(); ++s)
    for (int h = 0; h < n_heads; ++h) {
      const std::int64_t base = std::int64_t(s) * n_heads * head_dim + std::int64_t(h) * head_dim;
      const float* x = before.data<float>() + base;
      const float* y = after.data<float>() + base;
      for (int i = 0; i < half; ++i) {
        const double angle = double(pos[s]) * double(inv[i]), a = x[i], b = x[i + half];
        const double mag = af * (std::fabs(a) + std::fabs(b));
        // The op forms the angle in f32 as transformers does: that rounding (|angle| 2^-24) dominates at large
        // positions; 1e-6 relative covers the f32 products and sums.
        const double tol = mag * (1e-6 + std::fabs(angle) * 0x1p-23) + 1e-7;
        EXPECT_NEAR(y[i], af * (a * std::cos(angle) - b * std::sin(angle)), tol)
            << "s " << s << " h " << h << " i " << i;
        EXPECT_NEAR(y[i + half], af * (b * std::cos(angle) + a * std::sin(angle)), tol)
            << "s " << s << " h " << h << " i " << i;
      }
      for (int i = 2 * half; i < head_dim; ++i) EXPECT_EQ(y[i], x[i]) << "pass-through lane " << i;
    }
}

TEST(Rope, rotates_half_split_pairs_by_position_times_inv_freq_scaled_by_attention_factor) {
  std::mt19937 rng(901);
  CpuOps ops;
  struct Case {
    int n_heads, head_dim, rotary_dim;
  };
  for (Case c : {Case{3, 10, 10}, Case{2, 64, 64}, Case{4, 10, 6}, Case{1, 7, 4}})  // full and partial rotary
    for (const std::vector<int>& pos : {std::vector<int>{17}, {0, 5, 17, 4097}})
      for (double af : {1.0, yarn_get_mscale(32.0)}) {
        const auto S = static_cast<std::int64_t>(pos.size());
        Tensor x = random_f32({S, std::int64_t(c.n_heads) * c.head_dim}, rng, -2.f, 2.f);
        const Tensor before = x.clone();
        const std::vector<float> inv = random_inv_freq(rng, c.rotary_dim / 2);
        ASSERT_TRUE(ops.rope(x, c.n_heads, c.head_dim, i32_tensor(pos), table(inv), static_cast<float>(af)).ok());
        SCOPED_TRACE(::testing::Message() << "heads " << c.n_heads << " d " << c.head_dim << " r " << c.rotary_dim
                                          << " S " << S << " af " << af);
        expect_rotated(before, x, c.n_heads, c.head_dim, pos, inv, static_cast<double>(static_cast<float>(af)));
      }
}

TEST(Rope, preserves_the_norm_of_every_pair_when_attention_factor_is_one) {
  std::mt19937 rng(902);
  CpuOps ops;
  const int n_heads = 2, head_dim = 16, half = 8;
  const std::vector<int> pos = {1, 100, 4096};
  Tensor x = random_f32({3, n_heads * head_dim}, rng, -3.f, 3.f);
  const Tensor before = x.clone();
  ASSERT_TRUE(ops.rope(x, n_heads, head_dim, i32_tensor(pos), table(random_inv_freq(rng, half)), 1.f).ok());
  for (std::int64_t s = 0; s < 3; ++s)
    for (int h = 0; h < n_heads; ++h)
      for (int i = 0; i < half; ++i) {
        const std::int64_t o = s * n_heads * head_dim + h * head_dim + i;
        const double a0 = before.data<float>()[o], b0 = before.data<float>()[o + half];
        const double a1 = x.data<float>()[o], b1 = x.data<float>()[o + half];
        const double n0 = std::hypot(a0, b0);
        // A 2x2 rotation in f32 (f32 cos/sin, two products and a sum per lane): a few ulps of the norm.
        EXPECT_NEAR(std::hypot(a1, b1), n0, 1e-6 * n0 + 1e-7) << "s " << s << " h " << h << " i " << i;
      }
}

TEST(Rope, position_zero_is_the_identity_and_only_the_attention_factor_scales_it) {
  std::mt19937 rng(903);
  CpuOps ops;
  const int n_heads = 3, head_dim = 10, half = 4;  // lanes 8, 9 pass through
  Tensor x = random_f32({2, n_heads * head_dim}, rng, -2.f, 2.f);
  const Tensor before = x.clone();
  ASSERT_TRUE(ops.rope(x, n_heads, head_dim, i32_tensor({0, 0}), table(random_inv_freq(rng, half)), 1.f).ok());
  for (std::int64_t i = 0; i < x.numel(); ++i) EXPECT_EQ(x.data<float>()[i], before.data<float>()[i]) << i;  // exact

  ASSERT_TRUE(ops.rope(x, n_heads, head_dim, i32_tensor({0, 0}), table(random_inv_freq(rng, half)), 1.5f).ok());
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const bool rotated = i % head_dim < 2 * half;
    // x * 1.5 is one exact f32 product here (1.5 has 2 significant bits, inputs are f32).
    EXPECT_FLOAT_EQ(x.data<float>()[i], before.data<float>()[i] * (rotated ? 1.5f : 1.f)) << i;
  }
}

TEST(Rope, rejects_bad_positions_widths_and_a_rotary_dim_wider_than_the_head) {
  std::mt19937 rng(904);
  CpuOps ops;
  Tensor x = random_f32({2, 16}, rng);
  const std::vector<float> inv = random_inv_freq(rng, 4);
  EXPECT_FALSE(ops.rope(x, 2, 8, i32_tensor({0}), table(inv), 1.f).ok());                         // S mismatch
  EXPECT_FALSE(ops.rope(x, 2, 8, Tensor::zeros({2}, DType::f32), table(inv), 1.f).ok());          // positions not i32
  EXPECT_FALSE(ops.rope(x, 3, 8, i32_tensor({0, 1}), table(inv), 1.f).ok());                      // 3 * 8 != 16
  EXPECT_FALSE(ops.rope(x, 2, 8, i32_tensor({0, 1}), table(random_inv_freq(rng, 5)), 1.f).ok());  // 2 * 5 > 8
}

// --- inverse frequencies ---

// REFERENCE §0.2 YaRN (and the default table when kind is default_), all in double.
std::vector<double> ref_inv_freq(const RopeSpec& r) {
  const int R = r.rotary_dim, half = R / 2;
  const double base = r.theta;
  auto corr_dim = [&](double n) {
    return R * std::log(r.original_max_position / (n * 2 * std::numbers::pi)) / (2 * std::log(base));
  };
  double low = corr_dim(r.beta_fast), high = corr_dim(r.beta_slow);
  if (r.truncate) low = std::floor(low), high = std::ceil(high);
  low = std::max(low, 0.0);
  high = std::min(high, double(R - 1));
  if (low == high) high += 0.001;
  std::vector<double> inv(half);
  for (int i = 0; i < half; ++i) {
    const double pos_freq = std::pow(base, 2.0 * i / R);
    const double extra = 1 / pos_freq, inter = 1 / (r.factor * pos_freq);
    if (r.kind == RopeKind::default_) {
      inv[i] = extra;
      continue;
    }
    const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0), extra_w = 1 - ramp;
    inv[i] = inter * (1 - extra_w) + extra * extra_w;
  }
  return inv;
}

::testing::AssertionResult rel_close(const std::vector<float>& got, const std::vector<double>& want, double rtol) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << got.size() << " vs " << want.size() << " values";
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= rtol * std::fabs(want[i])))
      return ::testing::AssertionFailure() << "i " << i << ": got " << got[i] << ", want " << want[i];
  return ::testing::AssertionSuccess();
}

RopeSpec gpt_oss_20b(bool truncate) {
  RopeSpec r;
  r.kind = RopeKind::yarn, r.theta = 150000, r.rotary_dim = 64, r.factor = 32, r.beta_fast = 32, r.beta_slow = 1;
  r.original_max_position = 4096, r.truncate = truncate;
  return r;
}

// f32 pow, one f32 division and (YaRN) an f32 ramp vs double: a few ulps (measured < 3e-7 on these cases).
constexpr double kDefaultRtol = 1e-6, kYarnRtol = 1e-6;

TEST(Rope, default_inv_freq_is_one_over_theta_to_the_two_i_over_r) {
  for (auto [theta, r] : {std::pair<double, int>{10000, 64}, {150000, 64}, {500000, 6}, {10000, 128}}) {
    RopeSpec spec;
    spec.kind = RopeKind::default_, spec.theta = theta, spec.rotary_dim = r;
    const std::vector<float> got = rope_inv_freq(spec);
    std::vector<double> want(r / 2);
    for (int i = 0; i < r / 2; ++i) want[i] = 1.0 / std::pow(theta, 2.0 * i / r);
    EXPECT_TRUE(rel_close(got, want, kDefaultRtol)) << "theta " << theta << " r " << r;
  }
  RopeSpec none;
  none.rotary_dim = 8;
  EXPECT_EQ(rope_inv_freq(none), std::vector<float>(4, 0.f));
}

TEST(Rope, yarn_inv_freq_matches_reference_for_gpt_oss_20b_with_and_without_truncation) {
  for (bool truncate : {false, true}) {
    const std::vector<float> got = rope_inv_freq(gpt_oss_20b(truncate));
    EXPECT_TRUE(rel_close(got, ref_inv_freq(gpt_oss_20b(truncate)), kYarnRtol)) << "truncate " << truncate;
    // The ramp runs over dims ~8.1..17.4: the fastest lane is pure extrapolation, the slowest pure interpolation.
    EXPECT_FLOAT_EQ(got[0], 1.f);
    EXPECT_NEAR(got[31], 1.0 / (32 * std::pow(150000.0, 62.0 / 64)), kYarnRtol * got[31]);
  }
  const std::vector<float> plain = rope_inv_freq(gpt_oss_20b(false)), truncated = rope_inv_freq(gpt_oss_20b(true));
  double max_rel = 0;
  for (int i = 0; i < 32; ++i) max_rel = std::max(max_rel, std::fabs(double(plain[i]) - truncated[i]) / plain[i]);
  EXPECT_GT(max_rel, 1e-2);  // floor/ceil move the ramp ends: the tables must differ
}

TEST(Rope, yarn_inv_freq_handles_a_zero_width_ramp_and_clamps_its_ends) {
  RopeSpec same = gpt_oss_20b(false);
  same.beta_fast = same.beta_slow = 8;  // low == high: the ramp becomes a step 0.001 wide
  EXPECT_TRUE(rel_close(rope_inv_freq(same), ref_inv_freq(same), kYarnRtol));
  same.beta_fast = same.beta_slow = 4096 / (2 * std::numbers::pi);  // both ends exactly dim 0: lane 0 sits on them
  const std::vector<float> at_zero = rope_inv_freq(same);
  EXPECT_TRUE(rel_close(at_zero, ref_inv_freq(same), kYarnRtol));
  EXPECT_EQ(at_zero[0], 1.f);  // ramp 0 / 0.001: pure extrapolation, not 0 / 0
  RopeSpec wide = gpt_oss_20b(false);
  wide.beta_fast = 1e6, wide.beta_slow = 1e-12;  // corr dims ~-20 and ~92: beyond [0, r-1] on both sides
  EXPECT_TRUE(rel_close(rope_inv_freq(wide), ref_inv_freq(wide), kYarnRtol));
  RopeSpec small = gpt_oss_20b(true);
  small.rotary_dim = 6, small.theta = 10000, small.factor = 4, small.original_max_position = 64;
  EXPECT_TRUE(rel_close(rope_inv_freq(small), ref_inv_freq(small), kYarnRtol));
}

TEST(Rope, yarn_mscale_is_one_tenth_ln_factor_plus_one) {
  EXPECT_NEAR(yarn_get_mscale(32.0), 0.1 * std::log(32.0) + 1.0, 1e-12);
  EXPECT_NEAR(yarn_get_mscale(32.0), 1.34657, 1e-5);
  EXPECT_NEAR(yarn_get_mscale(4.0, 0.5), 0.05 * std::log(4.0) + 1.0, 1e-12);
  EXPECT_EQ(yarn_get_mscale(1.0), 1.0);
  EXPECT_EQ(yarn_get_mscale(0.5), 1.0);
}

}  // namespace
}  // namespace day0
