// FieldReader: the type and range rules shared by every request field.
#include "serve/field_reader.h"

#include <cmath>

namespace day0 {
namespace {

std::string range_text(std::int64_t lo, std::int64_t hi) {
  std::string text = "[";  // appended, not "[" + ...: GCC 12 warns falsely (-Wrestrict) on the latter
  text.append(std::to_string(lo)).append(", ").append(std::to_string(hi)).append("]");
  return text;
}

}  // namespace

std::string json_type_name(const ojson& v) {
  switch (v.type()) {
    case ojson::value_t::null: return "null";
    case ojson::value_t::object: return "an object";
    case ojson::value_t::array: return "an array";
    case ojson::value_t::string: return "a string";
    case ojson::value_t::boolean: return "a boolean";
    case ojson::value_t::number_integer:
    case ojson::value_t::number_unsigned: return "an integer";
    case ojson::value_t::number_float: return "a number";
    default: return "an unsupported value";
  }
}

ApiError wrong_type(const std::string& param, const char* expected, const ojson& got) {
  return invalid_request(param, param + " must be " + expected + ", got " + json_type_name(got));
}

ApiResult<std::int64_t> integer_value(const ojson& v, const std::string& param, std::int64_t lo, std::int64_t hi) {
  const std::string out_of_range = param + " must be an integer in " + range_text(lo, hi) + ", got ";
  if (v.is_number_integer() && !v.is_number_unsigned()) {
    const std::int64_t x = v.get<std::int64_t>();
    if (x < lo || x > hi) return invalid_request(param, out_of_range + std::to_string(x));
    return x;
  }
  if (v.is_number_unsigned()) {
    const std::uint64_t x = v.get<std::uint64_t>();
    if (hi < 0 || x > static_cast<std::uint64_t>(hi) || (lo > 0 && x < static_cast<std::uint64_t>(lo)))
      return invalid_request(param, out_of_range + std::to_string(x));
    return static_cast<std::int64_t>(x);
  }
  if (v.is_number_float()) {
    const double x = v.get<double>();
    // Integral floats (10.0, 1e3) are integers, and 2^64 arrives as a float too.
    if (std::floor(x) != x) return invalid_request(param, param + " must be an integer, got " + v.dump());
    if (!(x >= -0x1p63 && x < 0x1p63)) return invalid_request(param, out_of_range + v.dump());
    const auto i = static_cast<std::int64_t>(x);
    if (i < lo || i > hi) return invalid_request(param, out_of_range + v.dump());
    return i;
  }
  return wrong_type(param, "an integer", v);
}

ApiResult<FieldReader> FieldReader::of(const ojson& object, std::string path) {
  if (!object.is_object()) {
    if (path.empty()) return invalid_request("", "the request body must be a JSON object, got " + json_type_name(object));
    return wrong_type(path, "a JSON object", object);
  }
  return FieldReader(object, std::move(path));
}

const ojson* FieldReader::find(const char* key) {
  known_.insert(key);
  const auto it = object_->find(key);
  if (it == object_->end() || it->is_null()) return nullptr;
  return &*it;
}

const ojson* FieldReader::raw(const char* key) { return find(key); }

ApiResult<std::optional<bool>> FieldReader::boolean(const char* key) {
  const ojson* v = find(key);
  if (v == nullptr) return std::optional<bool>();
  if (!v->is_boolean()) return wrong_type(name(key), "a boolean", *v);
  return std::optional<bool>(v->get<bool>());
}

ApiResult<std::optional<std::int64_t>> FieldReader::integer(const char* key, std::int64_t lo, std::int64_t hi) {
  const ojson* v = find(key);
  if (v == nullptr) return std::optional<std::int64_t>();
  auto x = integer_value(*v, name(key), lo, hi);
  if (!x.ok()) return x.error();
  return std::optional<std::int64_t>(*x);
}

ApiResult<std::optional<double>> FieldReader::number(const char* key, const ParamRange& range) {
  const ojson* v = find(key);
  if (v == nullptr) return std::optional<double>();
  if (!v->is_number()) return wrong_type(name(key), "a number", *v);
  const double x = v->get<double>();
  if (!range.contains(x)) return invalid_request(name(key), range_message(name(key), range, x));
  return std::optional<double>(x);
}

ApiResult<std::optional<std::string>> FieldReader::string(const char* key) {
  const ojson* v = find(key);
  if (v == nullptr) return std::optional<std::string>();
  if (!v->is_string()) return wrong_type(name(key), "a string", *v);
  return std::optional<std::string>(v->get<std::string>());
}

ApiStatus FieldReader::finish() const {
  for (const auto& [key, value] : object_->items()) {
    if (known_.count(key)) continue;
    const std::string param = path_.empty() ? quote_user_text(key) : path_ + "." + quote_user_text(key);
    return invalid_request(param, "Unrecognized request argument supplied: " + param);
  }
  return ApiStatus();
}

}  // namespace day0
