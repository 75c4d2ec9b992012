// SSE framing; compact JSON never holds a raw newline, so one data line per event suffices.
#include "serve/sse.h"

#include "serve/response_common.h"

namespace day0 {

std::string sse_event(const nlohmann::ordered_json& data) { return "data: " + json_text(data) + "\n\n"; }

std::string sse_done() { return "data: [DONE]\n\n"; }

std::string sse_error(const ApiError& error) { return sse_event(error_body(error)) + sse_done(); }

}  // namespace day0
