// StreamEncoder over the chunk builders of completion_response.h and chat_response.h.
#include "serve/stream_encoder.h"

#include "serve/chat_response.h"
#include "serve/completion_response.h"
#include "serve/sse.h"

namespace day0 {
namespace {

using ojson = nlohmann::ordered_json;

}  // namespace

StreamEncoder::StreamEncoder(Endpoint endpoint, ResponseMeta meta, bool include_usage, bool logprobs)
    : endpoint_(endpoint), meta_(std::move(meta)), include_usage_(include_usage), logprobs_(logprobs) {}

std::string StreamEncoder::start() {
  if (endpoint_ != Endpoint::chat) return {};
  ojson delta;
  delta["role"] = "assistant";
  delta["content"] = "";
  return sse_event(chat_chunk(meta_, std::move(delta), nullptr, FinishReason::none, include_usage_));
}

std::string StreamEncoder::delta(std::string_view text, std::span<const LogprobEntry> logprobs) {
  if (text.empty() && logprobs.empty()) return {};
  if (endpoint_ == Endpoint::chat) {
    ojson delta;
    delta["content"] = std::string(text);
    const ojson lp = logprobs_ ? chat_logprobs_json(logprobs) : ojson(nullptr);
    return sse_event(chat_chunk(meta_, std::move(delta), lp, FinishReason::none, include_usage_));
  }
  const ojson lp = logprobs_ ? completion_logprobs_json(logprobs, text_offset_) : ojson(nullptr);
  text_offset_ += code_point_count(text);
  return sse_event(completion_chunk(meta_, std::string(text), lp, FinishReason::none, include_usage_));
}

std::string StreamEncoder::finish(FinishReason reason, const Usage& usage) {
  std::string out;
  if (endpoint_ == Endpoint::chat) {
    out = sse_event(chat_chunk(meta_, ojson::object(), nullptr, reason, include_usage_));
    if (include_usage_) out += sse_event(chat_usage_chunk(meta_, usage));
  } else {
    out = sse_event(completion_chunk(meta_, "", nullptr, reason, include_usage_));
    if (include_usage_) out += sse_event(completion_usage_chunk(meta_, usage));
  }
  return out + sse_done();
}

std::string StreamEncoder::fail(const ApiError& error) { return sse_error(error); }

}  // namespace day0
