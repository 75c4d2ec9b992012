// POST /v1/chat/completions: the request body as a typed struct, with the messages checked per role and
// normalised for the chat template (text content parts joined into one string; tool calls and tool
// definitions passed through as JSON). Non-text content, forced tool choice and n > 1 are refused.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "engine/sampling_params.h"
#include "serve/api_error.h"
#include "serve/protocol_config.h"

namespace day0 {

struct ChatRequest {
  std::string model;
  nlohmann::ordered_json messages;  // array of {role, content: string|null, name?, tool_calls?, ...}
  nlohmann::ordered_json tools;     // array, or null when the request has none
  std::string tool_choice;          // "auto", "none", or empty when not given
  bool stream = false;
  bool include_usage = false;
  std::optional<std::int32_t> max_tokens;   // max_completion_tokens, else the deprecated max_tokens
  std::string max_tokens_param = "max_completion_tokens";  // the field it came from, for errors
  SamplingParams sampling;
  bool add_generation_prompt = true;
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();  // chat_template_kwargs, reasoning_effort
  std::string user;
};

ApiResult<ChatRequest> parse_chat_request(std::string_view body, const ProtocolConfig& config);
ApiResult<ChatRequest> chat_request_from_json(const nlohmann::ordered_json& body, const ProtocolConfig& config);

// The context ChatTemplate::render_ordered expects: {"messages", "tools"?, "add_generation_prompt", kwargs...}.
nlohmann::ordered_json chat_template_input(const ChatRequest& request);

// After tokenization: sets request.sampling.max_tokens; without a limit in the request, all the context
// left (vLLM's default for chat).
ApiStatus resolve_max_tokens(ChatRequest& request, std::int64_t n_prompt_tokens, const ProtocolConfig& config);

}  // namespace day0
