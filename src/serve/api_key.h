// The optional API key (RELIABILITY.md A1, A3): "Authorization: Bearer <key>" or "X-Api-Key: <key>",
// compared in constant time and case-sensitively. The key itself never reaches a log or an error message.
#pragma once

#include <string_view>

namespace day0 {

// Equal length and bytes, in time that depends only on the lengths (not on where they differ).
bool constant_time_equal(std::string_view a, std::string_view b);

// True when either header carries exactly `key`. The scheme name "Bearer" is case-insensitive (RFC 7235);
// the key is not. An empty `key` means no key is configured: everything passes.
bool api_key_accepted(std::string_view authorization, std::string_view x_api_key, std::string_view key);

}  // namespace day0
