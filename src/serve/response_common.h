// What completion and chat responses share: the response identity, token usage, per-token logprobs
// with their decoded text, and serialisation that never throws on a stray byte.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "engine/finish.h"

namespace day0 {

struct ResponseMeta {
  std::string id;            // "cmpl-..." or "chatcmpl-..."
  std::int64_t created = 0;  // Unix seconds
  std::string model;
};

struct Usage {
  std::int64_t prompt_tokens = 0;
  std::int64_t completion_tokens = 0;
};

// One alternative token: its decoded bytes (a byte-level token may hold part of a character) and logprob.
struct TokenText {
  std::string bytes;
  float logprob = 0.f;
};

// One generated token with the most likely alternatives at its position, most likely first.
struct LogprobEntry {
  TokenText token;
  std::vector<TokenText> top;
};

// "<prefix>-" and 32 hex digits of the two random words the caller drew.
std::string response_id(std::string_view prefix, std::uint64_t random_hi, std::uint64_t random_lo);

// {"prompt_tokens", "completion_tokens", "total_tokens"}.
nlohmann::ordered_json usage_json(const Usage& usage);

// The finish_reason value: "stop", "length", or null while unfinished.
nlohmann::ordered_json finish_reason_json(FinishReason reason);

// A logprob as JSON: the float's shortest decimal form; -inf (and NaN) become -9999.0, as vLLM reports them.
nlohmann::ordered_json logprob_json(float logprob);

// Token text for JSON strings: invalid UTF-8 (a partial character) becomes U+FFFD.
std::string token_string(std::string_view bytes);

// Characters as Python's len() counts them (code points): the unit of completions' text_offset.
std::int64_t code_point_count(std::string_view text);

// Compact JSON text; invalid UTF-8 in strings is replaced rather than thrown on.
std::string json_text(const nlohmann::ordered_json& value);

}  // namespace day0
