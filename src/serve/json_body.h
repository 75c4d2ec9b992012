// A request body as JSON, parsed strictly (RELIABILITY.md V1): no BOM, no duplicate keys, no NaN or
// overflowing numbers, bounded nesting depth and array length. A refusal names where in the body it
// happened ("messages[2].content") so that even a parse error carries the param.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "serve/api_error.h"

namespace day0 {

struct JsonLimits {
  std::int32_t max_depth = 64;                // nested objects and arrays
  std::int64_t max_array_elements = 262144;  // per array: a token-id prompt of 256k tokens fits
};

// ordered_json keeps the client's key order, which chat templates print (tool schemas).
ApiResult<nlohmann::ordered_json> parse_json_body(std::string_view body, const JsonLimits& limits = {});

}  // namespace day0
