// Generation: the update queue, detokenization, stop strings and the per-token metrics.
#include "serve/generation.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <utility>

namespace day0 {

struct Generation::Channel {
  struct Item {
    RequestUpdate update;
    SteadyClock::time_point at;  // when the scheduler produced it: latency metrics do not include our wake-up
  };

  void push(const RequestUpdate& update) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      items.push_back({update, SteadyClock::now()});
    }
    ready.notify_one();
  }

  void take(std::vector<Item>& out, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex);
    ready.wait_for(lock, timeout, [&] { return !items.empty(); });
    out.swap(items);
  }

  std::mutex mutex;
  std::condition_variable ready;
  std::vector<Item> items;
};

Generation::Generation(const GenerationContext& context, const GenerateRequest& request,
                       SteadyClock::time_point arrival)
    : context_(context),
      sampling_(request.sampling),
      channel_(std::make_shared<Channel>()),
      arrival_(arrival),
      last_token_at_(arrival),
      // Special tokens are left out of the text, as vLLM's default skip_special_tokens does.
      detokenizer_(*context.tokenizer, /*skip_special_tokens=*/true),
      stops_(request.sampling.stop),
      prompt_tokens_(static_cast<std::int64_t>(request.prompt.size())) {}

Result<std::unique_ptr<Generation>> Generation::start(const GenerationContext& context, GenerateRequest request,
                                                      SteadyClock::time_point arrival) {
  std::unique_ptr<Generation> g(new Generation(context, request, arrival));
  // The engine keeps the callback (and so the channel) until the request's last update, which may come after
  // this Generation is gone.
  std::shared_ptr<Channel> channel = g->channel_;
  auto id = context.engine->submit(std::move(request), [channel](const RequestUpdate& u) { channel->push(u); });
  if (!id.ok()) return id.error();
  g->id_ = *id;
  context.metrics->add_prompt_tokens(g->prompt_tokens_);
  return g;
}

Generation::~Generation() { abort(); }

void Generation::abort() {
  if (finished_ || aborted_ || context_.engine == nullptr) return;
  aborted_ = true;
  context_.engine->abort(id_);
}

GenerationChunk Generation::next(std::chrono::milliseconds timeout) {
  GenerationChunk out;
  if (finished_ || aborted_) {
    out.finished = true;
    return out;
  }
  std::vector<Channel::Item> items;
  channel_->take(items, timeout);
  for (const Channel::Item& item : items) {
    consume(item.update, item.at, out);
    if (finished_) break;
  }
  return out;
}

LogprobEntry Generation::logprob_entry(const GeneratedToken& token) const {
  const auto bytes_of = [&](std::int32_t id) {
    auto bytes = context_.tokenizer->decode_bytes(std::span(&id, 1));
    return bytes.ok() ? *bytes : std::string();
  };
  LogprobEntry e;
  e.token = {bytes_of(token.token), token.logprob.value_or(0.f)};
  for (const TokenLogprob& alt : token.top_logprobs) e.top.push_back({bytes_of(alt.token), alt.logprob});
  return e;
}

void Generation::consume(const RequestUpdate& update, SteadyClock::time_point at, GenerationChunk& out) {
  if (update.prompt_tokens > 0) prompt_tokens_ = update.prompt_tokens;
  cached_prompt_tokens_ = update.cached_prompt_tokens;
  const std::size_t n = update.tokens.size();
  for (std::size_t i = 0; i < n; ++i) {
    const GeneratedToken& t = update.tokens[i];
    completion_tokens_ += 1;
    if (!seen_token_) {
      context_.metrics->observe_time_to_first_token(std::chrono::duration<double>(at - arrival_).count());
      seen_token_ = true;
    } else {
      // Tokens delivered together shared the wait since the previous update.
      context_.metrics->observe_inter_token_latency(std::chrono::duration<double>(at - last_token_at_).count() /
                                                    static_cast<double>(n));
    }
    if (i + 1 == n) last_token_at_ = at;
    if (sampling_.logprobs) out.logprobs.push_back(logprob_entry(t));
    auto piece = detokenizer_.push(t.token);
    if (!piece.ok()) {
      context_.metrics->add_generated_tokens(static_cast<std::int64_t>(i + 1));
      out.error = ApiError{500, "detokenization failed: " + piece.error().message, "server_error", "", ""};
      abort();
      finished_ = out.finished = true;
      return;
    }
    StopMatcher::Step step = stops_.push(*piece);
    out.text += step.emit;
    if (step.stopped) {
      // Usage counts the tokens up to the one that completed the stop string.
      context_.metrics->add_generated_tokens(static_cast<std::int64_t>(i + 1));
      context_.metrics->count_stop_string_abort();
      abort();  // the engine stops generating; its final "aborted" update is ignored
      finish(FinishReason::stop, out);
      return;
    }
  }
  context_.metrics->add_generated_tokens(static_cast<std::int64_t>(n));
  // The engine's count also holds the EOS or stop token, which it does not deliver (OpenAI counts it too).
  completion_tokens_ = std::max(completion_tokens_, update.completion_tokens);
  if (!update.finished) return;
  if (!update.error.empty()) {
    out.error = ApiError{500, "generation failed: " + update.error, "server_error", "", ""};
    finished_ = out.finished = true;
    return;
  }
  if (update.reason == FinishReason::none) {
    // Aborted by someone else: the drain deadline of a shutdown.
    out.error = ApiError{503, "the request was aborted: the server is shutting down", "unavailable_error", "", ""};
    finished_ = out.finished = true;
    return;
  }
  finish(update.reason, out);
}

void Generation::finish(FinishReason reason, GenerationChunk& out) {
  if (!stops_.stopped()) {
    auto tail = detokenizer_.finish();
    if (tail.ok()) {
      StopMatcher::Step step = stops_.push(*tail);
      out.text += step.emit;
      if (step.stopped) reason = FinishReason::stop;
    }
    if (!stops_.stopped()) out.text += stops_.flush();
  }
  finished_ = true;
  out.finished = true;
  out.reason = reason;
  context_.metrics->observe_request_latency(std::chrono::duration<double>(SteadyClock::now() - arrival_).count());
}

}  // namespace day0
