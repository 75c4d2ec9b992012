// Checked field access for tokenizer.json components: each error names the file, the component and
// the field, and what was expected.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace day0::tok {

using nlohmann::json;

inline Error field_error(const std::string& where, const char* key, const char* expected) {
  return make_error(where + ": field \"" + key + "\" must be " + expected);
}

// The component's "type" string.
inline Result<std::string> type_of(const json& j, const std::string& where) {
  if (!j.is_object()) return make_error(where + " must be an object or null");
  const auto it = j.find("type");
  if (it == j.end() || !it->is_string()) return make_error(where + " has no \"type\" string");
  return it->get<std::string>();
}

inline Result<bool> get_bool(const json& j, const char* key, bool fallback, const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) return field_error(where, key, "a boolean");
  return it->get<bool>();
}

inline Result<std::string> get_string(const json& j, const char* key, const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return field_error(where, key, "a string");
  return it->get<std::string>();
}

inline Result<std::uint64_t> get_uint(const json& j, const char* key, std::uint64_t fallback,
                                      const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number_unsigned()) return field_error(where, key, "a non-negative integer");
  return it->get<std::uint64_t>();
}

// A string field holding exactly one character (Metaspace's replacement, Strip's content).
inline Result<char32_t> get_char(const json& j, const char* key, const std::string& where) {
  const Result<std::string> r = get_string(j, key, where);
  if (!r.ok()) return r.error();
  const std::string_view s = r.value();
  std::size_t len = 0;
  const char32_t c = s.empty() ? 0 : decode_at(s, 0, &len);
  if (c == 0 || len != s.size()) return field_error(where, key, "one character");
  return c;
}

// {"String": "..."} or {"Regex": "..."}, as Split and Replace take.
inline Result<Regex> get_pattern(const json& j, const std::string& where) {
  const auto it = j.find("pattern");
  if (it == j.end() || !it->is_object() || it->size() != 1) {
    return field_error(where, "pattern", "{\"String\": ...} or {\"Regex\": ...}");
  }
  const std::string kind = it->begin().key();
  const json& value = it->begin().value();
  if (!value.is_string()) return field_error(where, "pattern", "{\"String\": ...} or {\"Regex\": ...}");
  Result<Regex> re = kind == "String"  ? Regex::literal(value.get<std::string>())
                     : kind == "Regex" ? Regex::compile(value.get<std::string>())
                                       : Result<Regex>(field_error(where, "pattern", "String or Regex"));
  if (!re.ok()) return make_error(where + ": " + re.error().message);
  return re;
}

}  // namespace day0::tok
