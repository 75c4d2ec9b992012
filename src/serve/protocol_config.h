// What the OpenAI protocol layer needs to know about the deployment: the served model names and the
// limits requests are checked against (also listed in GET /v1/models).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/sampling_params.h"
#include "serve/api_error.h"
#include "serve/json_body.h"

namespace day0 {

struct ProtocolConfig {
  std::vector<std::string> model_names;  // a request without "model" gets the first (as vLLM)
  std::int32_t max_model_len = 0;        // prompt + output tokens; 0: not known, not checked
  std::int32_t vocab_size = 0;           // token ids in prompts, stop_token_ids, logit_bias; 0: not checked
  std::int32_t max_stop_strings = 16;
  std::int32_t max_stop_bytes = 1024;
  std::int32_t max_logprobs = 20;  // completions "logprobs" and chat "top_logprobs"
  std::int32_t max_messages = 4096;
  JsonLimits json;

  SamplingLimits sampling_limits() const;
};

// The served model a request names (or the default when it names none); 404 model_not_found otherwise.
ApiResult<std::string> resolve_model(const std::optional<std::string>& requested, const ProtocolConfig& config);

// RELIABILITY.md V3. The number of tokens the request may generate after `n_prompt_tokens`:
// - the prompt alone must leave room for one token, else 400 context_length_exceeded on `prompt_param`;
// - an explicit max_tokens must fit: prompt + max_tokens <= max_model_len, else the same error on
//   `max_tokens_param`, with the numbers;
// - without one, `default_max_tokens` (completions: 16) clamped to the room left, or all the room left
//   when there is no default (chat, as vLLM).
ApiResult<std::int32_t> resolve_max_tokens(std::optional<std::int32_t> requested,
                                           std::optional<std::int32_t> default_max_tokens,
                                           std::int64_t n_prompt_tokens, const ProtocolConfig& config,
                                           const std::string& prompt_param, const std::string& max_tokens_param);

}  // namespace day0
