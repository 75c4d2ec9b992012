// Chat request parsing: messages and tools (chat_messages.cpp), the shared fields, and what only chat
// has: max_completion_tokens, logprobs as a boolean with top_logprobs, template arguments.
#include "serve/chat_request.h"

#include <limits>

#include "serve/chat_messages.h"
#include "serve/field_reader.h"
#include "serve/json_body.h"
#include "serve/request_fields.h"

namespace day0 {
namespace {

constexpr std::int64_t kInt32Max = std::numeric_limits<std::int32_t>::max();

ApiStatus read_max_tokens(FieldReader& r, ChatRequest& req) {
  D0_ASSIGN_OR_RETURN(const auto completion, r.integer("max_completion_tokens", 1, kInt32Max));
  D0_ASSIGN_OR_RETURN(const auto legacy, r.integer("max_tokens", 1, kInt32Max));
  if (completion) {
    req.max_tokens = static_cast<std::int32_t>(*completion);
  } else if (legacy) {
    req.max_tokens = static_cast<std::int32_t>(*legacy);
    req.max_tokens_param = "max_tokens";
  }
  return ApiStatus();
}

ApiStatus read_template_fields(FieldReader& r, ChatRequest& req) {
  D0_ASSIGN_OR_RETURN(const auto add_generation_prompt, r.boolean("add_generation_prompt"));
  req.add_generation_prompt = add_generation_prompt.value_or(true);
  if (const ojson* kwargs = r.raw("chat_template_kwargs")) {
    if (!kwargs->is_object()) return wrong_type("chat_template_kwargs", "an object", *kwargs);
    for (const auto& [key, value] : kwargs->items()) {
      if (key == "messages" || key == "tools" || key == "add_generation_prompt")
        return invalid_request("chat_template_kwargs." + key,
                               "chat_template_kwargs must not set '" + key + "': it is a request field");
      req.template_kwargs[key] = value;
    }
  }
  D0_ASSIGN_OR_RETURN(const auto effort, r.string("reasoning_effort"));
  if (effort) {
    if (*effort != "low" && *effort != "medium" && *effort != "high")
      return invalid_request("reasoning_effort",
                             "reasoning_effort must be 'low', 'medium' or 'high', got '" + quote_user_text(*effort) + "'");
    req.template_kwargs["reasoning_effort"] = *effort;
  }
  return ApiStatus();
}

}  // namespace

ApiResult<ChatRequest> parse_chat_request(std::string_view body, const ProtocolConfig& config) {
  D0_ASSIGN_OR_RETURN(const ojson json, parse_json_body(body, config.json));
  return chat_request_from_json(json, config);
}

ApiResult<ChatRequest> chat_request_from_json(const ojson& body, const ProtocolConfig& config) {
  D0_ASSIGN_OR_RETURN(FieldReader r, FieldReader::of(body, ""));
  ChatRequest req;
  D0_ASSIGN_OR_RETURN(const CommonFields common, read_common_fields(r, config));
  req.model = common.model;
  req.stream = common.stream;
  req.include_usage = common.include_usage;
  req.user = common.user;
  D0_ASSIGN_OR_RETURN(req.messages, read_chat_messages(r.raw("messages"), config));
  D0_ASSIGN_OR_RETURN(req.tools, read_chat_tools(r.raw("tools")));
  D0_ASSIGN_OR_RETURN(req.tool_choice, read_tool_choice(r.raw("tool_choice")));
  D0_ASSIGN_OR_RETURN(const auto parallel_tool_calls, r.boolean("parallel_tool_calls"));
  (void)parallel_tool_calls;  // at most what the model emits; nothing to enforce
  D0_RETURN_IF_ERROR(read_max_tokens(r, req));
  D0_RETURN_IF_ERROR(read_sampling_fields(r, config, req.sampling));
  D0_ASSIGN_OR_RETURN(const auto logprobs, r.boolean("logprobs"));
  D0_ASSIGN_OR_RETURN(const auto top_logprobs, r.integer("top_logprobs", 0, config.max_logprobs));
  req.sampling.logprobs = logprobs.value_or(false);
  req.sampling.top_logprobs = static_cast<std::int32_t>(top_logprobs.value_or(0));
  if (top_logprobs && !req.sampling.logprobs)
    return invalid_request("top_logprobs", "top_logprobs needs logprobs to be true");
  D0_RETURN_IF_ERROR(read_template_fields(r, req));
  D0_RETURN_IF_ERROR(r.finish());
  D0_RETURN_IF_ERROR(check_sampling(req.sampling, config, req.max_tokens_param, "top_logprobs"));
  return req;
}

ojson chat_template_input(const ChatRequest& request) {
  ojson input = ojson::object();
  input["messages"] = request.messages;
  // Tools stay in the prompt even with tool_choice "none", as vLLM does by default.
  if (!request.tools.is_null()) input["tools"] = request.tools;
  input["add_generation_prompt"] = request.add_generation_prompt;
  for (const auto& [key, value] : request.template_kwargs.items()) input[key] = value;
  return input;
}

ApiStatus resolve_max_tokens(ChatRequest& request, std::int64_t n_prompt_tokens, const ProtocolConfig& config) {
  D0_ASSIGN_OR_RETURN(request.sampling.max_tokens,
                      resolve_max_tokens(request.max_tokens, std::nullopt, n_prompt_tokens, config, "messages",
                                         request.max_tokens_param));
  return ApiStatus();
}

}  // namespace day0
