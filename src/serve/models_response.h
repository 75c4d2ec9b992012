// GET /v1/models: the served model names as OpenAI model objects, with the limits requests are
// checked against (RELIABILITY.md V2: "limits configurable and listed in /v1/models metadata").
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "serve/protocol_config.h"

namespace day0 {

// {"object": "list", "data": [{"id", "object": "model", "created", "owned_by", "max_model_len", "limits"}]}
nlohmann::ordered_json models_response(const ProtocolConfig& config, std::int64_t created);

}  // namespace day0
