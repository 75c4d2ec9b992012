// Chat messages and tools: the shapes OpenAI documents, checked field by field.
#include "serve/chat_messages.h"

#include "serve/field_reader.h"

namespace day0 {
namespace {

std::string at(const std::string& path, std::size_t i) { return path + "[" + std::to_string(i) + "]"; }

// A string, or text parts (assistant messages may also hold refusal parts) joined into one string.
ApiResult<std::string> read_content(const ojson& content, const std::string& param, bool assistant) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) return wrong_type(param, "a string or an array of content parts", content);
  if (content.empty()) return invalid_request(param, param + " must not be an empty array");
  std::string text;
  for (std::size_t i = 0; i < content.size(); ++i) {
    const std::string part_param = at(param, i);
    D0_ASSIGN_OR_RETURN(FieldReader part, FieldReader::of(content[i], part_param));
    D0_ASSIGN_OR_RETURN(const std::optional<std::string> type_field, part.string("type"));
    if (!type_field) return invalid_request(part.name("type"), part.name("type") + " is required");
    const std::string type = type_field.value();
    const char* field = type == "text" ? "text" : (assistant && type == "refusal") ? "refusal" : nullptr;
    if (field == nullptr)
      return invalid_request(part.name("type"), "content part type '" + quote_user_text(type) +
                                                    "' is not supported: this server takes text only");
    D0_ASSIGN_OR_RETURN(const auto value, part.string(field));
    if (!value) return invalid_request(part.name(field), part.name(field) + " is required");
    D0_RETURN_IF_ERROR(part.finish());
    if (i > 0) text += "\n";
    text += *value;
  }
  return text;
}

ApiStatus check_tool_calls(const ojson& calls, const std::string& param) {
  if (!calls.is_array()) return wrong_type(param, "an array", calls);
  for (std::size_t i = 0; i < calls.size(); ++i) {
    D0_ASSIGN_OR_RETURN(FieldReader call, FieldReader::of(calls[i], at(param, i)));
    D0_ASSIGN_OR_RETURN(const auto id, call.string("id"));
    D0_ASSIGN_OR_RETURN(const auto type, call.string("type"));
    if (type.has_value() && type.value() != "function")
      return invalid_request(call.name("type"), call.name("type") + " must be 'function'");
    const ojson* function = call.raw("function");
    if (function == nullptr) return invalid_request(call.name("function"), call.name("function") + " is required");
    D0_ASSIGN_OR_RETURN(FieldReader f, FieldReader::of(*function, call.name("function")));
    D0_ASSIGN_OR_RETURN(const auto name, f.string("name"));
    if (!name) return invalid_request(f.name("name"), f.name("name") + " is required");
    D0_ASSIGN_OR_RETURN(const auto arguments, f.string("arguments"));
    D0_RETURN_IF_ERROR(f.finish());
    D0_RETURN_IF_ERROR(call.finish());
    (void)id;
    (void)arguments;
  }
  return ApiStatus();
}

ApiResult<ojson> read_message(const ojson& message, const std::string& param) {
  D0_ASSIGN_OR_RETURN(FieldReader r, FieldReader::of(message, param));
  D0_ASSIGN_OR_RETURN(const auto role, r.string("role"));
  if (!role) return invalid_request(r.name("role"), r.name("role") + " is required");
  const bool assistant = *role == "assistant";
  if (!assistant && *role != "system" && *role != "developer" && *role != "user" && *role != "tool")
    return invalid_request(r.name("role"), r.name("role") + " must be one of system, developer, user, assistant, "
                                           "tool; got '" + quote_user_text(*role) + "'");
  ojson out = ojson::object();
  out["role"] = *role;
  const ojson* content = r.raw("content");
  const ojson* tool_calls = assistant ? r.raw("tool_calls") : nullptr;
  if (content != nullptr) {
    D0_ASSIGN_OR_RETURN(out["content"], read_content(*content, r.name("content"), assistant));
  } else if (tool_calls == nullptr) {
    return invalid_request(r.name("content"), r.name("content") + (assistant ? " is required without tool_calls"
                                                                              : " is required and must not be null"));
  } else {
    out["content"] = nullptr;
  }
  D0_ASSIGN_OR_RETURN(const auto name, r.string("name"));
  if (name) out["name"] = *name;
  if (assistant) {
    if (tool_calls != nullptr) {
      D0_RETURN_IF_ERROR(check_tool_calls(*tool_calls, r.name("tool_calls")));
      out["tool_calls"] = *tool_calls;
    }
    // Earlier reasoning, for templates that render it: vLLM's field and the one HF templates read.
    for (const char* key : {"reasoning_content", "thinking", "refusal"}) {
      D0_ASSIGN_OR_RETURN(const auto text, r.string(key));
      if (text) out[key] = *text;
    }
  }
  if (*role == "tool") {
    D0_ASSIGN_OR_RETURN(const auto id, r.string("tool_call_id"));
    if (!id) return invalid_request(r.name("tool_call_id"), r.name("tool_call_id") + " is required for tool messages");
    out["tool_call_id"] = *id;
  }
  D0_RETURN_IF_ERROR(r.finish());
  return out;
}

}  // namespace

ApiResult<ojson> read_chat_messages(const ojson* messages, const ProtocolConfig& config) {
  if (messages == nullptr) return invalid_request("messages", "messages is required");
  if (!messages->is_array()) return wrong_type("messages", "an array of messages", *messages);
  if (messages->empty()) return invalid_request("messages", "messages must not be empty");
  if (messages->size() > static_cast<std::size_t>(config.max_messages))
    return invalid_request("messages", "messages must hold at most " + std::to_string(config.max_messages) +
                                           " messages, got " + std::to_string(messages->size()));
  ojson out = ojson::array();
  for (std::size_t i = 0; i < messages->size(); ++i) {
    D0_ASSIGN_OR_RETURN(ojson m, read_message((*messages)[i], at("messages", i)));
    out.push_back(std::move(m));
  }
  return out;
}

ApiResult<ojson> read_chat_tools(const ojson* tools) {
  if (tools == nullptr) return ojson(nullptr);
  if (!tools->is_array()) return wrong_type("tools", "an array of tools", *tools);
  for (std::size_t i = 0; i < tools->size(); ++i) {
    D0_ASSIGN_OR_RETURN(FieldReader t, FieldReader::of((*tools)[i], at("tools", i)));
    D0_ASSIGN_OR_RETURN(const auto type, t.string("type"));
    if (!type || *type != "function") return invalid_request(t.name("type"), t.name("type") + " must be 'function'");
    const ojson* function = t.raw("function");
    if (function == nullptr) return invalid_request(t.name("function"), t.name("function") + " is required");
    D0_ASSIGN_OR_RETURN(FieldReader f, FieldReader::of(*function, t.name("function")));
    D0_ASSIGN_OR_RETURN(const auto name, f.string("name"));
    if (!name || name->empty()) return invalid_request(f.name("name"), f.name("name") + " must be a non-empty string");
    D0_ASSIGN_OR_RETURN(const auto description, f.string("description"));
    D0_ASSIGN_OR_RETURN(const auto strict, f.boolean("strict"));
    if (const ojson* parameters = f.raw("parameters"); parameters != nullptr && !parameters->is_object())
      return wrong_type(f.name("parameters"), "a JSON Schema object", *parameters);
    D0_RETURN_IF_ERROR(f.finish());
    D0_RETURN_IF_ERROR(t.finish());
    (void)description;
    (void)strict;
  }
  return *tools;
}

ApiResult<std::string> read_tool_choice(const ojson* choice) {
  if (choice == nullptr) return std::string();
  if (choice->is_string() && (*choice == "auto" || *choice == "none")) return choice->get<std::string>();
  if (choice->is_string() && *choice == "required")
    return invalid_request("tool_choice", "tool_choice 'required' is not supported: use 'auto' or 'none'");
  if (choice->is_object())
    return invalid_request("tool_choice", "a named tool_choice is not supported: use 'auto' or 'none'");
  return invalid_request("tool_choice", "tool_choice must be 'auto' or 'none'");
}

}  // namespace day0
