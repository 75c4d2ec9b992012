// SamplingParams: how one request turns logits into tokens and when it stops, with the allowed range of
// every parameter (OpenAI's where it has one, vLLM's otherwise) and a validation that names the parameter.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "ops/logprob_record.h"

namespace day0 {

// A closed or half-open interval of allowed values, printed as "[0, 2]" or "(0, 1]".
struct ParamRange {
  double lo;
  double hi;
  bool lo_open = false;
  bool hi_open = false;

  bool contains(double v) const;  // false for NaN
  std::string describe() const;
};

namespace sampling_range {
inline constexpr ParamRange kTemperature{0.0, 2.0};
inline constexpr ParamRange kTopP{0.0, 1.0, true, false};
inline constexpr ParamRange kMinP{0.0, 1.0};
inline constexpr ParamRange kPresencePenalty{-2.0, 2.0};
inline constexpr ParamRange kFrequencyPenalty{-2.0, 2.0};
inline constexpr ParamRange kRepetitionPenalty{0.0, 2.0, true, false};
inline constexpr ParamRange kLogitBias{-100.0, 100.0};
inline constexpr int kMaxTopLogprobs = kMaxLogprobTop;
// Signed 64-bit so that the seed survives any JSON client; negative seeds are rejected, not "random".
inline constexpr std::uint64_t kMaxSeed = 9223372036854775807ull;
}  // namespace sampling_range

// Below this temperature sampling is greedy (vLLM's _SAMPLING_EPS).
inline constexpr double kGreedyTemperature = 1e-5;

struct SamplingParams {
  double temperature = 1.0;  // 0 = greedy (exact argmax, lowest id on ties)
  std::int32_t top_k = 0;    // 0 or -1 = all tokens
  double top_p = 1.0;
  double min_p = 0.0;
  double presence_penalty = 0.0;    // subtracted once from every token already in the output
  double frequency_penalty = 0.0;   // subtracted per occurrence in the output
  double repetition_penalty = 1.0;  // over prompt and output: positive logits divided, negative multiplied
  std::vector<std::pair<std::int32_t, double>> logit_bias;  // added to the raw logits first
  std::optional<std::uint64_t> seed;  // unset: the engine draws one per request

  std::int32_t max_tokens = 16;
  std::vector<std::string> stop;               // the stop string itself is not returned
  std::vector<std::int32_t> stop_token_ids;    // finish with "stop"; the token is not returned
  bool ignore_eos = false;

  bool logprobs = false;        // report the sampled token's logprob
  std::int32_t top_logprobs = 0;  // and this many most likely tokens (needs logprobs)

  bool is_greedy() const { return temperature < kGreedyTemperature; }
};

// Limits that depend on the model or the deployment; zero means "not known here, not checked".
struct SamplingLimits {
  std::int32_t vocab_size = 0;
  std::int32_t max_tokens = 0;
  std::int32_t max_stop_strings = 16;
  std::int32_t max_stop_bytes = 1024;    // per stop string
  std::int32_t max_logit_bias = 1024;    // entries
};

// The first invalid parameter: its name as in the OpenAI API and a message naming the allowed range.
struct InvalidParam {
  std::string param;
  std::string message;
};

std::optional<InvalidParam> find_invalid_param(const SamplingParams& params, const SamplingLimits& limits);
// The same as a Status, for callers that do not need the parameter name separately.
Status validate_sampling_params(const SamplingParams& params, const SamplingLimits& limits);

// "<param> must be in <range>, got <value>": the one wording used by the engine and the server.
std::string range_message(const std::string& param, const ParamRange& range, double value);

}  // namespace day0
