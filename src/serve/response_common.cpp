// Shared response pieces.
#include "serve/response_common.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

namespace day0 {

std::string response_id(std::string_view prefix, std::uint64_t hi, std::uint64_t lo) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id(prefix);
  id += '-';
  for (const std::uint64_t word : {hi, lo})
    for (int shift = 60; shift >= 0; shift -= 4) id += kHex[(word >> shift) & 0xF];
  return id;
}

nlohmann::ordered_json usage_json(const Usage& u) {
  nlohmann::ordered_json j;
  j["prompt_tokens"] = u.prompt_tokens;
  j["completion_tokens"] = u.completion_tokens;
  j["total_tokens"] = u.prompt_tokens + u.completion_tokens;
  return j;
}

nlohmann::ordered_json finish_reason_json(FinishReason reason) {
  const std::string_view name = finish_reason_name(reason);
  return name.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(std::string(name));
}

nlohmann::ordered_json logprob_json(float logprob) {
  if (!std::isfinite(logprob)) return -9999.0;
  // Through the float's shortest decimal form, so that -0.1053605f prints as -0.1053605 rather than
  // as the double -0.10536050796508789.
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof(buf) - 1, logprob);
  *r.ptr = '\0';
  return std::strtod(buf, nullptr);
}

std::string token_string(std::string_view bytes) {
  // nlohmann's dump with error_handler_t::replace does exactly the U+FFFD replacement we want.
  const std::string quoted = nlohmann::ordered_json(std::string(bytes)).dump(-1, ' ', false,
                                                                            nlohmann::ordered_json::error_handler_t::replace);
  return nlohmann::ordered_json::parse(quoted).get<std::string>();
}

std::int64_t code_point_count(std::string_view text) {
  std::int64_t n = 0;
  for (const char c : text) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

std::string json_text(const nlohmann::ordered_json& value) {
  return value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace day0
