// StreamEncoder: one streamed response as SSE text, so that the server only forwards strings. It
// knows the endpoint's chunk shapes, sends chat's role delta first, counts text offsets for
// completions logprobs, and ends with the finish chunk, the usage chunk when asked, and [DONE].
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "serve/api_error.h"
#include "serve/response_common.h"

namespace day0 {

enum class Endpoint { completions, chat };

class StreamEncoder {
 public:
  // `logprobs`: the request asked for them, so every content chunk carries its tokens' entries.
  StreamEncoder(Endpoint endpoint, ResponseMeta meta, bool include_usage, bool logprobs);

  // Chat: the first chunk, delta {"role": "assistant", "content": ""}. Completions: nothing.
  std::string start();
  // A chunk with new text and the logprobs of the tokens that produced it; "" when both are empty.
  std::string delta(std::string_view text, std::span<const LogprobEntry> logprobs = {});
  // The finish chunk, then the usage chunk if include_usage, then [DONE].
  std::string finish(FinishReason reason, const Usage& usage);
  // Ends a started stream with an error event and [DONE].
  std::string fail(const ApiError& error);

 private:
  Endpoint endpoint_;
  ResponseMeta meta_;
  bool include_usage_;
  bool logprobs_;
  std::int64_t text_offset_ = 0;  // code points sent so far (completions text_offset)
};

}  // namespace day0
