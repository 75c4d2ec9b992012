// Generation: one admitted request as its connection's thread sees it. The engine's updates arrive on the
// scheduler thread and are only queued here (the callback never blocks); next() turns them into text on the
// connection's thread: detokenized incrementally, cut before the first stop string (the engine request is then
// aborted), with usage and the latency metrics (time to first token, inter-token) recorded.
//
// Destroying an unfinished Generation aborts its engine request, so that every way a connection can end
// (client gone, write failure, exception, shutdown) returns the sequence's KV blocks to the pool.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/stop_matcher.h"
#include "serve/api_error.h"
#include "serve/metrics.h"
#include "serve/response_common.h"
#include "tokenizer/tokenizer.h"

namespace day0 {

using SteadyClock = std::chrono::steady_clock;

// What the connection needs to send since the previous next().
struct GenerationChunk {
  std::string text;
  std::vector<LogprobEntry> logprobs;  // one per token whose text is (or is held back) in this chunk
  bool finished = false;
  FinishReason reason = FinishReason::none;
  std::optional<ApiError> error;  // the engine failed this request (finished is true)
};

struct GenerationContext {
  Engine* engine = nullptr;
  const Tokenizer* tokenizer = nullptr;
  ServerMetrics* metrics = nullptr;
  std::span<const std::int32_t> eos_token_ids;  // whose text is never output (unless ignore_eos)
};

class Generation {
 public:
  // Submits `request`; the engine's refusal comes back as its Error (the caller maps it to an HTTP status).
  // `arrival` is when the HTTP request arrived (time to first token counts from there).
  static Result<std::unique_ptr<Generation>> start(const GenerationContext& context, GenerateRequest request,
                                                   SteadyClock::time_point arrival);
  ~Generation();
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  // Waits at most `timeout` for engine output and returns what is new (possibly nothing). After the chunk
  // with finished = true, returns empty finished chunks.
  GenerationChunk next(std::chrono::milliseconds timeout);
  // The client is gone: stop the engine request now (idempotent, and a no-op once finished).
  void abort();

  bool finished() const { return finished_; }
  RequestId id() const { return id_; }
  Usage usage() const { return {prompt_tokens_, completion_tokens_}; }
  std::int64_t cached_prompt_tokens() const { return cached_prompt_tokens_; }

  struct Channel;  // the queue between the scheduler thread and this one (generation.cpp)

 private:
  Generation(const GenerationContext& context, const GenerateRequest& request, SteadyClock::time_point arrival);
  void consume(const RequestUpdate& update, SteadyClock::time_point at, GenerationChunk& out);
  void finish(FinishReason reason, GenerationChunk& out);
  LogprobEntry logprob_entry(const GeneratedToken& token) const;

  GenerationContext context_;
  SamplingParams sampling_;
  std::shared_ptr<Channel> channel_;
  RequestId id_ = 0;
  SteadyClock::time_point arrival_, last_token_at_;
  IncrementalDetokenizer detokenizer_;
  StopMatcher stops_;
  bool finished_ = false, aborted_ = false, seen_token_ = false;
  std::int64_t prompt_tokens_ = 0, completion_tokens_ = 0, cached_prompt_tokens_ = 0;
};

}  // namespace day0
