// The continuous-batching engine on the tiny gpt_oss fixture (CPU): concurrent requests are batched into shared
// steps and each gets exactly the tokens it gets alone; long prompts prefill in chunks; a small KV pool forces
// preemption by recompute without changing outputs; prefix reuse; abort returns blocks; limits are errors.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>

#include "engine/engine_test_util.h"
#include "model/greedy.h"
#include "model/load.h"

namespace day0 {
namespace {

using enginetest::Collector;
using enginetest::greedy_request;

const std::string kModel = std::string(D0_TEST_DATA) + "/gpt_oss_tiny";

std::vector<std::int32_t> prompt(int n, int seed) {
  std::vector<std::int32_t> p(n);
  for (int i = 0; i < n; ++i) p[i] = (i * 29 + seed * 13 + 5) % 256;
  return p;
}

LoadedModel load(std::int64_t pool_tokens, std::int64_t block_size = 4) {
  LoadOptions o;
  o.max_tokens = std::min<std::int64_t>(128, pool_tokens);  // the pool is never smaller than one sequence
  o.kv_pool_tokens = pool_tokens;
  o.block_size = block_size;
  o.max_step_tokens = 512;
  auto m = load_model(kModel, o);
  EXPECT_TRUE(m.ok()) << m.error().message;
  return std::move(*m);
}

std::vector<std::int32_t> solo_greedy(const std::vector<std::int32_t>& p, int n) {
  auto m = load_model(kModel, "cpu", 128);
  EXPECT_TRUE(m.ok());
  auto r = greedy_generate(*m->executor, p, n);
  EXPECT_TRUE(r.ok());
  return r->tokens;
}

void expect_each_equals_solo(std::int64_t pool, const EngineConfig& cfg, const std::vector<std::vector<std::int32_t>>& prompts,
                             int max_tokens, EngineStats* stats_out = nullptr) {
  LoadedModel m = load(pool);
  auto engine = Engine::create(*m.executor, cfg);
  ASSERT_TRUE(engine.ok()) << engine.error().message;
  Collector c;
  for (size_t i = 0; i < prompts.size(); ++i)
    ASSERT_TRUE((*engine)->submit(greedy_request(prompts[i], max_tokens), c.sink(int(i))).ok());
  c.wait(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(c.tokens_[int(i)], solo_greedy(prompts[i], max_tokens)) << "request " << i;
    EXPECT_EQ(c.final_[int(i)].reason, FinishReason::length);
    EXPECT_TRUE(c.final_[int(i)].error.empty()) << c.final_[int(i)].error;
    EXPECT_EQ(c.final_[int(i)].completion_tokens, max_tokens);
  }
  (*engine)->drain();
  const EngineStats st = (*engine)->stats();
  EXPECT_EQ(st.kv_blocks_used, 0);
  EXPECT_EQ(st.running + st.waiting, 0);
  if (stats_out) *stats_out = st;
}

TEST(Engine, concurrent_greedy_requests_share_steps_and_each_equals_its_solo_run) {
  std::vector<std::vector<std::int32_t>> prompts;
  for (int i = 0; i < 8; ++i) prompts.push_back(prompt(3 + 5 * i, i));
  EngineConfig cfg;
  cfg.max_batch_tokens = 64;
  EngineStats st;
  expect_each_equals_solo(1024, cfg, prompts, 10, &st);
  EXPECT_GT(st.max_step_sequences, 1) << "requests were never batched together";
  EXPECT_GT(st.ahead_steps, 0) << "no decode step was queued ahead";
}

TEST(Engine, without_launch_ahead_every_step_is_waited_for_and_the_tokens_are_the_same) {
  std::vector<std::vector<std::int32_t>> prompts;
  for (int i = 0; i < 3; ++i) prompts.push_back(prompt(4 + 6 * i, 20 + i));
  EngineConfig cfg;
  cfg.launch_ahead = false;
  EngineStats st;
  expect_each_equals_solo(1024, cfg, prompts, 10, &st);
  EXPECT_EQ(st.ahead_steps, 0);
}

// A row that stops on an EOS token while its next step is already queued (launched ahead) wastes that row: the
// request still ends at the EOS with the solo run's tokens before it, the other request in those steps gets its
// solo tokens, and every block comes back.
TEST(Engine, a_request_ending_on_eos_while_its_next_step_is_queued_ahead_ends_there) {
  const std::vector<std::int32_t> p = prompt(6, 7), other = prompt(9, 8);
  const int n = 16;
  const std::vector<std::int32_t> solo = solo_greedy(p, n);
  // The EOS: an output token not seen before it, far enough in that steps were queued ahead by then.
  int at = -1;
  for (int i = 4; i < n && at < 0; ++i)
    if (std::find(solo.begin(), solo.begin() + i, solo[i]) == solo.begin() + i) at = i;
  ASSERT_GE(at, 0) << "no output token of the solo run is new past the fourth";
  LoadedModel m = load(1024);
  EngineConfig cfg;
  cfg.eos_token_ids = {solo[at]};
  auto engine = Engine::create(*m.executor, cfg);
  ASSERT_TRUE(engine.ok()) << engine.error().message;
  Collector c;
  ASSERT_TRUE((*engine)->submit(greedy_request(p, n), c.sink(0)).ok());
  ASSERT_TRUE((*engine)->submit(greedy_request(other, n), c.sink(1)).ok());
  c.wait(2);
  EXPECT_EQ(c.tokens_[0], std::vector<std::int32_t>(solo.begin(), solo.begin() + at));  // the EOS is not output
  EXPECT_EQ(c.final_[0].reason, FinishReason::stop);
  EXPECT_EQ(c.final_[0].completion_tokens, at + 1);
  const std::vector<std::int32_t> other_solo = solo_greedy(other, n);
  const auto eos = std::find(other_solo.begin(), other_solo.end(), solo[at]);
  EXPECT_EQ(c.tokens_[1], std::vector<std::int32_t>(other_solo.begin(), eos));
  (*engine)->drain();
  const EngineStats st = (*engine)->stats();
  EXPECT_GT(st.ahead_steps, 0);
  EXPECT_EQ(st.kv_blocks_used, 0);
}

TEST(Engine, prompts_longer_than_the_step_budget_prefill_in_chunks) {
  EngineConfig cfg;
  cfg.max_batch_tokens = 8;
  expect_each_equals_solo(1024, cfg, {prompt(37, 1), prompt(20, 2)}, 6);
}

TEST(Engine, a_small_kv_pool_forces_preemption_by_recompute_and_outputs_do_not_change) {
  EngineConfig cfg;
  cfg.max_batch_tokens = 32;
  cfg.prefix_caching = false;
  EngineStats st;
  // 4 sequences of 10 + 14 tokens need 6 blocks of 4 each at the end; the pool has 12.
  expect_each_equals_solo(48, cfg, {prompt(10, 1), prompt(10, 2), prompt(10, 3), prompt(10, 4)}, 14, &st);
  EXPECT_GT(st.preemptions, 0);
}

TEST(Engine, a_second_request_sharing_a_long_prefix_hits_the_cache_and_gets_the_same_tokens) {
  LoadedModel m = load(1024);
  EngineConfig cfg;
  auto engine = Engine::create(*m.executor, cfg);
  ASSERT_TRUE(engine.ok());
  std::vector<std::int32_t> shared = prompt(40, 7), a = shared, b = shared;
  a.push_back(11);
  b.push_back(12);
  Collector c;
  ASSERT_TRUE((*engine)->submit(greedy_request(a, 5), c.sink(0)).ok());
  c.wait(1);
  ASSERT_TRUE((*engine)->submit(greedy_request(b, 5), c.sink(1)).ok());
  c.wait(2);
  EXPECT_EQ(c.final_[0].cached_prompt_tokens, 0);
  EXPECT_EQ(c.final_[1].cached_prompt_tokens, 40);  // 10 full blocks of 4
  EXPECT_EQ(c.tokens_[1], solo_greedy(b, 5));
  const EngineStats st = (*engine)->stats();
  EXPECT_EQ(st.prefix_hit_tokens, 40);
}

TEST(Engine, abort_finishes_the_request_and_returns_its_blocks) {
  LoadedModel m = load(1024);
  auto engine = Engine::create(*m.executor, EngineConfig{});
  ASSERT_TRUE(engine.ok());
  Collector c;
  std::mutex mu;
  std::condition_variable cv;
  bool started = false;
  UpdateFn sink = c.sink(0);
  auto id = (*engine)->submit(greedy_request(prompt(12, 3), 100), [&](const RequestUpdate& u) {
    sink(u);
    std::lock_guard<std::mutex> lock(mu);
    started = true;
    cv.notify_all();
  });
  ASSERT_TRUE(id.ok());
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return started; });
  }
  (*engine)->abort(*id);
  c.wait(1);
  EXPECT_EQ(c.final_[0].reason, FinishReason::none);
  EXPECT_LT(c.final_[0].completion_tokens, 100);
  (*engine)->drain();
  EXPECT_EQ((*engine)->stats().kv_blocks_used, 0);
}

// The crowded run's steps mix one sampled row with greedy ones (Executor::step_picked: the greedy rows take their
// picks, the sampled row its logits): the greedy requests get their solo tokens too.
TEST(Engine, seeded_sampling_is_reproducible_whatever_else_is_in_the_batch) {
  auto run = [](bool crowded) {
    LoadedModel m = load(1024);
    auto engine = Engine::create(*m.executor, EngineConfig{});
    EXPECT_TRUE(engine.ok());
    Collector c;
    GenerateRequest r;
    r.prompt = prompt(9, 5);
    r.sampling.temperature = 1.0;
    r.sampling.seed = 1234;
    r.sampling.max_tokens = 12;
    EXPECT_TRUE((*engine)->submit(r, c.sink(0)).ok());
    if (crowded) {
      for (int i = 1; i < 6; ++i) EXPECT_TRUE((*engine)->submit(greedy_request(prompt(4 + i, i), 12), c.sink(i)).ok());
    }
    c.wait(crowded ? 6 : 1);
    if (crowded) {
      for (int i = 1; i < 6; ++i) EXPECT_EQ(c.tokens_[i], solo_greedy(prompt(4 + i, i), 12)) << "request " << i;
    }
    return c.tokens_[0];
  };
  const auto alone = run(false);
  EXPECT_EQ(alone.size(), 12u);
  EXPECT_EQ(run(true), alone);
}

EngineConfig one_running_one_waiting() {
  EngineConfig cfg;
  cfg.max_waiting = 1;
  cfg.max_running = 1;
  return cfg;
}

TEST(Engine, requests_that_cannot_fit_and_a_full_queue_are_refused_at_submit) {
  LoadedModel m = load(64);
  auto engine = Engine::create(*m.executor, one_running_one_waiting());
  ASSERT_TRUE(engine.ok());
  Collector c;
  auto too_long = (*engine)->submit(greedy_request(prompt(60, 1), 10), c.sink(0));
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.error().message.find("exceeds the context of 64 tokens"), std::string::npos)
      << too_long.error().message;
  auto bad_id = (*engine)->submit(greedy_request({1, 999}, 2), c.sink(0));
  ASSERT_FALSE(bad_id.ok());
  EXPECT_NE(bad_id.error().message.find("outside the vocabulary"), std::string::npos);
  EXPECT_FALSE((*engine)->submit(greedy_request({}, 2), c.sink(0)).ok());
  // One waiting slot: the second submit in quick succession may find the first still queued.
  int accepted = 0, refused = 0;
  for (int i = 0; i < 20; ++i) {
    auto r = (*engine)->submit(greedy_request(prompt(8, i), 20), c.sink(100 + i));
    if (r.ok()) ++accepted;
    else {
      ++refused;
      EXPECT_NE(r.error().message.find("queue is full"), std::string::npos) << r.error().message;
    }
  }
  EXPECT_GT(refused, 0);
  c.wait(static_cast<size_t>(accepted));
  (*engine)->drain();
  EXPECT_FALSE((*engine)->submit(greedy_request(prompt(8, 1), 2), c.sink(0)).ok());  // draining: refused
}

// A request's own update saying it finished comes before the engine's end-of-step bookkeeping: by then it must no
// longer count against the queue (it was admitted), or a client answered at once is refused a free slot (seen as a
// flaky 429 in the server's admission test on a loaded machine).
TEST(Engine, a_finished_request_no_longer_counts_against_the_queue_when_its_client_hears_of_it) {
  LoadedModel m = load(64);
  auto engine = Engine::create(*m.executor, one_running_one_waiting());
  ASSERT_TRUE(engine.ok());
  Engine& e = **engine;
  Collector c;
  std::mutex mu;
  std::optional<Result<RequestId>> next;  // submitted from inside the first request's final update
  const UpdateFn first_sink = c.sink(0);
  auto first = e.submit(greedy_request(prompt(8, 1), 1), [&](const RequestUpdate& u) {
    if (u.finished) {
      std::lock_guard<std::mutex> lock(mu);
      next = e.submit(greedy_request(prompt(8, 2), 1), c.sink(1));
    }
    first_sink(u);
  });
  ASSERT_TRUE(first.ok());
  c.wait(1);
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_TRUE(next.has_value());
    ASSERT_TRUE(next->ok()) << next->error().message;
  }
  c.wait(2);
  EXPECT_EQ(c.final_[1].completion_tokens, 1);
}

}  // namespace
}  // namespace day0
