// Response bodies of POST /v1/completions: the "text_completion" object and its streamed chunks, with
// logprobs in the legacy completions format (tokens, token_logprobs, top_logprobs, text_offset).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "serve/response_common.h"

namespace day0 {

struct CompletionOutput {
  std::string text;
  FinishReason finish_reason = FinishReason::none;
  std::optional<std::vector<LogprobEntry>> logprobs;  // set when the request asked for logprobs
};

// {"tokens", "token_logprobs", "top_logprobs", "text_offset"}. Each top_logprobs object maps token text
// to logprob for the `top` alternatives plus the sampled token (OpenAI: up to logprobs + 1 entries);
// text_offset counts characters from `first_offset`, the length of the text before these tokens.
nlohmann::ordered_json completion_logprobs_json(std::span<const LogprobEntry> entries, std::int64_t first_offset);

// The complete response: {"id", "object": "text_completion", "created", "model", "choices", "usage"}.
nlohmann::ordered_json completion_response(const ResponseMeta& meta, const CompletionOutput& output, const Usage& usage);

// One streamed chunk of choice 0 (object "text_completion", as OpenAI streams it). With include_usage
// every chunk carries "usage": null; `logprobs` null unless given.
nlohmann::ordered_json completion_chunk(const ResponseMeta& meta, const std::string& text,
                                        const nlohmann::ordered_json& logprobs, FinishReason finish_reason,
                                        bool include_usage);

// The last chunk when stream_options.include_usage: no choices, the usage of the whole request.
nlohmann::ordered_json completion_usage_chunk(const ResponseMeta& meta, const Usage& usage);

}  // namespace day0
