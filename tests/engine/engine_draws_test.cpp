// Sampled rows drawn on the device (EngineConfig::device_draws): requests sampled with a temperature, top-k, top-p
// and min-p get the tokens the host sampler gives them (device draws off), beside greedy requests and requests whose
// bias and penalties apply on the device first (Ops::edit_logits); with only such rows (no logprobs) the decode steps
// launch ahead, a penalised row's last token pending in the step queued ahead, and the tokens stay the host's. On the
// CPU and, on the GPU machine, on the CUDA backend with step graphs.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "engine/engine.h"
#include "engine/engine_test_util.h"
#include "model/load.h"
#include "ops/cuda/cuda_test_util.h"

namespace day0 {
namespace {

using enginetest::Collector;
using enginetest::greedy_request;

const std::string kModel = std::string(D0_TEST_DATA) + "/gpt_oss_tiny";

LoadOptions options(const std::string& backend) {
  LoadOptions o;
  o.backend = backend;
  o.max_tokens = 64;
  o.kv_pool_tokens = 512;
  o.block_size = 4;
  o.max_step_tokens = 64;
  o.graph_max_batch = 8;
  if (backend == "cuda") o.backend_options.memory_fraction = 0.2;
  return o;
}

std::vector<std::int32_t> prompt(int n, int seed) {
  std::vector<std::int32_t> p(n);
  for (int i = 0; i < n; ++i) p[i] = (i * 37 + seed * 11 + 2) % 256;
  return p;
}

GenerateRequest sampled(std::vector<std::int32_t> p, int max_tokens, double temperature, std::uint64_t seed,
                        double top_p = 1.0, std::int32_t top_k = 0, double min_p = 0.0) {
  GenerateRequest r = greedy_request(std::move(p), max_tokens);
  r.sampling.temperature = temperature;
  r.sampling.top_p = top_p;
  r.sampling.top_k = top_k;
  r.sampling.min_p = min_p;
  r.sampling.seed = seed;
  return r;
}

struct Outcome {
  std::vector<std::vector<std::int32_t>> tokens;
  EngineStats stats;
};

Outcome run(const std::string& backend, EngineConfig cfg, const std::vector<GenerateRequest>& requests,
            std::vector<std::vector<GeneratedToken>>* generated = nullptr) {
  Outcome out;
  auto m = load_model(kModel, options(backend));
  EXPECT_TRUE(m.ok()) << m.error().message;
  if (!m.ok()) return out;
  cfg.max_batch_tokens = 64;
  auto engine = Engine::create(*m->executor, cfg);
  EXPECT_TRUE(engine.ok()) << engine.error().message;
  if (!engine.ok()) return out;
  Collector c;
  for (size_t i = 0; i < requests.size(); ++i) EXPECT_TRUE((*engine)->submit(requests[i], c.sink(int(i))).ok());
  c.wait(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_TRUE(c.final_[int(i)].error.empty()) << "request " << i << ": " << c.final_[int(i)].error;
    out.tokens.push_back(c.tokens_[int(i)]);
    if (generated) generated->push_back(c.generated_[int(i)]);
  }
  (*engine)->drain();
  out.stats = (*engine)->stats();
  EXPECT_EQ(out.stats.kv_blocks_used, 0);
  return out;
}

// The request's tokens without its bias and penalties.
std::vector<std::int32_t> greedy_tokens_of(const std::string& backend, GenerateRequest r) {
  r.sampling.repetition_penalty = 1.0;
  r.sampling.logit_bias.clear();
  const Outcome plain = run(backend, EngineConfig{}, {r});
  return plain.tokens.empty() ? std::vector<std::int32_t>{} : plain.tokens[0];
}

void expect_device_draws_give_the_host_samplers_tokens(const std::string& backend) {
  constexpr int kNew = 14;
  GenerateRequest penalised = sampled(prompt(8, 8), kNew, 1.0, 14);
  penalised.sampling.presence_penalty = 1.0;
  penalised.sampling.frequency_penalty = 0.5;
  GenerateRequest repeating = greedy_request(prompt(12, 10), kNew);  // the argmax of its edited logits
  repeating.sampling.repetition_penalty = 1.8;
  repeating.sampling.logit_bias = {{7, 3.0}, {7, -1.0}, {200, 2.5}};
  GenerateRequest everything = sampled(prompt(10, 11), kNew, 0.9, 16, /*top_p=*/0.8, /*top_k=*/30);
  everything.sampling.repetition_penalty = 0.7;
  everything.sampling.frequency_penalty = -0.5;
  everything.sampling.logit_bias = {{3, -2.0}};
  GenerateRequest logprobs = sampled(prompt(6, 12), kNew, 1.0, 17);
  logprobs.sampling.presence_penalty = 0.5;
  logprobs.sampling.logprobs = true;  // reads its logits on the host
  const std::vector<GenerateRequest> mixed = {sampled(prompt(5, 1), kNew, 1.0, 11),
                                              sampled(prompt(9, 2), kNew, 0.6, 12),
                                              greedy_request(prompt(7, 3), kNew),
                                              sampled(prompt(3, 4), kNew, 1.0, 13, /*top_p=*/0.9),
                                              sampled(prompt(6, 9), kNew, 1.5, 15, 0.8, /*top_k=*/20, /*min_p=*/0.02),
                                              penalised,
                                              repeating,
                                              everything,
                                              logprobs};
  EngineConfig on, off;
  off.device_draws = false;
  const Outcome host = run(backend, off, mixed), device = run(backend, on, mixed);
  ASSERT_EQ(host.tokens.size(), mixed.size());
  ASSERT_EQ(device.tokens.size(), mixed.size());
  for (size_t i = 0; i < mixed.size(); ++i) EXPECT_EQ(device.tokens[i], host.tokens[i]) << "request " << i;
  EXPECT_NE(host.tokens[0], host.tokens[2]) << "the sampled request decoded as the greedy one";
  EXPECT_NE(host.tokens[6], greedy_tokens_of(backend, repeating)) << "the repetition penalty and bias changed nothing";
  EXPECT_EQ(host.stats.device_draws, 0);
  EXPECT_EQ(host.stats.device_edited_rows, 0);
  EXPECT_GT(device.stats.device_draws, 0) << "no row was drawn on the device";
  // Penalised rows: the repetition penalty applies from the first step, the others once there is output.
  EXPECT_GE(device.stats.device_edited_rows, 3 * kNew - 2) << "penalised rows stayed on the host";

  // Greedy, device-drawn and penalised rows alone (no logprobs): every row is picked on the device, so steps launch
  // ahead, each penalised row's last token pending in the step queued ahead.
  const std::vector<GenerateRequest> chainable = {sampled(prompt(4, 5), kNew, 0.8, 21),
                                                  greedy_request(prompt(6, 6), kNew),
                                                  sampled(prompt(11, 7), kNew, 1.2, 22, /*top_p=*/0.7, /*top_k=*/5),
                                                  penalised,
                                                  repeating,
                                                  everything};
  const Outcome host_c = run(backend, off, chainable), device_c = run(backend, on, chainable);
  for (size_t i = 0; i < chainable.size(); ++i) EXPECT_EQ(device_c.tokens[i], host_c.tokens[i]) << "request " << i;
  EXPECT_GT(device_c.stats.ahead_steps, 0) << "rows picked on the device did not launch ahead";
  EXPECT_GT(device_c.stats.device_edited_rows, 0);
}

TEST(EngineDraws, sampled_rows_drawn_on_the_device_get_the_host_samplers_tokens) {
  expect_device_draws_give_the_host_samplers_tokens("cpu");
}

TEST(CudaEngineDraws, sampled_rows_drawn_on_the_device_get_the_host_samplers_tokens) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  expect_device_draws_give_the_host_samplers_tokens("cuda");
}

// The requests with device draws off and on: the same tokens, the same top ids, logprobs within `tolerance`. Returns
// the two outcomes (host, device) and how many tokens' logprobs it compared.
std::tuple<Outcome, Outcome, int> expect_same_logprobs(const std::string& backend, float tolerance,
                                                      const std::vector<GenerateRequest>& requests) {
  EngineConfig on, off;
  off.device_draws = false;
  std::vector<std::vector<GeneratedToken>> host_generated, device_generated;
  Outcome host = run(backend, off, requests, &host_generated);
  Outcome device = run(backend, on, requests, &device_generated);
  int compared = 0;
  EXPECT_EQ(host_generated.size(), requests.size());
  EXPECT_EQ(device_generated.size(), requests.size());
  for (size_t i = 0; i < requests.size() && i < host_generated.size() && i < device_generated.size(); ++i) {
    EXPECT_EQ(device.tokens[i], host.tokens[i]) << "request " << i;
    if (device_generated[i].size() != host_generated[i].size()) continue;
    for (size_t t = 0; t < host_generated[i].size(); ++t) {
      const GeneratedToken &h = host_generated[i][t], &d = device_generated[i][t];
      SCOPED_TRACE(::testing::Message() << "request " << i << ", token " << t);
      EXPECT_EQ(d.logprob.has_value(), h.logprob.has_value());
      if (!h.logprob || !d.logprob) continue;
      EXPECT_NEAR(*d.logprob, *h.logprob, tolerance);
      EXPECT_EQ(h.top_logprobs.size(), static_cast<size_t>(requests[i].sampling.top_logprobs));
      if (d.top_logprobs.size() != h.top_logprobs.size()) {
        ADD_FAILURE() << d.top_logprobs.size() << " top logprobs, the host's " << h.top_logprobs.size();
        continue;
      }
      for (size_t k = 0; k < h.top_logprobs.size(); ++k) {
        EXPECT_EQ(d.top_logprobs[k].token, h.top_logprobs[k].token) << "entry " << k;
        EXPECT_NEAR(d.top_logprobs[k].logprob, h.top_logprobs[k].logprob, tolerance) << "entry " << k;
      }
      ++compared;
    }
  }
  EXPECT_EQ(host.stats.device_logprob_rows, 0);
  return {std::move(host), std::move(device), compared};
}

// Requests reporting logprobs (greedy, drawn, top 0 to 20) take them from the device (Ops::row_logprobs): the host's
// tokens, the host's top ids, and logprobs within `tolerance` (CPU: the same code, so equal). Beside a penalised one,
// which reads its logits on the host once its penalty applies, the steps wait; alone, they launch ahead.
void expect_device_logprobs_give_the_host_samplers(const std::string& backend, float tolerance) {
  constexpr int kNew = 10;
  GenerateRequest greedy_top5 = greedy_request(prompt(7, 21), kNew);
  greedy_top5.sampling.logprobs = true;
  greedy_top5.sampling.top_logprobs = 5;
  GenerateRequest drawn = sampled(prompt(5, 22), kNew, 1.0, 31);
  drawn.sampling.logprobs = true;
  GenerateRequest drawn_top20 = sampled(prompt(9, 23), kNew, 0.8, 32, /*top_p=*/0.9);
  drawn_top20.sampling.logprobs = true;
  drawn_top20.sampling.top_logprobs = 20;
  GenerateRequest penalised = greedy_top5;
  penalised.sampling.presence_penalty = 0.5;
  const auto [host, device, compared] = expect_same_logprobs(
      backend, tolerance, {greedy_top5, drawn, drawn_top20, penalised, greedy_request(prompt(4, 24), kNew)});
  EXPECT_EQ(compared, 4 * kNew);
  // And the penalised request's first row: its presence penalty applies once there is output.
  EXPECT_EQ(device.stats.device_logprob_rows, 3 * kNew + 1) << "rows reporting logprobs stayed on the host";

  const auto [host_c, device_c, compared_c] =
      expect_same_logprobs(backend, tolerance, {greedy_top5, drawn, drawn_top20, greedy_request(prompt(4, 24), kNew)});
  EXPECT_EQ(compared_c, 3 * kNew);
  EXPECT_EQ(device_c.stats.device_logprob_rows, 3 * kNew);
  EXPECT_GT(device_c.stats.ahead_steps, 0) << "rows reporting logprobs did not launch ahead";
}

TEST(EngineDraws, rows_reporting_logprobs_take_them_from_the_device) {
  expect_device_logprobs_give_the_host_samplers("cpu", 0.f);
}

// Both backends sum in double, in different orders: the floats differ by an ulp at most.
TEST(CudaEngineDraws, rows_reporting_logprobs_take_them_from_the_device) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  expect_device_logprobs_give_the_host_samplers("cuda", 1e-6f);
}

// A greedy request with a frequency penalty launches ahead: the step queued ahead edits the token still being picked
// as pending (Ops::edit_logits), and the request gets the tokens it gets one step at a time. With device draws off
// its steps read its logits on the host, so none goes ahead. A one-token prompt's first step is a decode step too.
TEST(EngineDraws, a_penalised_greedy_request_launches_ahead_with_its_last_token_pending) {
  GenerateRequest r = greedy_request({42}, 16);
  r.sampling.frequency_penalty = 2.0;
  EngineConfig ahead, waited, host;
  waited.launch_ahead = false;
  host.device_draws = false;
  const Outcome a = run("cpu", ahead, {r}), w = run("cpu", waited, {r}), h = run("cpu", host, {r});
  ASSERT_EQ(a.tokens.size(), 1u);
  EXPECT_EQ(a.tokens[0], w.tokens[0]);
  EXPECT_EQ(h.tokens[0], w.tokens[0]);
  EXPECT_GT(a.stats.ahead_steps, 0);
  EXPECT_EQ(h.stats.ahead_steps, 0);
  EXPECT_EQ(h.stats.device_edited_rows, 0);
}

}  // namespace
}  // namespace day0
