// ConfigReader: typed, aggregated validation of config.json keys.
#include "arch/config_reader.h"

#include <cmath>
#include <limits>

namespace day0 {

const nlohmann::json* ConfigReader::find(std::initializer_list<const char*> keys, std::string* name) {
  std::string all;
  for (const char* k : keys) {
    if (!all.empty()) all += "|";
    all += k;
    auto it = j_.find(k);
    if (it != j_.end() && !it->is_null()) {
      *name = k;
      return &*it;
    }
  }
  *name = all;
  return nullptr;
}

int ConfigReader::integer(std::initializer_list<const char*> keys) {
  std::string name;
  const auto* v = find(keys, &name);
  if (!v) {
    missing_.push_back(name);
    return 0;
  }
  if (!v->is_number_integer() || v->get<long long>() < 0 ||
      v->get<long long>() > std::numeric_limits<int>::max()) {
    invalid_.push_back(name + " must be a non-negative integer (got " + v->dump() + ")");
    return 0;
  }
  return v->get<int>();
}

double ConfigReader::number(std::initializer_list<const char*> keys) {
  std::string name;
  const auto* v = find(keys, &name);
  if (!v) {
    missing_.push_back(name);
    return 0;
  }
  if (!v->is_number() || !std::isfinite(v->get<double>())) {
    invalid_.push_back(name + " must be a finite number (got " + v->dump() + ")");
    return 0;
  }
  return v->get<double>();
}

int ConfigReader::integer_or(const char* key, int fallback) {
  auto it = j_.find(key);
  if (it == j_.end() || it->is_null()) return fallback;
  return integer({key});
}

double ConfigReader::number_or(const char* key, double fallback) {
  auto it = j_.find(key);
  if (it == j_.end() || it->is_null()) return fallback;
  return number({key});
}

bool ConfigReader::boolean_or(const char* key, bool fallback) {
  auto it = j_.find(key);
  if (it == j_.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) {
    invalid_.push_back(std::string(key) + " must be true or false (got " + it->dump() + ")");
    return fallback;
  }
  return it->get<bool>();
}

std::optional<std::vector<std::string>> ConfigReader::strings(const char* key) {
  auto it = j_.find(key);
  if (it == j_.end() || it->is_null()) return std::nullopt;
  std::vector<std::string> out;
  if (it->is_array()) {
    for (const auto& e : *it) {
      if (!e.is_string()) break;
      out.push_back(e.get<std::string>());
    }
    if (out.size() == it->size()) return out;
  }
  invalid_.push_back(std::string(key) + " must be a list of strings");
  return std::nullopt;
}

const nlohmann::json* ConfigReader::object(const char* key) {
  auto it = j_.find(key);
  if (it == j_.end() || it->is_null()) return nullptr;
  if (!it->is_object()) {
    invalid_.push_back(std::string(key) + " must be an object");
    return nullptr;
  }
  return &*it;
}

Status ConfigReader::finish() const {
  if (missing_.empty() && invalid_.empty()) return Status::success();
  std::string msg = family_ + ":";
  if (!missing_.empty()) {
    msg += " missing key(s):";
    for (size_t i = 0; i < missing_.size(); ++i) msg += (i ? ", " : " ") + missing_[i];
    if (!invalid_.empty()) msg += ";";
  }
  if (!invalid_.empty()) {
    msg += " invalid:";
    for (size_t i = 0; i < invalid_.size(); ++i) msg += (i ? "; " : " ") + invalid_[i];
  }
  return make_error(msg);
}

}  // namespace day0
