// Server: the OpenAI-compatible HTTP endpoint over cpp-httplib. It listens as soon as it starts (/health
// answers, /ready says 503 while the model loads), generates once a model is attached, and is ready only after
// a warm-up generation ran through the engine (RELIABILITY.md H1). Shutdown drains: readiness and new requests
// turn 503, running requests finish (or are aborted at the drain deadline), then the listener closes (S1).
//
// Routes: POST /v1/completions, POST /v1/chat/completions, GET /v1/models, GET /metrics (Prometheus text),
// GET /health and /health/live (alive), GET /ready and /health/ready. With an API key every route except
// the health, readiness and metrics ones needs it (A2: the route table says which are public).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/engine.h"
#include "serve/metrics.h"
#include "serve/protocol_config.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace day0 {

struct ServerLimits {
  std::size_t max_body_bytes = 8u << 20;  // larger bodies get 413 before they are read
  int max_connections = 256;              // connections served at once, one thread each (a stream holds one)
  int max_pending_connections = 64;       // accepted, waiting for a thread; beyond, accept() waits
  int read_timeout_s = 10;                // a client that stops sending its request is dropped
  int write_timeout_s = 10;               // a client that stops reading its response is dropped (and aborted)
  int keep_alive_timeout_s = 5;
  int retry_after_s = 1;                  // Retry-After of 429 and 503 answers
  int listen_backlog = 1024;              // connections the kernel holds before accept()
};

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;      // 0: any free port (tests); Server::port() tells which
  std::string api_key;  // empty: no authentication
  ServerLimits limits;
  // How often a connection waiting for tokens checks that its client is still there.
  std::chrono::milliseconds client_poll{20};
};

// What the generation routes serve, once loaded. The engine, tokenizer and template must outlive the Server.
struct ServedModel {
  ProtocolConfig protocol;  // served names, max_model_len, vocab_size, request limits
  Engine* engine = nullptr;
  const Tokenizer* tokenizer = nullptr;
  const ChatTemplate* chat_template = nullptr;  // null: /v1/chat/completions answers 400
  std::vector<std::int32_t> eos_token_ids;      // as given to the engine
  std::int64_t kv_pool_tokens = 0;              // a request needing more (prompt + max_tokens) is refused (B3)
};

// One entry of the route table (RELIABILITY.md A2).
struct Route {
  std::string method;
  std::string path;
  bool is_public;  // answered without the API key
};

class Server {
 public:
  // Binds host:port and serves on a background thread. Errors: the address cannot be bound.
  static Result<std::unique_ptr<Server>> start(const ServerOptions& options);
  ~Server();  // stops at once (no drain): unfinished requests are aborted

  int port() const;
  const std::string& host() const;

  // Generation routes work from now on. Call once.
  void attach(ServedModel model);
  // A 1-token greedy generation through the attached engine, then, where prompt_tokens > 1, one of that many prompt
  // tokens and 2 out (a prefill as long as clients send loads the kernels and GEMM plans a decode step does not use;
  // the first 512-token prefill of a 20b model took 30.6 ms where a warm one takes 12.4). On success the server is
  // ready.
  Status warm_up(std::chrono::milliseconds timeout, std::int64_t prompt_tokens = 1);
  bool ready() const;

  // Readiness and new requests turn 503; requests already admitted run to their end, those still running
  // after `timeout` are aborted (their streams get an error event). Then the listener closes.
  void drain_and_stop(std::chrono::milliseconds timeout);
  // Closes the listener now; in-flight responses end when their connections do.
  void stop();

  const ServerMetrics& metrics() const;
  static std::vector<Route> routes();

  struct Core;  // server_core.h

 private:
  explicit Server(std::unique_ptr<Core> core);
  std::unique_ptr<Core> core_;
};

}  // namespace day0
