// The table of architecture families and config.json loading.
#include "arch/registry.h"

#include <fstream>
#include <sstream>

namespace day0 {

const std::vector<ArchFamily>& arch_families() {
  static const std::vector<ArchFamily> families = {
      {"gpt_oss", &parse_gpt_oss},
  };
  return families;
}

Result<ModelSpec> model_spec_from_config(const nlohmann::json& config) {
  if (!config.is_object()) return make_error("expected a JSON object");
  auto it = config.find("model_type");
  if (it == config.end() || !it->is_string()) return make_error("missing key model_type");
  const std::string type = it->get<std::string>();
  std::string supported;
  for (const auto& f : arch_families()) {
    if (f.model_type == type) return f.parse(config);
    supported += (supported.empty() ? "" : ", ") + std::string(f.model_type);
  }
  return make_error("unknown model_type \"" + type + "\"; supported: " + supported);
}

Result<ModelSpec> model_spec_from_dir(const std::string& dir) {
  const std::string path = dir + "/config.json";
  std::ifstream in(path);
  if (!in) return make_error(path + ": cannot open");
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json config = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded()) return make_error(path + ": not valid JSON");
  auto spec = model_spec_from_config(config);
  if (!spec.ok()) return make_error(path + ": " + spec.error().message);
  return spec;
}

}  // namespace day0
