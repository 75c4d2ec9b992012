// Response bodies of POST /v1/chat/completions: the "chat.completion" object and the
// "chat.completion.chunk" stream (a role delta first, then content deltas, then the finish), with
// logprobs in the chat format ({"content": [{token, logprob, bytes, top_logprobs}], "refusal"}).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "serve/response_common.h"

namespace day0 {

struct ChatOutput {
  std::string content;
  std::optional<std::string> reasoning_content;  // a reasoning parser's output (vLLM's field)
  nlohmann::ordered_json tool_calls;              // a tool parser's calls, or null; then finish "tool_calls"
  FinishReason finish_reason = FinishReason::none;
  std::optional<std::vector<LogprobEntry>> logprobs;
};

// {"content": [...], "refusal": null}; each entry has token, logprob, bytes and its top alternatives.
nlohmann::ordered_json chat_logprobs_json(std::span<const LogprobEntry> entries);

// The complete response: {"id", "object": "chat.completion", "created", "model", "choices", "usage"}.
nlohmann::ordered_json chat_completion_response(const ResponseMeta& meta, const ChatOutput& output, const Usage& usage);

// One chunk of choice 0 with the given delta object ({"role": "assistant", "content": ""} first, then
// {"content": "..."}, then {} with the finish reason). With include_usage every chunk has "usage": null.
nlohmann::ordered_json chat_chunk(const ResponseMeta& meta, nlohmann::ordered_json delta,
                                  const nlohmann::ordered_json& logprobs, FinishReason finish_reason,
                                  bool include_usage);

// The last chunk when stream_options.include_usage: no choices, the usage of the whole request.
nlohmann::ordered_json chat_usage_chunk(const ResponseMeta& meta, const Usage& usage);

}  // namespace day0
