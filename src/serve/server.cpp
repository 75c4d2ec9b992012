// Server: cpp-httplib set-up (limits, connection pool), the route table, API-key check, OpenAI-shaped errors
// for what the library answers itself (404, 405, 413, 500), the plain routes, warm-up and drain.
#include "serve/server.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <memory>
#include <thread>

#include <sys/socket.h>

#include "engine/sampler.h"
#include "serve/api_key.h"
#include "serve/generation.h"
#include "serve/models_response.h"
#include "serve/server_core.h"

namespace day0 {
namespace {

constexpr const char* kJson = "application/json";

const std::vector<Route>& route_table() {
  static const std::vector<Route> table = {
      {"POST", "/v1/completions", false},      {"POST", "/v1/chat/completions", false},
      {"GET", "/v1/models", false},            {"GET", "/metrics", true},
      {"GET", "/health", true},                {"GET", "/health/live", true},
      {"GET", "/ready", true},                 {"GET", "/health/ready", true},
  };
  return table;
}

// The metrics label of a path: a route of the table, or "other" (unknown paths must not create labels).
std::string route_label(const std::string& path) {
  for (const Route& r : route_table())
    if (r.path == path) return r.path;
  return "other";
}

bool public_path(const std::string& path) {
  for (const Route& r : route_table())
    if (r.path == path) return r.is_public;
  return false;
}

std::string allowed_methods(const std::string& path) {
  std::string allow;
  for (const Route& r : route_table())
    if (r.path == path) allow += (allow.empty() ? "" : ", ") + r.method;
  return allow;
}

ApiError unavailable(const std::string& message) { return ApiError{503, message, "unavailable_error", "", ""}; }

void send_json(httplib::Response& res, const nlohmann::ordered_json& body) { res.set_content(json_text(body), kJson); }

// The library answered on its own (no route, wrong method, body too large, unreadable request): give it the
// OpenAI error shape. Our own error responses already have a body and are left alone.
httplib::Server::HandlerResponse library_error(const Server::Core& core, const httplib::Request& req,
                                               httplib::Response& res) {
  if (!res.body.empty() || res.is_chunked_content_provider_) return httplib::Server::HandlerResponse::Unhandled;
  const std::string allow = allowed_methods(req.path);
  const bool wrong_method = !req.method.empty() && allow.find(req.method) == std::string::npos;
  if (!allow.empty() && wrong_method && (res.status == 404 || res.status == 400)) {
    res.set_header("Allow", allow);
    send_error(core, res,
               ApiError{405, "method " + quote_user_text(req.method) + " is not allowed on " + req.path + ": use " + allow,
                        "invalid_request_error", "", "method_not_allowed"});
    return httplib::Server::HandlerResponse::Handled;
  }
  ApiError e;
  switch (res.status) {
    case 404: e = {404, "no route " + quote_user_text(req.path, 128), "not_found_error", "", "route_not_found"}; break;
    case 413:
      e = {413, "the request body is larger than the limit of " + std::to_string(core.options.limits.max_body_bytes) +
                    " bytes",
           "invalid_request_error", "", "payload_too_large"};
      break;
    case 414: e = {414, "the request target is too long", "invalid_request_error", "", ""}; break;
    case 499: return httplib::Server::HandlerResponse::Unhandled;  // the client is gone: nobody reads it
    default:
      if (res.status >= 500) e = {res.status, "internal server error", "server_error", "", ""};
      else e = {res.status, "malformed HTTP request", "invalid_request_error", "", ""};
  }
  send_error(core, res, e);
  return httplib::Server::HandlerResponse::Handled;
}

void configure(Server::Core& core) {
  httplib::Server& http = core.http;
  const ServerLimits& limits = core.options.limits;
  Server::Core* c = &core;
  http.new_task_queue = [c] {
    return new ConnectionPool(c->options.limits.max_connections, c->options.limits.max_pending_connections);
  };
  http.set_payload_max_length(limits.max_body_bytes);
  http.set_read_timeout(limits.read_timeout_s, 0);
  http.set_write_timeout(limits.write_timeout_s, 0);
  http.set_keep_alive_timeout(limits.keep_alive_timeout_s);
  http.set_keep_alive_max_count(1000);  // the library's default of 5 makes pooling clients reconnect
  http.set_tcp_nodelay(true);           // one small SSE chunk per token must not wait for Nagle
  http.set_pre_routing_handler([c](const httplib::Request& req, httplib::Response& res) {
    const std::string& key = c->options.api_key;
    if (key.empty() || public_path(req.path) ||
        api_key_accepted(req.get_header_value("Authorization"), req.get_header_value("X-Api-Key"), key))
      return httplib::Server::HandlerResponse::Unhandled;
    res.set_header("WWW-Authenticate", "Bearer");
    send_error(*c, res,
               ApiError{401, "invalid or missing API key: send it as 'Authorization: Bearer <key>'",
                        "authentication_error", "", "invalid_api_key"});
    return httplib::Server::HandlerResponse::Handled;
  });
  http.set_error_handler(httplib::Server::HandlerWithResponse(
      [c](const httplib::Request& req, httplib::Response& res) { return library_error(*c, req, res); }));
  http.set_exception_handler([c](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    // A bug or an exhausted allocation in one request: that request fails, the server goes on.
    send_error(*c, res, ApiError{500, "internal server error", "server_error", "", ""});
  });
  http.set_logger([c](const httplib::Request& req, const httplib::Response& res) {
    c->metrics.count_request(route_label(req.path), res.status);
  });

  const auto alive = [](const httplib::Request&, httplib::Response& res) {
    send_json(res, nlohmann::ordered_json{{"status", "ok"}});
  };
  http.Get("/health", alive);
  http.Get("/health/live", alive);
  const auto ready = [c](const httplib::Request&, httplib::Response& res) {
    if (c->ready) return send_json(res, nlohmann::ordered_json{{"status", "ready"}});
    send_error(*c, res, unavailable(c->draining ? "not ready: the server is shutting down"
                                                : "not ready: the model is loading or warming up"));
  };
  http.Get("/ready", ready);
  http.Get("/health/ready", ready);
  http.Get("/metrics", [c](const httplib::Request&, httplib::Response& res) {
    const auto model = c->served();
    std::optional<EngineStats> stats;
    if (model && model->engine) stats = model->engine->stats();
    res.set_content(c->metrics.prometheus_text(stats, c->ready), "text/plain; version=0.0.4; charset=utf-8");
  });
  http.Get("/v1/models", [c, started = static_cast<std::int64_t>(std::time(nullptr))](const httplib::Request&,
                                                                                      httplib::Response& res) {
    const auto model = c->served();
    if (!model) return send_error(*c, res, unavailable("the model is loading"));
    send_json(res, models_response(model->protocol, started));
  });
  http.Post("/v1/completions",
            [c](const httplib::Request& req, httplib::Response& res) { handle_completions(*c, req, res); });
  http.Post("/v1/chat/completions",
            [c](const httplib::Request& req, httplib::Response& res) { handle_chat_completions(*c, req, res); });
}

}  // namespace

void send_error(const Server::Core& core, httplib::Response& res, const ApiError& error) {
  res.status = error.http_status;
  res.set_content(json_text(error_body(error)), kJson);
  if (error.http_status == 429 || error.http_status == 503)
    res.set_header("Retry-After", std::to_string(core.options.limits.retry_after_s));
}

Server::Server(std::unique_ptr<Core> core) : core_(std::move(core)) {}

Server::~Server() { stop(); }

Result<std::unique_ptr<Server>> Server::start(const ServerOptions& options) {
  if (options.limits.max_connections < 1) return make_error("serve: max_connections must be at least 1");
  auto core = std::make_unique<Core>();
  core->options = options;
  configure(*core);
  if (options.port == 0) {
    core->port = core->http.bind_to_any_port(options.host);
  } else {
    core->port = core->http.bind_to_port(options.host, options.port) ? options.port : -1;
  }
  if (core->port < 0)
    return make_error("serve: cannot listen on " + options.host + ":" + std::to_string(options.port) + " (" +
                      std::strerror(errno) + ")");
  if (::listen(core->http.listening_socket(), options.limits.listen_backlog) != 0)
    return make_error(std::string("serve: cannot set the listen backlog (") + std::strerror(errno) + ")");
  Core* c = core.get();
  auto returned = std::make_shared<std::atomic<bool>>(false);
  core->listener = std::thread([c, returned] {
    c->http.listen_after_bind();
    *returned = true;
  });
  // httplib's stop() does nothing until the listening loop runs: wait for it, so that a stop() right after
  // start() (a failed model load) cannot be lost and leave the loop running for ever.
  while (!core->http.is_running() && !*returned) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return std::unique_ptr<Server>(new Server(std::move(core)));
}

int Server::port() const { return core_->port; }
const std::string& Server::host() const { return core_->options.host; }
bool Server::ready() const { return core_->ready; }
const ServerMetrics& Server::metrics() const { return core_->metrics; }
std::vector<Route> Server::routes() { return route_table(); }

void Server::attach(ServedModel model) {
  std::lock_guard<std::mutex> lock(core_->model_mutex);
  core_->model = std::make_shared<const ServedModel>(std::move(model));
}

Status Server::warm_up(std::chrono::milliseconds timeout, std::int64_t prompt_tokens) {
  const auto model = core_->served();
  if (!model || model->engine == nullptr || model->tokenizer == nullptr)
    return make_error("warm-up: no model attached");
  auto ids = model->tokenizer->encode("\n", /*add_special_tokens=*/false);
  const std::int32_t token = ids.ok() && !ids->empty() ? ids->front() : 0;
  const auto deadline = SteadyClock::now() + timeout;
  const auto generate = [&](std::int64_t n_prompt, std::int32_t n_out) -> Status {
    GenerateRequest request;
    request.prompt.assign(static_cast<std::size_t>(n_prompt), token);
    request.sampling.temperature = 0;
    request.sampling.max_tokens = n_out;
    request.sampling.ignore_eos = true;
    request.seed = 0;
    ServerMetrics scratch;  // the warm-up is not a client request: keep it out of /metrics
    const GenerationContext context{model->engine, model->tokenizer, &scratch, model->eos_token_ids};
    D0_ASSIGN_OR_RETURN(auto generation, Generation::start(context, std::move(request), SteadyClock::now()));
    while (SteadyClock::now() < deadline) {
      const GenerationChunk chunk = generation->next(std::chrono::milliseconds(50));
      if (chunk.error) return make_error("warm-up: " + chunk.error->message);
      if (!chunk.finished) continue;
      if (generation->usage().completion_tokens != n_out)
        return make_error("warm-up: expected " + std::to_string(n_out) + " tokens, got " +
                          std::to_string(generation->usage().completion_tokens));
      return Status::success();
    }
    return make_error("warm-up: no token within " + std::to_string(timeout.count()) + " ms");
  };
  D0_RETURN_IF_ERROR(generate(1, 1));
  const std::int64_t len = model->protocol.max_model_len;  // 0: not known
  const std::int64_t longest = len > 0 ? std::min<std::int64_t>(prompt_tokens, len - 2) : prompt_tokens;
  if (longest > 1) D0_RETURN_IF_ERROR(generate(longest, 2));
  core_->ready = !core_->draining;
  return Status::success();
}

void Server::drain_and_stop(std::chrono::milliseconds timeout) {
  Core& c = *core_;
  c.draining = true;
  c.ready = false;
  const auto model = c.served();
  {
    std::unique_lock<std::mutex> lock(c.active_mutex);
    if (!c.active_changed.wait_for(lock, timeout, [&] { return c.active_responses == 0; }) && model && model->engine) {
      for (const RequestId id : c.active_ids) model->engine->abort(id);
      // Aborted streams still write their error event; a client that stopped reading is dropped after the
      // write timeout.
      c.active_changed.wait_for(lock, std::chrono::seconds(c.options.limits.write_timeout_s + 1),
                                [&] { return c.active_responses == 0; });
    }
  }
  if (model && model->engine) model->engine->drain();
  stop();
}

void Server::stop() {
  Core& c = *core_;
  c.ready = false;
  c.http.stop();
  if (c.listener.joinable()) c.listener.join();
}

}  // namespace day0
