// API key checks.
#include "serve/api_key.h"

#include <cctype>

namespace day0 {

bool constant_time_equal(std::string_view a, std::string_view b) {
  // Every byte of the longer string is visited, so a wrong length costs as long as a wrong last byte.
  const std::size_t n = a.size() > b.size() ? a.size() : b.size();
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

bool api_key_accepted(std::string_view authorization, std::string_view x_api_key, std::string_view key) {
  if (key.empty()) return true;
  bool ok = false;
  constexpr std::string_view kScheme = "bearer ";
  if (authorization.size() > kScheme.size()) {
    bool scheme = true;
    for (std::size_t i = 0; i < kScheme.size(); ++i)
      scheme &= std::tolower(static_cast<unsigned char>(authorization[i])) == kScheme[i];
    if (scheme) ok |= constant_time_equal(authorization.substr(kScheme.size()), key);
  }
  if (!x_api_key.empty()) ok |= constant_time_equal(x_api_key, key);
  return ok;
}

}  // namespace day0
