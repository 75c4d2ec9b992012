// Architecture families: model_type -> parser of config.json into a ModelSpec.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "arch/model_spec.h"
#include "core/status.h"

namespace day0 {

using ArchParser = Result<ModelSpec> (*)(const nlohmann::json& config);

struct ArchFamily {
  std::string_view model_type;
  ArchParser parse;
};

const std::vector<ArchFamily>& arch_families();

// Reads config.json text into a ModelSpec; an unknown model_type lists the supported ones.
Result<ModelSpec> model_spec_from_config(const nlohmann::json& config);
Result<ModelSpec> model_spec_from_dir(const std::string& dir);

Result<ModelSpec> parse_gpt_oss(const nlohmann::json& config);

}  // namespace day0
