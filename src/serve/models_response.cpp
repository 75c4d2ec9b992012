// The model list; every served name is the same model, with the same limits.
#include "serve/models_response.h"

#include "engine/sampling_params.h"

namespace day0 {

nlohmann::ordered_json models_response(const ProtocolConfig& config, std::int64_t created) {
  using ojson = nlohmann::ordered_json;
  ojson limits;
  limits["max_model_len"] = config.max_model_len;
  limits["max_stop_strings"] = config.max_stop_strings;
  limits["max_stop_bytes"] = config.max_stop_bytes;
  limits["max_logprobs"] = config.max_logprobs;
  limits["max_messages"] = config.max_messages;
  limits["max_json_depth"] = config.json.max_depth;
  limits["max_array_elements"] = config.json.max_array_elements;
  limits["temperature"] = sampling_range::kTemperature.describe();
  limits["top_p"] = sampling_range::kTopP.describe();
  limits["min_p"] = sampling_range::kMinP.describe();
  limits["presence_penalty"] = sampling_range::kPresencePenalty.describe();
  limits["frequency_penalty"] = sampling_range::kFrequencyPenalty.describe();
  limits["repetition_penalty"] = sampling_range::kRepetitionPenalty.describe();
  ojson data = ojson::array();
  for (const std::string& name : config.model_names) {
    ojson m;
    m["id"] = name;
    m["object"] = "model";
    m["created"] = created;
    m["owned_by"] = "day0";
    m["max_model_len"] = config.max_model_len;
    m["limits"] = limits;
    data.push_back(std::move(m));
  }
  ojson j;
  j["object"] = "list";
  j["data"] = std::move(data);
  return j;
}

}  // namespace day0
