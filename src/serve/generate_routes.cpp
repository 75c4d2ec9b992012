// POST /v1/completions and /v1/chat/completions: parse and check the body (serve/*_request.h), build the prompt
// (tokenize, or render the chat template and tokenize), resolve max_tokens against the context and the KV pool,
// submit to the engine, then answer as one JSON object or as server-sent events. Every refusal before admission
// is an HTTP status with an OpenAI error object; after a stream started, an error is one error event (sse.h).
#include <cctype>
#include <ctime>

#include "engine/sampler.h"
#include "serve/chat_request.h"
#include "serve/chat_response.h"
#include "serve/client_watch.h"
#include "serve/completion_request.h"
#include "serve/completion_response.h"
#include "serve/generation.h"
#include "serve/server_core.h"
#include "serve/stream_encoder.h"

namespace day0 {
namespace {

using ojson = nlohmann::ordered_json;

// A request turned into what the engine runs, plus what the response needs.
struct Prepared {
  Endpoint endpoint = Endpoint::completions;
  std::string model;
  GenerateRequest request;
  bool stream = false;
  bool include_usage = false;
};

// JSON, or no Content-Type at all (curl -d without -H sends form encoding, which we refuse with 415).
bool json_content_type(const httplib::Request& req) {
  if (!req.has_header("Content-Type")) return true;
  std::string type = req.get_header_value("Content-Type");
  type = type.substr(0, type.find(';'));
  while (!type.empty() && std::isspace(static_cast<unsigned char>(type.back()))) type.pop_back();
  for (char& ch : type) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return type == "application/json";
}

// RELIABILITY.md B3: a request that could never fit the KV pool is refused now, not admitted and preempted forever.
ApiStatus check_fits_pool(const ServedModel& m, std::int64_t n_prompt, std::int64_t max_tokens,
                          const std::string& max_tokens_param) {
  if (m.kv_pool_tokens <= 0 || n_prompt + max_tokens <= m.kv_pool_tokens) return ApiStatus();
  return invalid_request(max_tokens_param,
                         "the request needs " + std::to_string(n_prompt + max_tokens) + " tokens of KV cache (" +
                             std::to_string(n_prompt) + " in the prompt, " + std::to_string(max_tokens) +
                             " to generate) but the server's pool holds " + std::to_string(m.kv_pool_tokens),
                         "context_length_exceeded");
}

GenerateRequest engine_request(std::vector<std::int32_t> prompt, const SamplingParams& sampling) {
  GenerateRequest g;
  g.prompt = std::move(prompt);
  g.sampling = sampling;
  g.seed = draw_request_seed();
  return g;
}

ApiResult<Prepared> prepare_completion(const ServedModel& m, const std::string& body) {
  D0_ASSIGN_OR_RETURN(CompletionRequest r, parse_completion_request(body, m.protocol));
  std::vector<std::int32_t> ids;
  if (const auto* text = std::get_if<std::string>(&r.prompt)) {
    auto encoded = m.tokenizer->encode(*text, /*add_special_tokens=*/true);
    if (!encoded.ok()) return invalid_request("prompt", "the prompt cannot be tokenized: " + encoded.error().message);
    ids = std::move(*encoded);
  } else {
    ids = std::get<std::vector<std::int32_t>>(r.prompt);
  }
  if (ids.empty()) return invalid_request("prompt", "the prompt has no tokens");
  D0_RETURN_IF_ERROR(resolve_max_tokens(r, static_cast<std::int64_t>(ids.size()), m.protocol));
  D0_RETURN_IF_ERROR(check_fits_pool(m, static_cast<std::int64_t>(ids.size()), r.sampling.max_tokens, "max_tokens"));
  Prepared p;
  p.endpoint = Endpoint::completions;
  p.model = r.model;
  p.request = engine_request(std::move(ids), r.sampling);
  p.stream = r.stream;
  p.include_usage = r.include_usage;
  return p;
}

ApiResult<Prepared> prepare_chat(const ServedModel& m, const std::string& body) {
  D0_ASSIGN_OR_RETURN(ChatRequest r, parse_chat_request(body, m.protocol));
  if (m.chat_template == nullptr)
    return invalid_request("messages", "the model '" + r.model +
                                           "' has no chat template: use /v1/completions, or start the server with "
                                           "--chat-template FILE");
  auto rendered = m.chat_template->render_ordered(chat_template_input(r));
  if (!rendered.ok())
    return invalid_request("messages",
                           "the chat template refused these messages: " + quote_user_text(rendered.error().message, 256));
  // The rendered template already holds its special tokens (as transformers' apply_chat_template).
  auto ids = m.tokenizer->encode(*rendered, /*add_special_tokens=*/false);
  if (!ids.ok()) return invalid_request("messages", "the rendered chat cannot be tokenized: " + ids.error().message);
  if (ids->empty()) return invalid_request("messages", "the rendered chat has no tokens");
  D0_RETURN_IF_ERROR(resolve_max_tokens(r, static_cast<std::int64_t>(ids->size()), m.protocol));
  D0_RETURN_IF_ERROR(
      check_fits_pool(m, static_cast<std::int64_t>(ids->size()), r.sampling.max_tokens, r.max_tokens_param));
  Prepared p;
  p.endpoint = Endpoint::chat;
  p.model = r.model;
  p.request = engine_request(std::move(*ids), r.sampling);
  p.stream = r.stream;
  p.include_usage = r.include_usage;
  return p;
}

// The engine refused a request the server had checked: its queue is full, it began draining under us, or (a
// safety net: the context and the pool were checked before) the request does not fit. The Engine reports
// refusals as plain messages, so the queue is recognised by its wording (engine.cpp).
ApiError refusal(const Server::Core& core, const Error& error) {
  if (core.draining || error.message.find("shutting down") != std::string::npos)
    return ApiError{503, "the server is shutting down", "unavailable_error", "", ""};
  if (error.message.find("queue is full") != std::string::npos)
    return ApiError{429, "the server is busy: " + error.message + "; retry later", "rate_limit_exceeded", "",
                    "queue_full"};
  return invalid_request("", error.message);
}

// Everything a streamed response owns until its last byte; destroyed with the response (aborting an unfinished
// generation, deregistering it for the drain).
struct StreamState {
  std::shared_ptr<const ServedModel> model;  // keeps the tokenizer and engine of the Generation attached
  std::unique_ptr<ActiveResponse> active;
  std::unique_ptr<Generation> generation;
  StreamEncoder encoder;
  ClientWatch watch;
  bool started = false;
};

void respond_stream(Server::Core& core, std::shared_ptr<StreamState> state, httplib::Response& res) {
  const std::chrono::milliseconds poll = core.options.client_poll;
  ServerMetrics* metrics = &core.metrics;
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream", [state, poll, metrics](std::size_t, httplib::DataSink& sink) {
        StreamState& s = *state;
        std::string out;
        if (!s.started) {
          s.started = true;
          out = s.encoder.start();
        }
        GenerationChunk chunk = s.generation->next(poll);
        if (!chunk.finished && s.watch.gone()) {
          metrics->count_client_disconnect();
          s.generation->abort();
          return false;
        }
        out += s.encoder.delta(chunk.text, chunk.logprobs);
        if (chunk.finished)
          out += chunk.error ? s.encoder.fail(*chunk.error) : s.encoder.finish(chunk.reason, s.generation->usage());
        if (!out.empty() && !sink.write(out.data(), out.size())) {
          metrics->count_client_disconnect();
          s.generation->abort();
          return false;
        }
        if (chunk.finished) sink.done();
        return true;
      });
}

void respond_whole(Server::Core& core, const Prepared& p, const ResponseMeta& meta, Generation& generation,
                   const ClientWatch& watch, httplib::Response& res) {
  std::string text;
  std::vector<LogprobEntry> logprobs;
  for (;;) {
    GenerationChunk chunk = generation.next(core.options.client_poll);
    text += chunk.text;
    logprobs.insert(logprobs.end(), chunk.logprobs.begin(), chunk.logprobs.end());
    if (chunk.finished) {
      if (chunk.error) return send_error(core, res, *chunk.error);
      const bool want_logprobs = p.request.sampling.logprobs;
      ojson body;
      if (p.endpoint == Endpoint::chat) {
        ChatOutput out;
        out.content = std::move(text);
        out.tool_calls = nullptr;
        out.finish_reason = chunk.reason;
        if (want_logprobs) out.logprobs = std::move(logprobs);
        body = chat_completion_response(meta, out, generation.usage());
      } else {
        CompletionOutput out{std::move(text), chunk.reason, std::nullopt};
        if (want_logprobs) out.logprobs = std::move(logprobs);
        body = completion_response(meta, out, generation.usage());
      }
      res.set_content(json_text(body), "application/json");
      return;
    }
    if (watch.gone()) {
      core.metrics.count_client_disconnect();
      generation.abort();
      res.status = 499;  // nginx's "client closed request": only /metrics will ever see it
      return;
    }
  }
}

void handle_generation(Server::Core& core, const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
  const SteadyClock::time_point arrival = SteadyClock::now();
  // Registered before the draining check, so that drain either sees this response or this response sees drain.
  auto active = std::make_unique<ActiveResponse>(core);
  if (!json_content_type(req))
    return send_error(core, res,
                      ApiError{415, "Content-Type must be application/json", "invalid_request_error", "",
                               "unsupported_media_type"});
  if (core.draining) return send_error(core, res, ApiError{503, "the server is shutting down", "unavailable_error", "", ""});
  std::shared_ptr<const ServedModel> model = core.served();
  if (!model) return send_error(core, res, ApiError{503, "the model is loading", "unavailable_error", "", ""});

  ApiResult<Prepared> prepared =
      endpoint == Endpoint::chat ? prepare_chat(*model, req.body) : prepare_completion(*model, req.body);
  if (!prepared.ok()) return send_error(core, res, prepared.error());
  Prepared& p = *prepared;
  const GenerationContext context{model->engine, model->tokenizer, &core.metrics, model->eos_token_ids};
  auto generation = Generation::start(context, p.request, arrival);
  if (!generation.ok()) return send_error(core, res, refusal(core, generation.error()));
  active->set_request((*generation)->id());

  const ResponseMeta meta{core.new_response_id(endpoint == Endpoint::chat ? "chatcmpl" : "cmpl"),
                          static_cast<std::int64_t>(std::time(nullptr)), p.model};
  ClientWatch watch = ClientWatch::of_connection(req.local_addr, req.local_port, req.remote_addr, req.remote_port);
  if (!p.stream) return respond_whole(core, p, meta, **generation, watch, res);
  auto state = std::make_shared<StreamState>(StreamState{
      model, std::move(active), std::move(*generation),
      StreamEncoder(endpoint, meta, p.include_usage, p.request.sampling.logprobs), watch, false});
  respond_stream(core, std::move(state), res);
}

}  // namespace

void handle_completions(Server::Core& core, const httplib::Request& req, httplib::Response& res) {
  handle_generation(core, req, res, Endpoint::completions);
}

void handle_chat_completions(Server::Core& core, const httplib::Request& req, httplib::Response& res) {
  handle_generation(core, req, res, Endpoint::chat);
}

}  // namespace day0
