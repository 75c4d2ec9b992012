// Typed reads from config.json that collect every missing or mistyped key, so one error lists them all.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace day0 {

class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& config, std::string family) : j_(config), family_(std::move(family)) {}

  // Required keys: the first key present among `keys` (aliases) is read; absence is recorded.
  int integer(std::initializer_list<const char*> keys);
  double number(std::initializer_list<const char*> keys);
  // Optional keys with the value transformers uses when the key is absent.
  int integer_or(const char* key, int fallback);
  double number_or(const char* key, double fallback);
  bool boolean_or(const char* key, bool fallback);
  std::optional<std::vector<std::string>> strings(const char* key);
  const nlohmann::json* object(const char* key);

  void require(bool condition, const std::string& what) { if (!condition) invalid_.push_back(what); }
  // Error listing every missing and invalid key, or success.
  Status finish() const;

 private:
  const nlohmann::json* find(std::initializer_list<const char*> keys, std::string* name);
  const nlohmann::json& j_;
  std::string family_;
  std::vector<std::string> missing_;
  std::vector<std::string> invalid_;
};

}  // namespace day0
