// Shared request fields. Ranges come from engine/sampling_params.h so that the server and the engine
// can never disagree on what is valid.
#include "serve/request_fields.h"

#include <charconv>
#include <limits>

namespace day0 {
namespace {

constexpr std::int64_t kInt32Max = std::numeric_limits<std::int32_t>::max();

ApiStatus read_stop(FieldReader& r, const ProtocolConfig& config, SamplingParams& p) {
  const ojson* stop = r.raw("stop");
  if (stop == nullptr) return ApiStatus();
  if (stop->is_string()) {
    p.stop = {stop->get<std::string>()};
    return ApiStatus();
  }
  if (!stop->is_array()) return wrong_type("stop", "a string or an array of strings", *stop);
  if (stop->size() > static_cast<std::size_t>(config.max_stop_strings))
    return invalid_request("stop", "stop must hold at most " + std::to_string(config.max_stop_strings) +
                                       " strings, got " + std::to_string(stop->size()));
  for (std::size_t i = 0; i < stop->size(); ++i) {
    const ojson& s = (*stop)[i];
    if (!s.is_string()) return wrong_type("stop[" + std::to_string(i) + "]", "a string", s);
    p.stop.push_back(s.get<std::string>());
  }
  return ApiStatus();
}

ApiStatus read_stop_token_ids(FieldReader& r, const ProtocolConfig& config, SamplingParams& p) {
  const ojson* ids = r.raw("stop_token_ids");
  if (ids == nullptr) return ApiStatus();
  if (!ids->is_array()) return wrong_type("stop_token_ids", "an array of token ids", *ids);
  const std::int64_t hi = config.vocab_size > 0 ? config.vocab_size - 1 : kInt32Max;
  for (std::size_t i = 0; i < ids->size(); ++i) {
    D0_ASSIGN_OR_RETURN(const std::int64_t id, integer_value((*ids)[i], "stop_token_ids[" + std::to_string(i) + "]", 0, hi));
    p.stop_token_ids.push_back(static_cast<std::int32_t>(id));
  }
  return ApiStatus();
}

// {"<token id>": bias}: OpenAI's shape, keys are decimal token ids.
ApiStatus read_logit_bias(FieldReader& r, const ProtocolConfig& config, SamplingParams& p) {
  const ojson* bias = r.raw("logit_bias");
  if (bias == nullptr) return ApiStatus();
  if (!bias->is_object()) return wrong_type("logit_bias", "an object mapping token ids to biases", *bias);
  const std::int64_t hi = config.vocab_size > 0 ? config.vocab_size - 1 : kInt32Max;
  for (const auto& [key, value] : bias->items()) {
    const std::string param = "logit_bias." + quote_user_text(key);
    std::int64_t id = -1;
    const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (ec != std::errc() || end != key.data() + key.size() || id < 0 || id > hi)
      return invalid_request(param, "logit_bias keys must be token ids in [0, " + std::to_string(hi) + "], got '" +
                                        quote_user_text(key) + "'");
    if (!value.is_number()) return wrong_type(param, "a number", value);
    const double b = value.get<double>();
    if (!sampling_range::kLogitBias.contains(b))
      return invalid_request(param, range_message(param, sampling_range::kLogitBias, b));
    p.logit_bias.emplace_back(static_cast<std::int32_t>(id), b);
  }
  return ApiStatus();
}

ApiStatus read_response_format(FieldReader& r) {
  const ojson* format = r.raw("response_format");
  if (format == nullptr) return ApiStatus();
  if (!format->is_object()) return wrong_type("response_format", "an object", *format);
  const auto type = format->find("type");
  if (type == format->end() || !type->is_string())
    return invalid_request("response_format.type", "response_format.type must be a string");
  if (*type != "text")
    return invalid_request("response_format", "response_format type '" + quote_user_text(type->get<std::string>()) +
                                                  "' is not supported: only 'text' (structured output is not available)");
  for (const auto& [key, value] : format->items())
    if (key != "type")
      return invalid_request("response_format." + quote_user_text(key),
                             "Unrecognized request argument supplied: response_format." + quote_user_text(key));
  return ApiStatus();
}

}  // namespace

ApiResult<CommonFields> read_common_fields(FieldReader& r, const ProtocolConfig& config) {
  CommonFields c;
  D0_ASSIGN_OR_RETURN(const auto model, r.string("model"));
  D0_ASSIGN_OR_RETURN(c.model, resolve_model(model, config));
  D0_ASSIGN_OR_RETURN(const auto stream, r.boolean("stream"));
  c.stream = stream.value_or(false);
  if (const ojson* options = r.raw("stream_options")) {
    if (!c.stream)
      return invalid_request("stream_options", "stream_options is only allowed when stream is true");
    D0_ASSIGN_OR_RETURN(FieldReader o, FieldReader::of(*options, "stream_options"));
    D0_ASSIGN_OR_RETURN(const auto include_usage, o.boolean("include_usage"));
    c.include_usage = include_usage.value_or(false);
    D0_RETURN_IF_ERROR(o.finish());
  }
  D0_ASSIGN_OR_RETURN(const auto n, r.integer("n", std::numeric_limits<std::int64_t>::min(),
                                               std::numeric_limits<std::int64_t>::max()));
  if (n && *n != 1)
    return invalid_request("n", "n must be 1: this server returns one choice per request, got " + std::to_string(*n));
  D0_ASSIGN_OR_RETURN(const auto user, r.string("user"));
  c.user = user.value_or("");
  D0_RETURN_IF_ERROR(read_response_format(r));
  return c;
}

ApiStatus read_sampling_fields(FieldReader& r, const ProtocolConfig& config, SamplingParams& p) {
  using namespace sampling_range;
  D0_ASSIGN_OR_RETURN(const auto temperature, r.number("temperature", kTemperature));
  D0_ASSIGN_OR_RETURN(const auto top_p, r.number("top_p", kTopP));
  D0_ASSIGN_OR_RETURN(const auto top_k, r.integer("top_k", -1, kInt32Max));
  D0_ASSIGN_OR_RETURN(const auto min_p, r.number("min_p", kMinP));
  D0_ASSIGN_OR_RETURN(const auto presence, r.number("presence_penalty", kPresencePenalty));
  D0_ASSIGN_OR_RETURN(const auto frequency, r.number("frequency_penalty", kFrequencyPenalty));
  D0_ASSIGN_OR_RETURN(const auto repetition, r.number("repetition_penalty", kRepetitionPenalty));
  D0_ASSIGN_OR_RETURN(const auto seed, r.integer("seed", 0, static_cast<std::int64_t>(kMaxSeed)));
  D0_ASSIGN_OR_RETURN(const auto ignore_eos, r.boolean("ignore_eos"));
  p.temperature = temperature.value_or(p.temperature);
  p.top_p = top_p.value_or(p.top_p);
  p.top_k = static_cast<std::int32_t>(top_k.value_or(p.top_k));
  p.min_p = min_p.value_or(p.min_p);
  p.presence_penalty = presence.value_or(p.presence_penalty);
  p.frequency_penalty = frequency.value_or(p.frequency_penalty);
  p.repetition_penalty = repetition.value_or(p.repetition_penalty);
  if (seed) p.seed = static_cast<std::uint64_t>(*seed);
  p.ignore_eos = ignore_eos.value_or(false);
  D0_RETURN_IF_ERROR(read_stop(r, config, p));
  D0_RETURN_IF_ERROR(read_stop_token_ids(r, config, p));
  D0_RETURN_IF_ERROR(read_logit_bias(r, config, p));
  return ApiStatus();
}

ApiStatus check_sampling(const SamplingParams& params, const ProtocolConfig& config, const std::string& max_tokens_name,
                         const std::string& top_logprobs_name) {
  SamplingLimits limits = config.sampling_limits();
  limits.max_tokens = 0;  // checked against the prompt by resolve_max_tokens, once it is tokenized
  const auto bad = find_invalid_param(params, limits);
  if (!bad) return ApiStatus();
  std::string param = bad->param, message = bad->message;
  const std::string& renamed = param == "max_tokens" ? max_tokens_name : param == "top_logprobs" ? top_logprobs_name : param;
  if (renamed != param && message.rfind(param, 0) == 0) message = renamed + message.substr(param.size());
  return invalid_request(renamed, message);
}

}  // namespace day0
