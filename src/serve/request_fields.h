// The request fields /v1/completions and /v1/chat/completions share: model, stream and stream_options,
// n, user, response_format, and the sampling parameters (OpenAI's plus vLLM's top_k, min_p,
// repetition_penalty, ignore_eos, stop_token_ids).
#pragma once

#include <optional>
#include <string>

#include "engine/sampling_params.h"
#include "serve/field_reader.h"
#include "serve/protocol_config.h"

namespace day0 {

struct CommonFields {
  std::string model;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  std::string user;
};

ApiResult<CommonFields> read_common_fields(FieldReader& r, const ProtocolConfig& config);

// Everything in SamplingParams except max_tokens and logprobs, whose names differ between the endpoints.
ApiStatus read_sampling_fields(FieldReader& r, const ProtocolConfig& config, SamplingParams& params);

// The final cross-field and limit checks of SamplingParams, with the engine's parameter names mapped
// to this endpoint's (`max_tokens_name`, and `top_logprobs_name` for the number of top logprobs).
ApiStatus check_sampling(const SamplingParams& params, const ProtocolConfig& config, const std::string& max_tokens_name,
                         const std::string& top_logprobs_name);

}  // namespace day0
