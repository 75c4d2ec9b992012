// Chat response objects, field for field as in the OpenAI API reference.
#include "serve/chat_response.h"

namespace day0 {
namespace {

using ojson = nlohmann::ordered_json;

ojson head(const ResponseMeta& meta, const char* object) {
  ojson j;
  j["id"] = meta.id;
  j["object"] = object;
  j["created"] = meta.created;
  j["model"] = meta.model;
  return j;
}

ojson token_json(const TokenText& t) {
  ojson j;
  j["token"] = token_string(t.bytes);
  j["logprob"] = logprob_json(t.logprob);
  ojson bytes = ojson::array();
  for (const char c : t.bytes) bytes.push_back(static_cast<int>(static_cast<unsigned char>(c)));
  j["bytes"] = std::move(bytes);
  return j;
}

}  // namespace

ojson chat_logprobs_json(std::span<const LogprobEntry> entries) {
  ojson content = ojson::array();
  for (const LogprobEntry& e : entries) {
    ojson entry = token_json(e.token);
    ojson top = ojson::array();
    for (const TokenText& t : e.top) top.push_back(token_json(t));
    entry["top_logprobs"] = std::move(top);
    content.push_back(std::move(entry));
  }
  ojson j;
  j["content"] = std::move(content);
  j["refusal"] = nullptr;
  return j;
}

ojson chat_completion_response(const ResponseMeta& meta, const ChatOutput& output, const Usage& usage) {
  ojson message;
  message["role"] = "assistant";
  message["content"] = output.content;
  message["refusal"] = nullptr;
  if (output.reasoning_content) message["reasoning_content"] = *output.reasoning_content;
  const bool has_tool_calls = output.tool_calls.is_array() && !output.tool_calls.empty();
  if (has_tool_calls) message["tool_calls"] = output.tool_calls;
  ojson choice;
  choice["index"] = 0;
  choice["message"] = std::move(message);
  choice["logprobs"] = output.logprobs ? chat_logprobs_json(*output.logprobs) : ojson(nullptr);
  choice["finish_reason"] = has_tool_calls && output.finish_reason == FinishReason::stop
                                ? ojson("tool_calls")
                                : finish_reason_json(output.finish_reason);
  ojson j = head(meta, "chat.completion");
  j["choices"] = ojson::array({std::move(choice)});
  j["usage"] = usage_json(usage);
  return j;
}

ojson chat_chunk(const ResponseMeta& meta, ojson delta, const ojson& logprobs, FinishReason finish_reason,
                 bool include_usage) {
  ojson choice;
  choice["index"] = 0;
  choice["delta"] = std::move(delta);
  choice["logprobs"] = logprobs;
  choice["finish_reason"] = finish_reason_json(finish_reason);
  ojson j = head(meta, "chat.completion.chunk");
  j["choices"] = ojson::array({std::move(choice)});
  if (include_usage) j["usage"] = nullptr;
  return j;
}

ojson chat_usage_chunk(const ResponseMeta& meta, const Usage& usage) {
  ojson j = head(meta, "chat.completion.chunk");
  j["choices"] = ojson::array();
  j["usage"] = usage_json(usage);
  return j;
}

}  // namespace day0
