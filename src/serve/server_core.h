// Server::Core: the state the route handlers share (server.cpp: lifecycle, auth, plain routes;
// generate_routes.cpp: completions and chat). Internal to serve/.
#pragma once

#include <httplib.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>

#include "serve/api_error.h"
#include "serve/connection_pool.h"
#include "serve/response_common.h"
#include "serve/server.h"

namespace day0 {

// httplib::Server with access to its listening socket: the library listens with a compiled-in backlog of 5,
// which a burst of clients overflows (their connects then stall on SYN retries); we raise it after binding.
class HttpServer : public httplib::Server {
 public:
  int listening_socket() const { return svr_sock_; }
};

struct Server::Core {
  ServerOptions options;
  ServerMetrics metrics;
  HttpServer http;
  std::thread listener;
  int port = -1;

  std::mutex model_mutex;
  std::shared_ptr<const ServedModel> model;  // null while loading
  std::atomic<bool> ready{false}, draining{false};

  // Admitted generation requests (engine ids), so that the drain deadline can abort what is left, and a count
  // of generation responses still being written.
  std::mutex active_mutex;
  std::condition_variable active_changed;
  std::set<RequestId> active_ids;
  int active_responses = 0;

  std::mutex rng_mutex;
  std::mt19937_64 rng{std::random_device{}()};

  std::shared_ptr<const ServedModel> served() {
    std::lock_guard<std::mutex> lock(model_mutex);
    return model;
  }
  std::string new_response_id(const char* prefix) {
    std::lock_guard<std::mutex> lock(rng_mutex);
    const std::uint64_t hi = rng(), lo = rng();
    return response_id(prefix, hi, lo);
  }
};

// Counts one generation response from admission to its last byte (drain waits for all of them) and registers
// its engine request for the drain deadline.
class ActiveResponse {
 public:
  explicit ActiveResponse(Server::Core& core) : core_(core) {
    std::lock_guard<std::mutex> lock(core_.active_mutex);
    core_.active_responses += 1;
  }
  ~ActiveResponse() {
    std::lock_guard<std::mutex> lock(core_.active_mutex);
    if (registered_) core_.active_ids.erase(id_);
    core_.active_responses -= 1;
    core_.active_changed.notify_all();
  }
  void set_request(RequestId id) {
    std::lock_guard<std::mutex> lock(core_.active_mutex);
    core_.active_ids.insert(id);
    id_ = id;
    registered_ = true;
  }
  ActiveResponse(const ActiveResponse&) = delete;
  ActiveResponse& operator=(const ActiveResponse&) = delete;

 private:
  Server::Core& core_;
  RequestId id_ = 0;
  bool registered_ = false;
};

// An OpenAI error object as the response (Retry-After on 429 and 503).
void send_error(const Server::Core& core, httplib::Response& res, const ApiError& error);

// POST /v1/completions and /v1/chat/completions (generate_routes.cpp).
void handle_completions(Server::Core& core, const httplib::Request& req, httplib::Response& res);
void handle_chat_completions(Server::Core& core, const httplib::Request& req, httplib::Response& res);

}  // namespace day0
