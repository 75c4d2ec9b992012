// ApiError: a refused request as the OpenAI API reports it ({"error": {message, type, param, code}} with
// an HTTP status). It is the client-facing answer to bad input, not an internal failure: internal errors
// stay Status and become a 500 only at the HTTP boundary. ApiResult<T> mirrors Result<T> so that
// D0_RETURN_IF_ERROR and D0_ASSIGN_OR_RETURN work with it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace day0 {

struct ApiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // empty: null
  std::string code;   // empty: null
};

// 400 invalid_request_error naming `param` (may be empty).
ApiError invalid_request(std::string param, std::string message, std::string code = {});
// 404 not_found_error, code model_not_found, param model.
ApiError model_not_found(std::string_view model);

// {"error": {"message", "type", "param", "code"}}; param and code are null when empty.
nlohmann::ordered_json error_body(const ApiError& error);

// At most `max_bytes` of user text for an error message: invalid UTF-8 and control characters become
// U+FFFD, so that no message echoes raw bytes back.
std::string quote_user_text(std::string_view text, std::size_t max_bytes = 64);

template <class T>
class [[nodiscard]] ApiResult {
 public:
  ApiResult(T value) : v_(std::move(value)) {}
  ApiResult(ApiError error) : v_(std::move(error)) {}

  bool ok() const { return v_.index() == 0; }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const ApiError& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, ApiError> v_;
};

class [[nodiscard]] ApiStatus {
 public:
  ApiStatus() = default;
  ApiStatus(ApiError error) : error_(std::move(error)), ok_(false) {}
  bool ok() const { return ok_; }
  const ApiError& error() const { return error_; }

 private:
  ApiError error_;
  bool ok_ = true;
};

}  // namespace day0
