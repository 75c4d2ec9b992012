// Error and Result<T>: the one error type of the code base.
// Untrusted input never reaches an assert; it returns an Error that says what, where and what was expected.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace day0 {

struct Error {
  std::string message;
};

inline Error make_error(std::string message) { return Error{std::move(message)}; }

// Holds either a value or an Error. Result<void> is spelled Status.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}
  Result(Error error) : v_(std::move(error)) {}

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), ok_(false) {}
  static Status success() { return Status(); }

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return error_; }

 private:
  Error error_;
  bool ok_ = true;
};

}  // namespace day0

#define D0_CONCAT_INNER(a, b) a##b
#define D0_CONCAT(a, b) D0_CONCAT_INNER(a, b)

// Returns the error of a Status or Result from the enclosing function.
#define D0_RETURN_IF_ERROR(expr)                          \
  do {                                                    \
    auto&& d0_status_ = (expr);                           \
    if (!d0_status_.ok()) return d0_status_.error();      \
  } while (0)

// Declares `lhs` from a Result's value, or returns its error.
#define D0_ASSIGN_OR_RETURN(lhs, expr) D0_ASSIGN_OR_RETURN_IMPL(D0_CONCAT(d0_result_, __LINE__), lhs, expr)
#define D0_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.error();             \
  lhs = std::move(tmp).value()
