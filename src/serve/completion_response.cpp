// Completion response objects, field for field as in the OpenAI API reference (legacy completions).
#include "serve/completion_response.h"

namespace day0 {
namespace {

using ojson = nlohmann::ordered_json;

ojson head(const ResponseMeta& meta) {
  ojson j;
  j["id"] = meta.id;
  j["object"] = "text_completion";
  j["created"] = meta.created;
  j["model"] = meta.model;
  return j;
}

}  // namespace

ojson completion_logprobs_json(std::span<const LogprobEntry> entries, std::int64_t first_offset) {
  ojson tokens = ojson::array(), token_logprobs = ojson::array(), top_logprobs = ojson::array(),
        text_offset = ojson::array();
  std::int64_t offset = first_offset;
  for (const LogprobEntry& e : entries) {
    const std::string text = token_string(e.token.bytes);
    tokens.push_back(text);
    token_logprobs.push_back(logprob_json(e.token.logprob));
    ojson top = ojson::object();
    for (const TokenText& t : e.top) {
      const std::string key = token_string(t.bytes);
      if (!top.contains(key)) top[key] = logprob_json(t.logprob);  // distinct ids may share a text
    }
    if (!top.contains(text)) top[text] = logprob_json(e.token.logprob);
    top_logprobs.push_back(std::move(top));
    text_offset.push_back(offset);
    offset += code_point_count(text);
  }
  ojson j;
  j["tokens"] = std::move(tokens);
  j["token_logprobs"] = std::move(token_logprobs);
  j["top_logprobs"] = std::move(top_logprobs);
  j["text_offset"] = std::move(text_offset);
  return j;
}

ojson completion_response(const ResponseMeta& meta, const CompletionOutput& output, const Usage& usage) {
  ojson choice;
  choice["index"] = 0;
  choice["text"] = output.text;
  choice["logprobs"] = output.logprobs ? completion_logprobs_json(*output.logprobs, 0) : ojson(nullptr);
  choice["finish_reason"] = finish_reason_json(output.finish_reason);
  ojson j = head(meta);
  j["choices"] = ojson::array({std::move(choice)});
  j["usage"] = usage_json(usage);
  return j;
}

ojson completion_chunk(const ResponseMeta& meta, const std::string& text, const ojson& logprobs,
                       FinishReason finish_reason, bool include_usage) {
  ojson choice;
  choice["index"] = 0;
  choice["text"] = text;
  choice["logprobs"] = logprobs;
  choice["finish_reason"] = finish_reason_json(finish_reason);
  ojson j = head(meta);
  j["choices"] = ojson::array({std::move(choice)});
  if (include_usage) j["usage"] = nullptr;
  return j;
}

ojson completion_usage_chunk(const ResponseMeta& meta, const Usage& usage) {
  ojson j = head(meta);
  j["choices"] = ojson::array();
  j["usage"] = usage_json(usage);
  return j;
}

}  // namespace day0
