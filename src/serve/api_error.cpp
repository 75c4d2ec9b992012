// OpenAI-shaped error bodies and the one helper that makes user text safe to quote in them.
#include "serve/api_error.h"

namespace day0 {
namespace {

// Length of the valid UTF-8 sequence at s[i], or 0 if there is none (overlongs, surrogates and values
// past U+10FFFF are invalid, as RFC 3629 says).
std::size_t utf8_sequence_length(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  std::size_t n;
  unsigned lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k)
    if (b(i + k) < 0x80 || b(i + k) > 0xBF) return 0;
  return n;
}

}  // namespace

ApiError invalid_request(std::string param, std::string message, std::string code) {
  return ApiError{400, std::move(message), "invalid_request_error", std::move(param), std::move(code)};
}

ApiError model_not_found(std::string_view model) {
  return ApiError{404, "The model '" + quote_user_text(model, 256) + "' does not exist", "not_found_error", "model",
                  "model_not_found"};
}

nlohmann::ordered_json error_body(const ApiError& e) {
  nlohmann::ordered_json inner;
  inner["message"] = e.message;
  inner["type"] = e.type;
  inner["param"] = e.param.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(e.param);
  inner["code"] = e.code.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(e.code);
  nlohmann::ordered_json body;
  body["error"] = std::move(inner);
  return body;
}

std::string quote_user_text(std::string_view text, std::size_t max_bytes) {
  std::string out;
  std::size_t i = 0;
  while (i < text.size() && out.size() < max_bytes) {
    const std::size_t n = utf8_sequence_length(text, i);
    const bool control = n == 1 && (static_cast<unsigned char>(text[i]) < 0x20 || text[i] == 0x7F);
    if (n == 0 || control) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  if (i < text.size()) out += "...";
  return out;
}

}  // namespace day0
