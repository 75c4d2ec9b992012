// Completion request parsing: the prompt's accepted shapes and the fields only this endpoint has.
#include "serve/completion_request.h"

#include <limits>

#include "serve/field_reader.h"
#include "serve/json_body.h"
#include "serve/request_fields.h"

namespace day0 {
namespace {

constexpr std::int64_t kInt32Max = std::numeric_limits<std::int32_t>::max();

ApiResult<std::vector<std::int32_t>> read_token_ids(const ojson& ids, const std::string& param,
                                                     const ProtocolConfig& config) {
  const std::int64_t hi = config.vocab_size > 0 ? config.vocab_size - 1 : kInt32Max;
  std::vector<std::int32_t> out;
  out.reserve(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    D0_ASSIGN_OR_RETURN(const std::int64_t id, integer_value(ids[i], param + "[" + std::to_string(i) + "]", 0, hi));
    out.push_back(static_cast<std::int32_t>(id));
  }
  return out;
}

// "text", ["text"], [1, 2, 3] or [[1, 2, 3]]: one prompt. Several prompts would need several choices.
ApiResult<std::variant<std::string, std::vector<std::int32_t>>> read_prompt(FieldReader& r, const ProtocolConfig& config) {
  using Prompt = std::variant<std::string, std::vector<std::int32_t>>;
  const ojson* prompt = r.raw("prompt");
  if (prompt == nullptr) return invalid_request("prompt", "prompt is required");
  if (prompt->is_string()) {
    if (prompt->get_ref<const std::string&>().empty()) return invalid_request("prompt", "prompt must not be empty");
    return Prompt(prompt->get<std::string>());
  }
  if (!prompt->is_array()) return wrong_type("prompt", "a string or an array of token ids", *prompt);
  if (prompt->empty()) return invalid_request("prompt", "prompt must not be empty");
  const ojson& first = prompt->front();
  if (first.is_string() || first.is_array()) {
    if (prompt->size() > 1)
      return invalid_request("prompt", "prompt holds " + std::to_string(prompt->size()) +
                                           " prompts: this server takes one prompt per request");
    if (first.is_string()) {
      if (first.get_ref<const std::string&>().empty()) return invalid_request("prompt[0]", "prompt must not be empty");
      return Prompt(first.get<std::string>());
    }
    if (first.empty()) return invalid_request("prompt[0]", "prompt must not be empty");
    D0_ASSIGN_OR_RETURN(auto ids, read_token_ids(first, "prompt[0]", config));
    return Prompt(std::move(ids));
  }
  D0_ASSIGN_OR_RETURN(auto ids, read_token_ids(*prompt, "prompt", config));
  return Prompt(std::move(ids));
}

}  // namespace

ApiResult<CompletionRequest> parse_completion_request(std::string_view body, const ProtocolConfig& config) {
  D0_ASSIGN_OR_RETURN(const ojson json, parse_json_body(body, config.json));
  return completion_request_from_json(json, config);
}

ApiResult<CompletionRequest> completion_request_from_json(const ojson& body, const ProtocolConfig& config) {
  D0_ASSIGN_OR_RETURN(FieldReader r, FieldReader::of(body, ""));
  CompletionRequest req;
  D0_ASSIGN_OR_RETURN(const CommonFields common, read_common_fields(r, config));
  req.model = common.model;
  req.stream = common.stream;
  req.include_usage = common.include_usage;
  req.user = common.user;
  D0_ASSIGN_OR_RETURN(req.prompt, read_prompt(r, config));

  // The context bound needs the prompt's length: resolve_max_tokens checks it after tokenization.
  D0_ASSIGN_OR_RETURN(const auto max_tokens, r.integer("max_tokens", 1, kInt32Max));
  if (max_tokens) req.max_tokens = static_cast<std::int32_t>(*max_tokens);
  D0_RETURN_IF_ERROR(read_sampling_fields(r, config, req.sampling));
  D0_ASSIGN_OR_RETURN(const auto logprobs, r.integer("logprobs", 0, config.max_logprobs));
  if (logprobs) {
    req.sampling.logprobs = true;
    req.sampling.top_logprobs = static_cast<std::int32_t>(*logprobs);
  }

  // OpenAI fields this server does not implement: refused by name rather than silently ignored.
  D0_ASSIGN_OR_RETURN(const auto echo, r.boolean("echo"));
  if (echo.value_or(false)) return invalid_request("echo", "echo is not supported");
  if (const ojson* suffix = r.raw("suffix"))
    return invalid_request("suffix", suffix->is_string() ? "suffix is not supported" : "suffix must be a string");
  D0_ASSIGN_OR_RETURN(const auto best_of, r.integer("best_of", std::numeric_limits<std::int64_t>::min(),
                                                     std::numeric_limits<std::int64_t>::max()));
  if (best_of && *best_of != 1) return invalid_request("best_of", "best_of must be 1, got " + std::to_string(*best_of));
  D0_RETURN_IF_ERROR(r.finish());
  D0_RETURN_IF_ERROR(check_sampling(req.sampling, config, "max_tokens", "logprobs"));
  return req;
}

ApiStatus resolve_max_tokens(CompletionRequest& request, std::int64_t n_prompt_tokens, const ProtocolConfig& config) {
  D0_ASSIGN_OR_RETURN(request.sampling.max_tokens,
                      resolve_max_tokens(request.max_tokens, kCompletionDefaultMaxTokens, n_prompt_tokens, config,
                                         "prompt", "max_tokens"));
  return ApiStatus();
}

}  // namespace day0
