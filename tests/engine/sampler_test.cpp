// Sampler: greedy is the exact argmax, a seed fixes the output whatever the batch, temperature sampling
// follows softmax(logits / T) (chi-square against the expected counts), logprobs are the raw model's.
#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <set>

#include "engine/philox.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/greedy_pick.h"
#include "ops/logit_edits.h"
#include "ops/token_draw.h"

namespace day0 {
namespace {

SamplingParams with_temperature(double t) {
  SamplingParams p;
  p.temperature = t;
  return p;
}

// Counts of each token over n steps of one sequence on the same logits (no penalties: every step sees
// the same distribution, the draws differ by position).
std::vector<int> counts_over(const SamplingParams& p, std::span<const float> logits, int n) {
  Sampler s(p, {}, 0);
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < n; ++i) {
    const auto r = s.sample(logits);
    EXPECT_TRUE(r.ok());
    ++counts[r->token];
  }
  return counts;
}

double chi_square(const std::vector<int>& counts, const std::vector<double>& probs, int n) {
  double chi2 = 0.0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    const double expected = probs[i] * n;
    chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  return chi2;
}

std::vector<double> softmax(std::span<const float> logits, double t) {
  std::vector<double> p;
  double sum = 0.0;
  for (const float x : logits) sum += std::exp(x / t);
  for (const float x : logits) p.push_back(std::exp(x / t) / sum);
  return p;
}

TEST(Sampler, greedy_is_the_exact_argmax_with_the_lowest_id_on_ties_whatever_the_seed) {
  const std::vector<float> logits = {0.f, 3.f, -1.f, 3.f, 2.9999998f};
  for (const std::uint64_t seed : {0ull, 1ull, 12345ull}) {
    Sampler s(with_temperature(0.0), {}, seed);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(s.sample(logits)->token, 1);
  }
}

TEST(Sampler, greedy_over_a_long_vocabulary_finds_the_first_maximum_across_blocks_and_rejects_bad_logits) {
  // 1,000 logits: blocks of 256 and a partial last one. The maximum sits in several blocks, -0.0 and +0.0 tie.
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> logits(1000);
  for (float& x : logits) x = std::min(normal(rng), 3.f);
  for (const std::size_t at : {std::size_t{777}, std::size_t{300}, std::size_t{999}}) logits[at] = 5.f;
  Sampler s(with_temperature(0.0), {}, 0);
  EXPECT_EQ(s.sample(logits)->token, 300);
  logits[300] = logits[777] = 4.f;
  EXPECT_EQ(s.sample(logits)->token, 999);  // only in the partial block
  std::vector<float> zeros(600, -1.f);
  zeros[400] = -0.f, zeros[500] = 0.f;
  EXPECT_EQ(s.sample(zeros)->token, 400);
  std::vector<float> masked(600, -INFINITY);
  masked[599] = -7.f;
  EXPECT_EQ(s.sample(masked)->token, 599);
  logits[900] = NAN;
  const auto nan = s.sample(logits);
  ASSERT_FALSE(nan.ok());
  EXPECT_NE(nan.error().message.find("token 900 is NaN"), std::string::npos) << nan.error().message;
  logits[900] = INFINITY;
  EXPECT_FALSE(s.sample(logits).ok());
  EXPECT_FALSE(s.sample(std::vector<float>(600, -INFINITY)).ok());
  EXPECT_FALSE(s.sample(std::vector<float>{}).ok());
  EXPECT_EQ(s.output_tokens().size(), 4u);  // failed steps record nothing
}

// A pick made from the logits elsewhere (Ops::greedy_tokens, as a greedy step returns it) stands for sample()
// exactly where the sampler says it may: the same tokens and the same history, and the same failures.
TEST(Sampler, a_greedy_pick_made_elsewhere_stands_for_sample_where_the_sampler_reads_only_the_argmax) {
  std::mt19937 rng(12);
  std::normal_distribution<float> normal(0.f, 1.f);
  CpuOps ops;
  Sampler sampled(with_temperature(0.0), {}, 0), picked(with_temperature(0.0), {}, 0);
  for (int step = 0; step < 5; ++step) {
    Tensor logits = Tensor::zeros({1, 300}, DType::f32);
    for (std::int64_t i = 0; i < 300; ++i) logits.data<float>()[i] = normal(rng);
    logits.data<float>()[7 * step + 3] = logits.data<float>()[250 - step] = 9.f;  // a tie
    Tensor pick = Tensor::zeros({1, 2}, DType::i32);
    ASSERT_TRUE(ops.greedy_tokens(logits, pick, nullptr).ok());
    ASSERT_TRUE(picked.argmax_only());
    const auto want = sampled.sample(std::span<const float>(logits.data<float>(), 300));
    const auto got = picked.take_argmax(pick.data<std::int32_t>()[0], pick.data<std::int32_t>()[1]);
    ASSERT_TRUE(want.ok() && got.ok());
    EXPECT_EQ(got->token, want->token);
    EXPECT_EQ(got->token, 7 * step + 3);
  }
  EXPECT_EQ(picked.output_tokens(), sampled.output_tokens());
  const auto nan = picked.take_argmax(0, 17);
  ASSERT_FALSE(nan.ok());
  EXPECT_NE(nan.error().message.find("token 17 is NaN or +inf"), std::string::npos) << nan.error().message;
  EXPECT_FALSE(picked.take_argmax(0, -2).ok());
  EXPECT_EQ(picked.output_tokens().size(), 5u);  // failed steps record nothing

  // Whatever reads more than the argmax: sampling, logprobs, a bias, a penalty that applies.
  EXPECT_FALSE(Sampler(with_temperature(0.7), {}, 0).argmax_only());
  SamplingParams logprobs = with_temperature(0.0);
  logprobs.logprobs = true;
  EXPECT_FALSE(Sampler(logprobs, {}, 0).argmax_only());
  SamplingParams bias = with_temperature(0.0);
  bias.logit_bias = {{3, 1.0}};
  EXPECT_FALSE(Sampler(bias, {}, 0).argmax_only());
  SamplingParams repetition = with_temperature(0.0);
  repetition.repetition_penalty = 1.2;
  EXPECT_FALSE(Sampler(repetition, std::vector<std::int32_t>{4}, 0).argmax_only());
  SamplingParams presence = with_temperature(0.0);
  presence.presence_penalty = 0.5;
  Sampler later(presence, {}, 0);
  EXPECT_TRUE(later.argmax_only());  // nothing generated yet: the penalty has nothing to apply to
  ASSERT_TRUE(later.take_argmax(2, -1).ok());
  EXPECT_FALSE(later.argmax_only());
}

TEST(Sampler, greedy_reads_no_random_number_so_a_later_sampled_request_is_unaffected) {
  // The draw for position i depends only on (seed, i): a greedy sampler has nothing to consume, and a
  // sampler's draws are the same whether or not other sequences ran in between with the same scratch.
  const std::vector<float> logits = {0.f, 0.1f, 0.2f, 0.3f, 0.4f};
  SamplingParams p = with_temperature(1.0);
  p.seed = 9;
  Sampler alone(p, {}, 0);
  std::vector<std::int32_t> solo;
  for (int i = 0; i < 50; ++i) solo.push_back(alone.sample(logits)->token);

  SamplerScratch shared;
  Sampler seeded(p, {}, 0), greedy(with_temperature(0.0), {}, 0), other(with_temperature(1.5), {}, 77);
  std::vector<std::int32_t> batched;
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(greedy.sample(logits, shared).ok());
    ASSERT_TRUE(other.sample(logits, shared).ok());
    batched.push_back(seeded.sample(logits, shared)->token);
  }
  EXPECT_EQ(batched, solo);
}

TEST(Sampler, top_k_one_is_greedy) {
  const std::vector<float> logits = {0.5f, 2.f, 2.f, 1.f};
  SamplingParams p = with_temperature(1.0);
  p.top_k = 1;
  Sampler s(p, {}, 3);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(s.sample(logits)->token, 1);
}

TEST(Sampler, same_seed_and_request_give_the_same_tokens_and_other_seeds_differ) {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.f, 2.f);
  std::vector<float> logits(1000);
  for (float& x : logits) x = normal(rng);
  SamplingParams p = with_temperature(0.9);
  p.top_p = 0.95;
  p.top_k = 100;
  p.presence_penalty = 0.3;
  p.repetition_penalty = 1.1;
  auto run = [&](std::uint64_t seed) {
    SamplingParams q = p;
    q.seed = seed;
    Sampler s(q, std::vector<std::int32_t>{1, 2, 3}, 999);
    std::vector<std::int32_t> out;
    for (int i = 0; i < 64; ++i) out.push_back(s.sample(logits)->token);
    return out;
  };
  EXPECT_EQ(run(42), run(42));
  int distinct = 0;
  const auto base = run(42);
  for (const std::uint64_t seed : {1ull, 2ull, 3ull, 4ull}) distinct += run(seed) != base;
  EXPECT_GE(distinct, 3);  // RELIABILITY D5
}

TEST(Sampler, an_unseeded_request_uses_the_seed_drawn_for_it) {
  const std::vector<float> logits = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  Sampler a(with_temperature(1.0), {}, 555), b(with_temperature(1.0), {}, 555);
  EXPECT_EQ(a.seed(), 555u);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(a.sample(logits)->token, b.sample(logits)->token);
  SamplingParams p = with_temperature(1.0);
  p.seed = 7;
  EXPECT_EQ(Sampler(p, {}, 555).seed(), 7u);
  const std::uint64_t s1 = draw_request_seed(), s2 = draw_request_seed();
  EXPECT_LE(s1, sampling_range::kMaxSeed);
  EXPECT_NE(s1, s2);
}

TEST(Sampler, temperature_sampling_frequencies_pass_a_chi_square_test_that_a_biased_sampler_fails) {
  const std::vector<float> logits = {1.0f, 0.5f, 0.0f, -0.5f, -2.0f};
  const int n = 20000;
  // Chi-square with 4 degrees of freedom: 18.47 is the 0.999 quantile.
  for (const double t : {0.5, 1.0, 1.7}) {
    const auto counts = counts_over(with_temperature(t), logits, n);
    EXPECT_LT(chi_square(counts, softmax(logits, t), n), 18.47) << "temperature " << t;
    // The same counts judged against the neighbouring temperature's distribution fail: the test has power.
    EXPECT_GT(chi_square(counts, softmax(logits, t * 1.25), n), 18.47) << "temperature " << t;
  }
}

TEST(Sampler, top_p_sampling_draws_only_from_the_nucleus_in_proportion) {
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  SamplingParams p = with_temperature(1.0);
  p.top_p = 0.7;  // keeps {0, 1}, renormalised to {0.625, 0.375}
  const int n = 20000;
  const auto counts = counts_over(p, logits, n);
  EXPECT_EQ(counts[2] + counts[3], 0);
  EXPECT_LT(chi_square({counts[0], counts[1]}, {0.625, 0.375}, n), 10.83);  // 1 d.o.f., 0.999
}

TEST(Sampler, penalties_steer_greedy_choices) {
  const std::vector<float> logits = {2.0f, 1.9f, 1.0f};
  SamplingParams p = with_temperature(0.0);
  p.presence_penalty = 0.2;
  Sampler s(p, {}, 0);
  EXPECT_EQ(s.sample(logits)->token, 0);
  EXPECT_EQ(s.sample(logits)->token, 1);  // 2.0 - 0.2 < 1.9
  EXPECT_EQ(s.sample(logits)->token, 0);  // both penalised once: 1.8 > 1.7
  EXPECT_EQ(s.output_tokens(), (std::vector<std::int32_t>{0, 1, 0}));

  SamplingParams r = with_temperature(0.0);
  r.repetition_penalty = 1.5;
  Sampler from_prompt(r, std::vector<std::int32_t>{0}, 0);
  EXPECT_EQ(from_prompt.sample(logits)->token, 1);  // 2.0 / 1.5 < 1.9
}

TEST(Sampler, reported_logprobs_are_the_raw_distribution_not_the_sampling_one) {
  const std::vector<float> logits = {std::log(0.6f), std::log(0.3f), std::log(0.1f)};
  SamplingParams p = with_temperature(0.3);
  p.top_k = 1;
  p.repetition_penalty = 2.0;
  p.logit_bias = {{2, 5.0}};
  p.logprobs = true;
  p.top_logprobs = 2;
  Sampler s(p, std::vector<std::int32_t>{0}, 0);
  const auto r = s.sample(logits);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->token, 2);  // the bias made token 2 the only candidate
  ASSERT_TRUE(r->logprob.has_value());
  EXPECT_NEAR(*r->logprob, std::log(0.1), 1e-5);
  ASSERT_EQ(r->top_logprobs.size(), 2u);
  EXPECT_EQ(r->top_logprobs[0].token, 0);
  EXPECT_NEAR(r->top_logprobs[0].logprob, std::log(0.6), 1e-5);
  EXPECT_EQ(r->top_logprobs[1].token, 1);

  Sampler quiet(with_temperature(0.0), {}, 0);
  const auto q = quiet.sample(logits);
  EXPECT_FALSE(q->logprob.has_value());
  EXPECT_TRUE(q->top_logprobs.empty());
}

TEST(Sampler, nan_or_positive_infinite_or_all_masked_logits_fail_the_request_with_a_clear_error) {
  Sampler s(with_temperature(1.0), {}, 0);
  const std::vector<float> nan = {0.f, NAN};
  const auto a = s.sample(nan);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.error().message.find("token 1 is NaN"), std::string::npos) << a.error().message;
  EXPECT_FALSE(s.sample(std::vector<float>{INFINITY, 0.f}).ok());
  EXPECT_FALSE(s.sample(std::vector<float>{-INFINITY, -INFINITY}).ok());
  EXPECT_FALSE(s.sample(std::vector<float>{}).ok());
  EXPECT_TRUE(s.output_tokens().empty());  // failed steps record nothing
  EXPECT_EQ(s.sample(std::vector<float>{-INFINITY, 0.f})->token, 1);
}

// The full-size vocabulary (gpt-oss's 201,088 entries): every draw stays inside the set its filters allow, ranked
// here independently by sorting the logits. (How long a draw takes is a benchmark's business, not a test's.)
TEST(Sampler, draws_over_a_200k_vocabulary_stay_inside_top_k_and_top_p) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.f, 2.f);
  std::vector<float> logits(201088);
  for (float& x : logits) x = normal(rng);
  std::vector<std::int32_t> by_logit(logits.size());
  std::iota(by_logit.begin(), by_logit.end(), 0);
  std::sort(by_logit.begin(), by_logit.end(), [&](std::int32_t a, std::int32_t b) { return logits[a] > logits[b]; });
  std::vector<std::int64_t> rank(logits.size());
  for (size_t r = 0; r < by_logit.size(); ++r) rank[static_cast<size_t>(by_logit[r])] = static_cast<std::int64_t>(r);
  // The 0.9 nucleus at temperature 1: the fewest top tokens whose probabilities reach 0.9 (in double; the sampler
  // sums in float, so one rank of slack at the edge).
  double z = 0;
  for (float x : logits) z += std::exp(static_cast<double>(x - logits[by_logit[0]]));
  std::int64_t nucleus = 0;
  for (double mass = 0; mass < 0.9; ++nucleus)
    mass += std::exp(static_cast<double>(logits[by_logit[nucleus]] - logits[by_logit[0]])) / z;
  ASSERT_GT(nucleus, 50);  // the filters differ on these logits
  ASSERT_LT(nucleus, static_cast<std::int64_t>(logits.size()) / 2);
  struct Case {
    const char* name;
    std::int32_t top_k;
    double top_p;
    double temperature;
    std::int64_t max_rank;  // the highest rank a draw may have
  };
  const std::int64_t last = static_cast<std::int64_t>(logits.size()) - 1;
  for (const Case c : {Case{"greedy", 0, 1.0, 0.0, 0}, Case{"top_k 50", 50, 1.0, 1.0, 49},
                       Case{"top_p 0.9", 0, 0.9, 1.0, nucleus}, Case{"full", 0, 1.0, 1.0, last}}) {
    SamplingParams p = with_temperature(c.temperature);
    p.top_k = c.top_k;
    p.top_p = c.top_p;
    Sampler s(p, {}, 1);
    SamplerScratch scratch;
    std::int64_t worst = 0;
    for (int i = 0; i < 20; ++i) {
      const auto drawn = s.sample(logits, scratch);
      ASSERT_TRUE(drawn.ok()) << c.name;
      ASSERT_GE(drawn->token, 0) << c.name;
      ASSERT_LT(drawn->token, static_cast<std::int32_t>(logits.size())) << c.name;
      worst = std::max(worst, rank[static_cast<size_t>(drawn->token)]);
    }
    EXPECT_LE(worst, c.max_rank) << c.name;
    if (c.top_k == 50) {
      EXPECT_GT(worst, 0) << "20 draws from the top 50 were all the first";
    }
  }
}

// A sampled row may be drawn elsewhere (Ops::draw_tokens): device_draw gives that draw's parameters (temperature,
// top-k, top-p, min-p), the shared draw then gives sample()'s token at every position, and take_argmax records it as
// sample() would (the next draw moves on). Penalties, a bias or logprobs keep the row on the host.
TEST(Sampler, a_device_draw_stands_for_sample_where_no_penalty_bias_or_logprob_applies) {
  std::mt19937 rng(31);
  std::normal_distribution<float> n(0.f, 2.f);
  std::vector<float> logits(3000);
  for (float& x : logits) x = n(rng);
  const float m = *std::max_element(logits.begin(), logits.end());
  const auto V = static_cast<std::int64_t>(logits.size());
  SamplingParams p = with_temperature(0.7);
  p.seed = 5;
  SamplingParams top_k = p, top_p = p, min_p = p, all = p;
  top_k.top_k = 10;
  top_p.top_p = 0.6;
  min_p.min_p = 0.2;
  all.top_k = 40;
  all.top_p = 0.8;
  all.min_p = 0.05;
  for (const SamplingParams& q : {p, top_k, top_p, min_p, all}) {
    SCOPED_TRACE(::testing::Message() << "top_k " << q.top_k << " top_p " << q.top_p << " min_p " << q.min_p);
    Sampler drawn(q, {}, 0), host(q, {}, 0);
    std::set<std::int32_t> seen;
    for (int step = 0; step < 40; ++step) {
      const auto pick = drawn.device_pick(3, 0, V, nullptr);
      ASSERT_TRUE(pick && pick->draw);
      const auto& d = pick->draw;
      EXPECT_EQ(d->row, 3);
      EXPECT_EQ(d->u, philox_uniform(5, static_cast<std::uint64_t>(step)));
      EXPECT_EQ(d->top_k, q.top_k);
      EXPECT_EQ(d->top_p, q.top_p);
      EXPECT_EQ(d->min_p, q.min_p);
      EXPECT_EQ(drawn.device_pick(3, /*ahead=*/1, V, nullptr)->draw->u, philox_uniform(5, step + 1u));
      const std::int32_t token = draw_token(logits.data(), V, m, *d);
      const auto want = host.sample(logits);
      ASSERT_TRUE(want.ok());
      EXPECT_EQ(token, want->token) << "step " << step;
      ASSERT_TRUE(drawn.take_argmax(token, -1).ok());
      seen.insert(token);
    }
    EXPECT_EQ(drawn.output_tokens(), host.output_tokens());
    if (q.top_k == 10) {
      EXPECT_LE(seen.size(), 10u);
    }
  }
  const std::vector<std::int32_t> prompt = {1, 2};
  const auto host_only = [&](SamplingParams q, std::uint64_t ahead = 0) {
    return !Sampler(q, prompt, 0).device_pick(0, ahead, V, nullptr);
  };
  EXPECT_FALSE(Sampler(with_temperature(0), prompt, 0).device_pick(0, 0, V, nullptr)->draw);  // greedy: the argmax
  EXPECT_FALSE(host_only(all));
  SamplingParams q = p;
  q.frequency_penalty = 0.5;  // applies once there is output: to every step ahead, not to the first
  EXPECT_FALSE(host_only(q));
  EXPECT_TRUE(host_only(q, 1));
  q = p;
  q.logit_bias = {{7, 1.0}};  // applies now: only with somewhere to put its edits
  EXPECT_TRUE(host_only(q));
  q = p;
  q.logprobs = true;  // read from the raw logits on the device (Ops::row_logprobs), now, not ahead
  q.top_logprobs = 3;
  const auto with_logprobs = Sampler(q, prompt, 0).device_pick(0, 0, V, nullptr);
  ASSERT_TRUE(with_logprobs);
  EXPECT_EQ(with_logprobs->logprob_top, 3);
  EXPECT_FALSE(host_only(q, 1));  // one step ahead too (no penalty can apply)
  EXPECT_TRUE(host_only(q, 2));
  q.presence_penalty = 0.5;
  EXPECT_FALSE(host_only(q));  // no output yet: nothing edits the raw logits
  EXPECT_TRUE(host_only(q, 1));  // but it may by then
  LogitEdits edits;
  q.logit_bias = {{7, 1.0}};  // edits them: the logprobs are read on the host
  EXPECT_FALSE(Sampler(q, prompt, 0).device_pick(0, 0, V, &edits));
  EXPECT_EQ(Sampler(p, prompt, 0).device_pick(0, 0, V, nullptr)->logprob_top, -1);
}

// A row whose bias and penalties apply is picked on the device too: device_pick appends its edits, which applied to
// the logits (as Ops::edit_logits does) give sample()'s token through the argmax or the shared draw at every
// position; one step ahead with the step's token pending (resolved, the next step's edits), not two, and not where an
// id is outside the vocabulary.
TEST(Sampler, device_edits_then_the_device_pick_stand_for_sample_with_bias_and_penalties) {
  std::mt19937 rng(41);
  std::normal_distribution<float> n(0.f, 1.5f);
  std::vector<float> logits(2000);
  for (float& x : logits) x = n(rng);
  const auto V = static_cast<std::int64_t>(logits.size());
  std::vector<std::int32_t> prompt = {5, 9, 9, 1500, 77};
  for (int i = 0; i < 200; ++i) prompt.push_back(static_cast<std::int32_t>(rng() % 2000));
  SamplingParams rep = with_temperature(0.0), freq = with_temperature(0.9), bias = with_temperature(0.0),
                 all = with_temperature(1.1);
  rep.repetition_penalty = 1.3;
  freq.frequency_penalty = 0.7;
  freq.presence_penalty = -0.4;
  freq.top_p = 0.9;
  bias.logit_bias = {{3, 5.0}, {3, -1.5}, {1999, 2.0}};  // twice the same id: both, in order
  all = freq;
  all.temperature = 1.1;
  all.top_k = 50;
  all.repetition_penalty = 0.8;
  all.logit_bias = {{9, 1.25}};
  all.seed = 8;
  freq.seed = 3;
  for (const SamplingParams& q : {rep, freq, bias, all}) {
    SCOPED_TRACE(::testing::Message() << "T " << q.temperature << " rep " << q.repetition_penalty << " freq "
                                      << q.frequency_penalty << " bias " << q.logit_bias.size());
    Sampler device(q, prompt, 0), host(q, prompt, 0);
    int edited_steps = 0;
    for (int step = 0; step < 30; ++step) {
      LogitEdits edits;
      const auto pick = device.device_pick(2, 0, V, &edits);
      ASSERT_TRUE(pick);
      EXPECT_FALSE(device.device_pick(2, /*ahead=*/1, V, nullptr)) << "ahead without edits";
      EXPECT_FALSE(device.device_pick(2, /*ahead=*/2, V, &edits)) << "two steps ahead";
      EXPECT_EQ(pick->draw.has_value(), !q.is_greedy());
      std::vector<float> edited = logits;
      if (!edits.empty()) {
        ASSERT_EQ(edits.rows, std::vector<std::int32_t>{2});
        ASSERT_TRUE(check_logit_edits(edits, 3, V, "test").ok());
        apply_logit_edits(edited.data(), edits.entries.data(), edits.entries.size());
        ++edited_steps;
      }
      const float m = *std::max_element(edited.begin(), edited.end());
      const std::int32_t token = pick->draw ? draw_token(edited.data(), V, m, *pick->draw) : greedy_pick(edited).token;
      const auto want = host.sample(logits);
      ASSERT_TRUE(want.ok());
      ASSERT_EQ(token, want->token) << "step " << step;
      // One step ahead: the edits with this step's token pending are, once it is known, the next step's edits.
      LogitEdits ahead;
      ASSERT_TRUE(device.device_pick(2, /*ahead=*/1, V, &ahead));
      ASSERT_TRUE(ahead.has_pending());
      ASSERT_TRUE(device.take_argmax(token, -1).ok());
      const std::int32_t tokens[3] = {-1, -1, token};
      const LogitEdits resolved = resolve_pending(ahead, tokens, V);
      LogitEdits next;
      ASSERT_TRUE(device.device_pick(2, 0, V, &next));
      ASSERT_EQ(resolved.entries.size(), next.entries.size()) << "step " << step;
      for (std::size_t i = 0; i < next.entries.size(); ++i) {
        EXPECT_EQ(resolved.entries[i].id, next.entries[i].id) << i;
        EXPECT_EQ(resolved.entries[i].kind, next.entries[i].kind) << i;
        EXPECT_EQ(resolved.entries[i].value, next.entries[i].value) << i;
      }
    }
    EXPECT_GE(edited_steps, 29);
    EXPECT_EQ(device.output_tokens(), host.output_tokens());
  }
  // A row of many edits (a long prompt under a repetition penalty) goes ahead too, but no further than one step.
  std::vector<std::int32_t> long_prompt(1800);
  for (std::size_t i = 0; i < long_prompt.size(); ++i) long_prompt[i] = static_cast<std::int32_t>(i);
  LogitEdits long_edits;
  EXPECT_TRUE(Sampler(rep, long_prompt, 0).device_pick(0, 0, V, &long_edits));
  EXPECT_TRUE(Sampler(rep, long_prompt, 0).device_pick(0, 1, V, &long_edits));
  EXPECT_FALSE(Sampler(rep, long_prompt, 0).device_pick(0, 2, V, &long_edits));
  SamplingParams outside = with_temperature(0.0);
  outside.logit_bias = {{2500, 1.0}};  // past these logits: the host names it
  LogitEdits edits;
  EXPECT_FALSE(Sampler(outside, {}, 0).device_pick(0, 0, V, &edits));
  EXPECT_TRUE(edits.empty());
}

}  // namespace
}  // namespace day0
