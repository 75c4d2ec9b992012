// POST /v1/completions: the request body as a typed struct. The prompt is one string or one list of
// token ids; batches (several prompts) and n > 1 are refused, as are echo, suffix and best_of > 1.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "engine/sampling_params.h"
#include "serve/api_error.h"
#include "serve/protocol_config.h"

namespace day0 {

struct CompletionRequest {
  std::string model;
  std::variant<std::string, std::vector<std::int32_t>> prompt;  // text, or token ids used as they are
  bool stream = false;
  bool include_usage = false;
  std::optional<std::int32_t> max_tokens;  // as sent; sampling.max_tokens is set by resolve_max_tokens
  SamplingParams sampling;                 // logprobs: n means logprobs = true, top_logprobs = n
  std::string user;
};

inline constexpr std::int32_t kCompletionDefaultMaxTokens = 16;  // OpenAI's default for this endpoint

ApiResult<CompletionRequest> parse_completion_request(std::string_view body, const ProtocolConfig& config);
ApiResult<CompletionRequest> completion_request_from_json(const nlohmann::ordered_json& body, const ProtocolConfig& config);

// After tokenization: sets request.sampling.max_tokens from max_tokens, the default of 16 and the
// context left (RELIABILITY.md V3).
ApiStatus resolve_max_tokens(CompletionRequest& request, std::int64_t n_prompt_tokens, const ProtocolConfig& config);

}  // namespace day0
