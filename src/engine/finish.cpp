// Token-level finish checks; stop strings live in StopMatcher because they need the decoded text.
#include "engine/finish.h"

#include <algorithm>

namespace day0 {

std::string_view finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::stop: return "stop";
    case FinishReason::length: return "length";
    case FinishReason::none: break;
  }
  return {};
}

bool is_stop_token(std::int32_t token, const SamplingParams& params, std::span<const std::int32_t> eos_token_ids) {
  if (!params.ignore_eos && std::find(eos_token_ids.begin(), eos_token_ids.end(), token) != eos_token_ids.end())
    return true;
  return std::find(params.stop_token_ids.begin(), params.stop_token_ids.end(), token) != params.stop_token_ids.end();
}

FinishReason finish_after_token(std::int32_t token, std::int64_t n_output_tokens, const SamplingParams& params,
                                std::span<const std::int32_t> eos_token_ids) {
  if (is_stop_token(token, params, eos_token_ids)) return FinishReason::stop;
  if (n_output_tokens >= params.max_tokens) return FinishReason::length;
  return FinishReason::none;
}

}  // namespace day0
