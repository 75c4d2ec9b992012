// Model resolution and the context-length rule, with OpenAI's wording of context_length_exceeded.
#include "serve/protocol_config.h"

#include <algorithm>

namespace day0 {

SamplingLimits ProtocolConfig::sampling_limits() const {
  SamplingLimits l;
  l.vocab_size = vocab_size;
  l.max_tokens = max_model_len;
  l.max_stop_strings = max_stop_strings;
  l.max_stop_bytes = max_stop_bytes;
  return l;
}

ApiResult<std::string> resolve_model(const std::optional<std::string>& requested, const ProtocolConfig& config) {
  if (!requested) {
    if (config.model_names.empty()) return invalid_request("model", "model is required");
    return config.model_names.front();
  }
  if (std::find(config.model_names.begin(), config.model_names.end(), *requested) == config.model_names.end())
    return model_not_found(*requested);
  return *requested;
}

ApiResult<std::int32_t> resolve_max_tokens(std::optional<std::int32_t> requested,
                                           std::optional<std::int32_t> default_max_tokens,
                                           std::int64_t n_prompt_tokens, const ProtocolConfig& config,
                                           const std::string& prompt_param, const std::string& max_tokens_param) {
  const std::int64_t len = config.max_model_len;
  if (len <= 0) {
    if (requested) return *requested;
    return default_max_tokens.value_or(16);
  }
  const std::string head = "This model's maximum context length is " + std::to_string(len) + " tokens. However, ";
  if (n_prompt_tokens >= len)
    return invalid_request(prompt_param,
                           head + "your request has " + std::to_string(n_prompt_tokens) +
                               " input tokens, which leaves no room for output. Please reduce the length of the input.",
                           "context_length_exceeded");
  const std::int64_t room = len - n_prompt_tokens;
  if (requested) {
    if (*requested > room)
      return invalid_request(max_tokens_param,
                             head + "you requested " + std::to_string(n_prompt_tokens + *requested) + " tokens (" +
                                 std::to_string(n_prompt_tokens) + " in the input, " + std::to_string(*requested) +
                                 " in the completion). Please reduce the length of the input or of " +
                                 max_tokens_param + ".",
                             "context_length_exceeded");
    return *requested;
  }
  if (default_max_tokens) return static_cast<std::int32_t>(std::min<std::int64_t>(*default_max_tokens, room));
  return static_cast<std::int32_t>(room);
}

}  // namespace day0
