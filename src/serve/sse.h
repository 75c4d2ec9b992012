// Server-sent events framing of the OpenAI streaming API: one "data: <json>\n\n" event per chunk and
// "data: [DONE]\n\n" at the end. An error after the stream started is one error event, then [DONE]
// (RELIABILITY.md: no second status line can be sent once the 200 went out).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "serve/api_error.h"

namespace day0 {

std::string sse_event(const nlohmann::ordered_json& data);
std::string sse_done();
std::string sse_error(const ApiError& error);  // the error event followed by [DONE]

}  // namespace day0
