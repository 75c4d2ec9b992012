// Histograms and the Prometheus text format: "# HELP", "# TYPE", then one sample per line; label values
// come only from the server's own route table, so they never need escaping.
#include "serve/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace day0 {
namespace {

// Prometheus floats: integral values without a fraction, others in the shortest round-trip form.
std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.17g", v);
    // %.17g may print 0.10000000000000001: take the shortest form that reads back the same.
    for (int precision = 1; precision <= 17; ++precision) {
      char shorter[64];
      std::snprintf(shorter, sizeof shorter, "%.*g", precision, v);
      if (std::strtod(shorter, nullptr) == v) {
        std::snprintf(buf, sizeof buf, "%s", shorter);
        break;
      }
    }
  }
  return buf;
}

class Writer {
 public:
  void header(const char* name, const char* type, const char* help) {
    out_ += "# HELP ";
    out_ += name;
    out_ += ' ';
    out_ += help;
    out_ += "\n# TYPE ";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
  }
  void sample(const std::string& name, double value, const std::string& labels = "") {
    out_ += name;
    if (!labels.empty()) out_ += "{" + labels + "}";
    out_ += ' ';
    out_ += number(value);
    out_ += '\n';
  }
  void gauge(const char* name, const char* help, double value) {
    header(name, "gauge", help);
    sample(name, value);
  }
  void counter(const char* name, const char* help, double value) {
    header(name, "counter", help);
    sample(name, value);
  }
  void histogram(const char* name, const char* help, const Histogram::Snapshot& h) {
    header(name, "histogram", help);
    const std::string base = name;
    for (std::size_t i = 0; i < h.upper_bounds.size(); ++i)
      sample(base + "_bucket", static_cast<double>(h.cumulative[i]), "le=\"" + number(h.upper_bounds[i]) + "\"");
    sample(base + "_bucket", static_cast<double>(h.count), "le=\"+Inf\"");
    sample(base + "_sum", h.sum);
    sample(base + "_count", static_cast<double>(h.count));
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds) : bounds_(std::move(upper_bounds)) {
  std::sort(bounds_.begin(), bounds_.end());
  counts_.assign(bounds_.size() + 1, 0);
}

void Histogram::observe(double value) {
  if (std::isnan(value)) return;
  const std::size_t bucket = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  std::lock_guard<std::mutex> lock(mutex_);
  counts_[bucket] += 1;
  sum_ += value;
}

Histogram::Snapshot Histogram::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  Snapshot s;
  s.upper_bounds = bounds_;
  std::uint64_t running = 0;
  for (std::size_t i = 0; i < counts_.size(); ++i) {
    running += counts_[i];
    if (i < bounds_.size()) s.cumulative.push_back(running);
  }
  s.count = running;
  s.sum = sum_;
  return s;
}

std::vector<double> latency_buckets_seconds() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5,
          0.75,  1.0,    2.5,   5.0,  10.0,  20.0, 40.0,  60.0};
}

ServerMetrics::ServerMetrics()
    : ttft_(latency_buckets_seconds()), itl_(latency_buckets_seconds()), e2e_(latency_buckets_seconds()) {}

void ServerMetrics::count_request(std::string_view route, int http_status) {
  std::lock_guard<std::mutex> lock(mutex_);
  requests_[{std::string(route), http_status}] += 1;
}

std::int64_t ServerMetrics::requests_with_status(std::string_view route, int http_status) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = requests_.find({std::string(route), http_status});
  return it == requests_.end() ? 0 : it->second;
}

std::string ServerMetrics::prometheus_text(const std::optional<EngineStats>& engine, bool ready) const {
  Writer w;
  w.gauge("day0_ready", "1 once the weights are loaded and the warm-up generation ran, 0 while loading or draining",
          ready ? 1 : 0);
  w.header("day0_requests_total", "counter", "HTTP requests answered, by route and status code");
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [key, n] : requests_)
      w.sample("day0_requests_total", static_cast<double>(n),
               "route=\"" + key.first + "\",status=\"" + std::to_string(key.second) + "\"");
  }
  w.counter("day0_prompt_tokens_total", "Prompt tokens of admitted generation requests",
            static_cast<double>(prompt_tokens_.load()));
  w.counter("day0_generation_tokens_total", "Tokens generated for clients",
            static_cast<double>(generated_tokens_.load()));
  w.counter("day0_client_disconnects_total", "Requests aborted because their client went away",
            static_cast<double>(disconnects_.load()));
  w.counter("day0_stop_string_aborts_total", "Requests ended early by a stop string",
            static_cast<double>(stop_string_aborts_.load()));
  w.histogram("day0_time_to_first_token_seconds", "From request arrival to its first generated token",
              ttft_.snapshot());
  w.histogram("day0_inter_token_latency_seconds", "Between consecutive generated tokens of one request",
              itl_.snapshot());
  w.histogram("day0_request_duration_seconds", "From arrival to the last token of generation requests",
              e2e_.snapshot());
  if (engine) {
    const EngineStats& s = *engine;
    w.gauge("day0_requests_waiting", "Requests queued in the engine, not yet running", static_cast<double>(s.waiting));
    w.gauge("day0_requests_running", "Sequences in the running batch", static_cast<double>(s.running));
    w.gauge("day0_kv_blocks_used", "KV cache blocks held by sequences", static_cast<double>(s.kv_blocks_used));
    w.gauge("day0_kv_blocks_free", "KV cache blocks not held by any sequence (free or cached for reuse)",
            static_cast<double>(s.kv_blocks_free));
    w.gauge("day0_kv_blocks_total", "KV cache blocks in the pool", static_cast<double>(s.kv_blocks_total));
    w.counter("day0_prefix_cache_queried_tokens_total", "Prompt tokens looked up in the prefix cache",
              static_cast<double>(s.prefix_prompt_tokens));
    w.counter("day0_prefix_cache_hit_tokens_total", "Prompt tokens found in the prefix cache",
              static_cast<double>(s.prefix_hit_tokens));
    w.gauge("day0_prefix_cache_hit_rate", "Prefix cache hit tokens / queried tokens since start",
            s.prefix_prompt_tokens > 0 ? static_cast<double>(s.prefix_hit_tokens) / s.prefix_prompt_tokens : 0.0);
    w.counter("day0_engine_steps_total", "Batched forward steps", static_cast<double>(s.steps));
    w.counter("day0_engine_step_tokens_total", "Tokens run through the model in all steps",
              static_cast<double>(s.step_tokens));
    w.counter("day0_engine_preemptions_total", "Sequences preempted for KV blocks", static_cast<double>(s.preemptions));
    w.gauge("day0_engine_last_step_sequences", "Sequences in the last step", static_cast<double>(s.last_step_sequences));
    w.gauge("day0_engine_max_step_sequences", "Most sequences in one step since start (batching evidence)",
            static_cast<double>(s.max_step_sequences));
    w.counter("day0_engine_ahead_steps_total", "Decode steps queued before the last step's picks were read",
              static_cast<double>(s.ahead_steps));
    w.counter("day0_engine_device_draws_total", "Sampled rows drawn on the device (their logits stay there)",
              static_cast<double>(s.device_draws));
    w.counter("day0_engine_device_edited_rows_total",
              "Rows whose logit_bias and penalties were applied on the device before their pick",
              static_cast<double>(s.device_edited_rows));
    w.counter("day0_engine_device_logprob_rows_total",
              "Rows whose logprobs were taken on the device (no logits copied)",
              static_cast<double>(s.device_logprob_rows));
  }
  return w.take();
}

}  // namespace day0
