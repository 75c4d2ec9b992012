// Typed, strict access to the fields of one JSON object of a request: each getter marks the field as
// known and refuses a wrong type or an out-of-range value with an ApiError naming the field's path
// ("stream_options.include_usage"). A JSON null counts as absent, as the OpenAI API treats it.
// finish() then refuses any field that no getter asked for.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>

#include "engine/sampling_params.h"
#include "serve/api_error.h"

namespace day0 {

using ojson = nlohmann::ordered_json;

// "a string", "an array", ... for messages that say what was received.
std::string json_type_name(const ojson& value);

class FieldReader {
 public:
  // `object` must outlive the reader; `path` prefixes field names in errors ("" at the top level).
  static ApiResult<FieldReader> of(const ojson& object, std::string path);

  ApiResult<std::optional<bool>> boolean(const char* key);
  // An integer in [lo, hi]; a float with an integral value is accepted (as pydantic does).
  ApiResult<std::optional<std::int64_t>> integer(const char* key, std::int64_t lo, std::int64_t hi);
  ApiResult<std::optional<double>> number(const char* key, const ParamRange& range);
  ApiResult<std::optional<std::string>> string(const char* key);
  // Any non-null value, unchecked (the caller validates it); nullptr when absent or null.
  const ojson* raw(const char* key);
  // Marks a field as accepted and ignored.
  void ignore(const char* key) { known_.insert(key); }

  // The first field no getter asked for, as an "unrecognized argument" error.
  ApiStatus finish() const;

  std::string name(const char* key) const { return path_.empty() ? key : path_ + "." + key; }
  const std::string& path() const { return path_; }

 private:
  FieldReader(const ojson& object, std::string path) : object_(&object), path_(std::move(path)) {}
  const ojson* find(const char* key);

  const ojson* object_;
  std::string path_;
  std::set<std::string> known_;
};

// The shared wording of type errors: "<param> must be <expected>, got <a string>".
ApiError wrong_type(const std::string& param, const char* expected, const ojson& got);

// Integer reading outside an object (array elements): the same rules as FieldReader::integer.
ApiResult<std::int64_t> integer_value(const ojson& value, const std::string& param, std::int64_t lo, std::int64_t hi);

}  // namespace day0
