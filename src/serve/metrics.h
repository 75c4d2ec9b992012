// ServerMetrics: the server's own counters and latency histograms, and the Prometheus text exposition of
// them together with the engine's gauges (queue, running sequences, KV blocks, prefix-cache hits, batching).
// Every method is thread-safe: connection threads record, the /metrics handler renders.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/engine.h"

namespace day0 {

// A Prometheus histogram: counts per upper bound (le), plus +Inf, sum and count.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);

  struct Snapshot {
    std::vector<double> upper_bounds;
    std::vector<std::uint64_t> cumulative;  // per bound, then +Inf (= count)
    double sum = 0;
    std::uint64_t count = 0;
  };
  Snapshot snapshot() const;

 private:
  mutable std::mutex mutex_;
  std::vector<double> bounds_;
  std::vector<std::uint64_t> counts_;  // per bucket, not cumulative; last = above every bound
  double sum_ = 0;
};

// Latency buckets in seconds, from 1 ms (a tiny model's token on a GPU) to 60 s (a long queue wait).
std::vector<double> latency_buckets_seconds();

class ServerMetrics {
 public:
  ServerMetrics();

  // One finished HTTP request. `route` is a route of the server's table or "other" (unknown paths must not
  // create label values: a scanner would grow the exposition without bound).
  void count_request(std::string_view route, int http_status);
  void add_prompt_tokens(std::int64_t n) { prompt_tokens_ += n; }
  void add_generated_tokens(std::int64_t n) { generated_tokens_ += n; }
  void observe_time_to_first_token(double seconds) { ttft_.observe(seconds); }
  void observe_inter_token_latency(double seconds) { itl_.observe(seconds); }
  void observe_request_latency(double seconds) { e2e_.observe(seconds); }
  void count_client_disconnect() { disconnects_ += 1; }
  void count_stop_string_abort() { stop_string_aborts_ += 1; }

  std::int64_t requests_with_status(std::string_view route, int http_status) const;

  // The exposition (text format 0.0.4). `engine` is absent while the model loads.
  std::string prometheus_text(const std::optional<EngineStats>& engine, bool ready) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, std::int64_t> requests_;
  std::atomic<std::int64_t> prompt_tokens_{0}, generated_tokens_{0}, disconnects_{0}, stop_string_aborts_{0};
  Histogram ttft_, itl_, e2e_;
};

}  // namespace day0
