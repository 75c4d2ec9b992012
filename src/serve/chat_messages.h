// The "messages", "tools" and "tool_choice" of a chat request: checked per role and normalised for the
// chat template. Errors name the exact place ("messages[3].content[1].type").
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "serve/api_error.h"
#include "serve/protocol_config.h"

namespace day0 {

// Roles: system, developer, user, assistant, tool. Content: a string, or an array of {"type": "text",
// "text"} parts (joined with "\n", as vLLM does for string templates); null only for an assistant
// message with tool_calls. A tool message needs tool_call_id. Unknown message fields are refused.
ApiResult<nlohmann::ordered_json> read_chat_messages(const nlohmann::ordered_json* messages,
                                                     const ProtocolConfig& config);

// [{"type": "function", "function": {"name", "description"?, "parameters"?: object, "strict"?}}],
// passed through unchanged once its shape is checked.
ApiResult<nlohmann::ordered_json> read_chat_tools(const nlohmann::ordered_json* tools);

// "auto" or "none"; "required" and a named function need constrained decoding, which is not available.
ApiResult<std::string> read_tool_choice(const nlohmann::ordered_json* tool_choice);

}  // namespace day0
