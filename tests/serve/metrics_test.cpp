// The Prometheus exposition: histogram buckets are cumulative and end in +Inf, requests are labelled by
// route and status, the engine's gauges appear once it is attached, and the hit rate is hits / queried.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "serve/metrics.h"

namespace day0 {
namespace {

// The value of the sample line that starts with `prefix` (name and labels), or NaN.
double sample(const std::string& text, const std::string& prefix) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(prefix + " ", 0) == 0) return std::stod(line.substr(prefix.size() + 1));
  return std::nan("");
}

TEST(Histogram, buckets_are_cumulative_with_sum_and_count) {
  Histogram h({0.1, 1.0});
  h.observe(0.05);
  h.observe(0.1);  // le is inclusive
  h.observe(0.5);
  h.observe(7.0);
  const Histogram::Snapshot s = h.snapshot();
  ASSERT_EQ(s.cumulative.size(), 2u);
  EXPECT_EQ(s.cumulative[0], 2u);
  EXPECT_EQ(s.cumulative[1], 3u);
  EXPECT_EQ(s.count, 4u);
  EXPECT_DOUBLE_EQ(s.sum, 7.65);
}

TEST(ServerMetrics, exposition_has_types_labels_and_inf_bucket) {
  ServerMetrics m;
  m.count_request("/v1/completions", 200);
  m.count_request("/v1/completions", 200);
  m.count_request("/v1/completions", 400);
  m.add_prompt_tokens(12);
  m.add_generated_tokens(5);
  m.observe_time_to_first_token(0.02);
  m.observe_inter_token_latency(0.004);
  const std::string text = m.prometheus_text(std::nullopt, false);
  EXPECT_NE(text.find("# TYPE day0_requests_total counter"), std::string::npos);
  EXPECT_NE(text.find("# TYPE day0_time_to_first_token_seconds histogram"), std::string::npos);
  EXPECT_EQ(sample(text, "day0_requests_total{route=\"/v1/completions\",status=\"200\"}"), 2);
  EXPECT_EQ(sample(text, "day0_requests_total{route=\"/v1/completions\",status=\"400\"}"), 1);
  EXPECT_EQ(sample(text, "day0_prompt_tokens_total"), 12);
  EXPECT_EQ(sample(text, "day0_generation_tokens_total"), 5);
  EXPECT_EQ(sample(text, "day0_time_to_first_token_seconds_bucket{le=\"0.025\"}"), 1);
  EXPECT_EQ(sample(text, "day0_time_to_first_token_seconds_bucket{le=\"0.01\"}"), 0);
  EXPECT_EQ(sample(text, "day0_time_to_first_token_seconds_bucket{le=\"+Inf\"}"), 1);
  EXPECT_EQ(sample(text, "day0_inter_token_latency_seconds_count"), 1);
  EXPECT_EQ(sample(text, "day0_ready"), 0);
  // No engine yet (loading): no engine gauges rather than made-up zeros.
  EXPECT_EQ(text.find("day0_kv_blocks_used"), std::string::npos);
  EXPECT_EQ(m.requests_with_status("/v1/completions", 200), 2);
}

TEST(ServerMetrics, engine_gauges_and_prefix_hit_rate) {
  ServerMetrics m;
  EngineStats s;
  s.waiting = 3;
  s.running = 7;
  s.kv_blocks_used = 10;
  s.kv_blocks_free = 54;
  s.kv_blocks_total = 64;
  s.prefix_prompt_tokens = 200;
  s.prefix_hit_tokens = 50;
  s.max_step_sequences = 7;
  s.ahead_steps = 11;
  s.device_draws = 12;
  s.device_edited_rows = 13;
  s.device_logprob_rows = 14;
  const std::string text = m.prometheus_text(s, true);
  EXPECT_EQ(sample(text, "day0_ready"), 1);
  EXPECT_EQ(sample(text, "day0_requests_waiting"), 3);
  EXPECT_EQ(sample(text, "day0_requests_running"), 7);
  EXPECT_EQ(sample(text, "day0_kv_blocks_used"), 10);
  EXPECT_EQ(sample(text, "day0_kv_blocks_free"), 54);
  EXPECT_EQ(sample(text, "day0_prefix_cache_hit_rate"), 0.25);
  EXPECT_EQ(sample(text, "day0_engine_max_step_sequences"), 7);
  EXPECT_EQ(sample(text, "day0_engine_ahead_steps_total"), 11);
  EXPECT_EQ(sample(text, "day0_engine_device_draws_total"), 12);
  EXPECT_EQ(sample(text, "day0_engine_device_edited_rows_total"), 13);
  EXPECT_EQ(sample(text, "day0_engine_device_logprob_rows_total"), 14);
}

}  // namespace
}  // namespace day0
