// Range checks of SamplingParams; every message names the parameter, the allowed range and the value.
#include "engine/sampling_params.h"

#include <charconv>
#include <cmath>

namespace day0 {
namespace {

std::string format_number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

std::optional<InvalidParam> check_range(const char* param, const ParamRange& range, double value) {
  if (range.contains(value)) return std::nullopt;
  return InvalidParam{param, range_message(param, range, value)};
}

std::optional<InvalidParam> check_token_id(const std::string& param, std::int64_t id, std::int32_t vocab_size) {
  if (id < 0 || (vocab_size > 0 && id >= vocab_size)) {
    const std::string hi = vocab_size > 0 ? std::to_string(vocab_size - 1) : "2147483647";
    return InvalidParam{param, param + " must hold token ids in [0, " + hi + "], got " + std::to_string(id)};
  }
  return std::nullopt;
}

std::optional<InvalidParam> check_stop(const SamplingParams& p, const SamplingLimits& limits) {
  if (limits.max_stop_strings > 0 && p.stop.size() > static_cast<std::size_t>(limits.max_stop_strings))
    return InvalidParam{"stop", "stop must hold at most " + std::to_string(limits.max_stop_strings) +
                                    " strings, got " + std::to_string(p.stop.size())};
  for (const std::string& s : p.stop) {
    if (s.empty()) return InvalidParam{"stop", "stop strings must not be empty"};
    if (limits.max_stop_bytes > 0 && s.size() > static_cast<std::size_t>(limits.max_stop_bytes))
      return InvalidParam{"stop", "stop strings must be at most " + std::to_string(limits.max_stop_bytes) +
                                      " bytes each, got one of " + std::to_string(s.size())};
  }
  return std::nullopt;
}

}  // namespace

bool ParamRange::contains(double v) const {
  if (std::isnan(v)) return false;
  const bool above_lo = lo_open ? v > lo : v >= lo;
  const bool below_hi = hi_open ? v < hi : v <= hi;
  return above_lo && below_hi;
}

std::string ParamRange::describe() const {
  return std::string(lo_open ? "(" : "[") + format_number(lo) + ", " + format_number(hi) + (hi_open ? ")" : "]");
}

std::string range_message(const std::string& param, const ParamRange& range, double value) {
  return param + " must be in " + range.describe() + ", got " + format_number(value);
}

std::optional<InvalidParam> find_invalid_param(const SamplingParams& p, const SamplingLimits& limits) {
  using namespace sampling_range;
  if (auto e = check_range("temperature", kTemperature, p.temperature)) return e;
  if (p.top_k < -1)
    return InvalidParam{"top_k", "top_k must be -1 or 0 (all tokens) or a positive count, got " +
                                     std::to_string(p.top_k)};
  if (auto e = check_range("top_p", kTopP, p.top_p)) return e;
  if (auto e = check_range("min_p", kMinP, p.min_p)) return e;
  if (auto e = check_range("presence_penalty", kPresencePenalty, p.presence_penalty)) return e;
  if (auto e = check_range("frequency_penalty", kFrequencyPenalty, p.frequency_penalty)) return e;
  if (auto e = check_range("repetition_penalty", kRepetitionPenalty, p.repetition_penalty)) return e;
  if (limits.max_logit_bias > 0 && p.logit_bias.size() > static_cast<std::size_t>(limits.max_logit_bias))
    return InvalidParam{"logit_bias", "logit_bias must hold at most " + std::to_string(limits.max_logit_bias) +
                                          " entries, got " + std::to_string(p.logit_bias.size())};
  for (const auto& [id, bias] : p.logit_bias) {
    if (auto e = check_token_id("logit_bias", id, limits.vocab_size)) return e;
    if (auto e = check_range("logit_bias", kLogitBias, bias)) return e;
  }
  if (p.seed && *p.seed > kMaxSeed)
    return InvalidParam{"seed", "seed must be in [0, " + std::to_string(kMaxSeed) + "], got " + std::to_string(*p.seed)};
  const std::int32_t max_tokens_hi = limits.max_tokens > 0 ? limits.max_tokens : 2147483647;
  if (p.max_tokens < 1 || p.max_tokens > max_tokens_hi)
    return InvalidParam{"max_tokens", "max_tokens must be in [1, " + std::to_string(max_tokens_hi) + "], got " +
                                          std::to_string(p.max_tokens)};
  if (auto e = check_stop(p, limits)) return e;
  for (const std::int32_t id : p.stop_token_ids)
    if (auto e = check_token_id("stop_token_ids", id, limits.vocab_size)) return e;
  if (p.top_logprobs < 0 || p.top_logprobs > kMaxTopLogprobs)
    return InvalidParam{"top_logprobs", "top_logprobs must be in [0, " + std::to_string(kMaxTopLogprobs) +
                                            "], got " + std::to_string(p.top_logprobs)};
  if (p.top_logprobs > 0 && !p.logprobs)
    return InvalidParam{"top_logprobs", "top_logprobs needs logprobs to be true"};
  return std::nullopt;
}

Status validate_sampling_params(const SamplingParams& params, const SamplingLimits& limits) {
  if (auto e = find_invalid_param(params, limits)) return make_error(e->message);
  return Status::success();
}

}  // namespace day0
