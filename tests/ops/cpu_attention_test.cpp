// CPU causal GQA attention against a naive double softmax over [allowed logits..., sink] with the sink
// column dropped; allowed keys: k_pos <= q_pos and q_pos - k_pos < window (the window counts the query).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "op_test_util.h"
#include "ops/cpu/cpu_ops.h"

namespace day0 {
namespace {

using optest::all_close;
using optest::contains;
using optest::i32_tensor;
using optest::random_f32;
using optest::to_double;

std::vector<double> ref_attention(const Tensor& q, const Tensor& k, const Tensor& v, const std::vector<int>& q_pos,
                                  const Tensor& sinks, const AttentionParams& p) {
  const std::vector<double> qv = to_double(q), kv = to_double(k), vv = to_double(v);
  const std::vector<double> sv = sinks.defined() && sinks.numel() > 0 ? to_double(sinks) : std::vector<double>{};
  const int d = p.head_dim, group = p.n_heads / p.n_kv_heads;
  const std::int64_t T = k.size(0), qw = std::int64_t(p.n_heads) * d, kw = std::int64_t(p.n_kv_heads) * d;
  std::vector<double> out(q_pos.size() * qw, 0.0);
  for (std::size_t s = 0; s < q_pos.size(); ++s)
    for (int h = 0; h < p.n_heads; ++h) {
      const int kvh = h / group;
      std::vector<double> logit;  // allowed keys, then the sink
      std::vector<std::int64_t> key;
      for (std::int64_t t = 0; t < T; ++t) {
        const bool allowed = t <= q_pos[s] && (p.sliding_window == 0 || q_pos[s] - t < p.sliding_window);
        if (!allowed) continue;
        double dot = 0;
        for (int i = 0; i < d; ++i) dot += qv[s * qw + h * d + i] * kv[t * kw + kvh * d + i];
        logit.push_back(dot * p.scale);
        key.push_back(t);
      }
      if (!sv.empty()) logit.push_back(sv[h]);
      double m = -INFINITY, denom = 0;
      for (double l : logit) m = std::max(m, l);
      for (double l : logit) denom += std::exp(l - m);
      for (std::size_t j = 0; j < key.size(); ++j)  // the sink column (last) carries no value
        for (int i = 0; i < d; ++i)
          out[s * qw + h * d + i] += std::exp(logit[j] - m) / denom * vv[key[j] * kw + kvh * d + i];
    }
  return out;
}

struct Problem {
  Tensor q, k, v, sinks;
  AttentionParams p;
};

Problem make_problem(std::mt19937& rng, int n_heads, int n_kv_heads, int head_dim, std::int64_t S, std::int64_t T,
                     int window, bool with_sinks) {
  Problem pr;
  pr.p = {n_heads, n_kv_heads, head_dim, window, 1.0f / std::sqrt(static_cast<float>(head_dim))};
  // Logits of order a few units, so the softmax is far from uniform.
  pr.q = random_f32({S, std::int64_t(n_heads) * head_dim}, rng, -2.f, 2.f);
  pr.k = random_f32({T, std::int64_t(n_kv_heads) * head_dim}, rng, -2.f, 2.f);
  pr.v = random_f32({T, std::int64_t(n_kv_heads) * head_dim}, rng);
  if (with_sinks) pr.sinks = random_f32({n_heads}, rng, -1.f, 2.f);
  return pr;
}

Tensor run(const Problem& pr, const std::vector<int>& pos) {
  Tensor out = Tensor::zeros({static_cast<std::int64_t>(pos.size()), pr.q.size(1)}, DType::f32);
  Status st = CpuOps().attention(pr.q, pr.k, pr.v, i32_tensor(pos), pr.sinks, pr.p, out);
  EXPECT_TRUE(st.ok()) << st.error().message;
  return out;
}

double norm(const Tensor& t) {
  double s = 0;
  for (double x : to_double(t)) s += x * x;
  return std::sqrt(s);
}

// Query sets: full prefill, decode (S=1 at the last position), and a prefill chunk at an offset.
std::vector<std::vector<int>> query_sets(int T) {
  std::vector<int> all(T);
  for (int t = 0; t < T; ++t) all[t] = t;
  return {all, {T - 1}, {T - 4, T - 3, T - 2}};
}

// f32 dot/exp/accumulate over <= 13 keys and <= 9 lanes vs double: ~1e-6 relative, 1e-5 leaves margin.
constexpr double kRtol = 1e-5, kAtol = 1e-6;

TEST(CpuOpsAttention, causal_gqa_matches_reference_for_prefill_decode_and_chunk_at_offset) {
  std::mt19937 rng(401);
  struct Heads {
    int n, kv;
  };
  for (Heads hd : {Heads{4, 2}, Heads{6, 3}, Heads{8, 1}, Heads{3, 3}})
    for (int head_dim : {8, 5})
      for (const auto& pos : query_sets(9)) {
        Problem pr = make_problem(rng, hd.n, hd.kv, head_dim, static_cast<std::int64_t>(pos.size()), 9, 0, false);
        EXPECT_TRUE(all_close(run(pr, pos), ref_attention(pr.q, pr.k, pr.v, pos, pr.sinks, pr.p), kRtol, kAtol))
            << "heads " << hd.n << "/" << hd.kv << " d=" << head_dim << " S=" << pos.size();
      }
}

TEST(CpuOpsAttention, attention_with_sinks_matches_reference_across_window_boundary) {
  std::mt19937 rng(402);
  for (int window : {1, 3, 4, 13, 100})  // 13 = T: the window never cuts; 100 > T
    for (bool sinks : {false, true})
      for (const auto& pos : query_sets(13)) {
        Problem pr = make_problem(rng, 6, 2, 7, static_cast<std::int64_t>(pos.size()), 13, window, sinks);
        EXPECT_TRUE(all_close(run(pr, pos), ref_attention(pr.q, pr.k, pr.v, pos, pr.sinks, pr.p), kRtol, kAtol))
            << "window " << window << " sinks " << sinks << " S=" << pos.size();
      }
}

TEST(CpuOpsAttention, bf16_sinks_are_read_as_their_f32_values) {
  std::mt19937 rng(403);
  Problem pr = make_problem(rng, 4, 2, 8, 5, 5, 0, true);
  pr.sinks = optest::to_bf16(pr.sinks);
  const std::vector<int> pos = {0, 1, 2, 3, 4};
  EXPECT_TRUE(all_close(run(pr, pos), ref_attention(pr.q, pr.k, pr.v, pos, pr.sinks, pr.p), kRtol, kAtol));
}

TEST(CpuOpsAttention, sliding_window_changes_the_output_only_where_it_cuts_keys_off) {
  std::mt19937 rng(404);
  Problem windowed = make_problem(rng, 4, 2, 8, 5, 10, 3, true);
  Problem full = windowed;
  full.p.sliding_window = 0;
  const std::vector<int> pos = {0, 1, 2, 3, 9};  // 0..2 see at most 3 keys: no cut; 3 and 9 lose keys
  const std::vector<double> w = to_double(run(windowed, pos)), f = to_double(run(full, pos));
  const std::int64_t width = windowed.q.size(1);
  for (std::size_t s = 0; s < pos.size(); ++s) {
    double diff = 0;
    for (std::int64_t i = 0; i < width; ++i) diff = std::max(diff, std::fabs(w[s * width + i] - f[s * width + i]));
    if (pos[s] < 3)
      EXPECT_LT(diff, 1e-6) << "q_pos " << pos[s];  // identical key sets: identical sums, bar f32 ordering
    else
      EXPECT_GT(diff, 1e-3) << "q_pos " << pos[s];  // random keys dropped: the mix must move
  }
}

TEST(CpuOpsAttention, a_larger_sink_shrinks_the_output_norm) {
  std::mt19937 rng(405);
  Problem pr = make_problem(rng, 4, 2, 8, 1, 6, 0, false);
  const std::vector<int> pos = {5};
  double previous = norm(run(pr, pos));
  const double no_sink = previous;
  ASSERT_GT(no_sink, 0.0);
  for (float sink : {-3.f, 0.f, 2.f, 5.f, 20.f}) {
    pr.sinks = optest::f32_tensor({4}, {sink, sink, sink, sink});
    const double n = norm(run(pr, pos));
    EXPECT_LT(n, previous) << "sink " << sink;  // the sink only adds to the denominator
    previous = n;
  }
  EXPECT_LT(previous, 1e-6 * no_sink);  // sink 20 vs logits of a few units: keys get ~e^-15 of the mass
}

TEST(CpuOpsAttention, rejects_positions_without_keys_heads_not_a_multiple_of_kv_heads_and_bad_sinks) {
  std::mt19937 rng(406);
  Problem pr = make_problem(rng, 4, 2, 8, 2, 5, 0, false);
  Tensor out = Tensor::zeros({2, 32}, DType::f32);
  CpuOps ops;
  Status beyond = ops.attention(pr.q, pr.k, pr.v, i32_tensor({4, 5}), pr.sinks, pr.p, out);
  ASSERT_FALSE(beyond.ok());
  EXPECT_TRUE(contains(beyond.error().message, "5")) << beyond.error().message;
  EXPECT_FALSE(ops.attention(pr.q, pr.k, pr.v, i32_tensor({-1, 0}), pr.sinks, pr.p, out).ok());
  EXPECT_FALSE(ops.attention(pr.q, pr.k, pr.v, i32_tensor({0}), pr.sinks, pr.p, out).ok());  // S mismatch

  Problem pr6 = make_problem(rng, 6, 4, 8, 2, 5, 0, false);  // 6 query heads over 4 kv heads
  Tensor out6 = Tensor::zeros({2, 48}, DType::f32);
  Status heads = ops.attention(pr6.q, pr6.k, pr6.v, i32_tensor({0, 1}), pr6.sinks, pr6.p, out6);
  ASSERT_FALSE(heads.ok());
  EXPECT_TRUE(contains(heads.error().message, "multiple")) << heads.error().message;

  Tensor three_sinks = random_f32({3}, rng);
  EXPECT_FALSE(ops.attention(pr.q, pr.k, pr.v, i32_tensor({0, 1}), three_sinks, pr.p, out).ok());
  // Sinks that are not f32/bf16/f16 host memory are refused (an i32 tensor used to read as NaN logits).
  Tensor int_sinks = Tensor::zeros({4}, DType::i32), host = random_f32({4}, rng);
  Tensor cuda_sinks = Tensor::borrow(host.raw(), {4}, DType::f32, nullptr, Device::cuda);
  EXPECT_FALSE(ops.attention(pr.q, pr.k, pr.v, i32_tensor({0, 1}), int_sinks, pr.p, out).ok());
  EXPECT_FALSE(ops.attention(pr.q, pr.k, pr.v, i32_tensor({0, 1}), cuda_sinks, pr.p, out).ok());
}

}  // namespace
}  // namespace day0
