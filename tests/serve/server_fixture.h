// Shared by the HTTP server tests: an in-process server on the bundled model (models/pycoder-tiny, CPU) on an
// ephemeral port, and client helpers: JSON posts, streamed posts (SSE events as they arrive, or cancelled
// after the first one), /metrics samples, and the idle invariants (nothing running or queued, no KV block held).
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "serve/deployment.h"
#include "serve/server.h"

namespace day0::serve_test {

inline const std::string kBundledModel = std::string(D0_TEST_DATA) + "/../../models/pycoder-tiny";
// A chat template for the bundled model (it ships none): turns read as Python comments.
inline const std::string kChatTemplateFile = std::string(D0_TEST_DATA) + "/chat_templates/pycoder_comments.jinja";

struct TestServerConfig {
  std::string model_dir = kBundledModel;
  int max_running = 64;
  int max_waiting = 256;
  std::int64_t max_batch_tokens = 512;
  std::int64_t kv_tokens = 16384;
  std::int64_t max_model_len = 0;  // 0: the model's 1024
  bool prefix_caching = true;
  bool chat_template = false;  // serve kChatTemplateFile
  std::string api_key;
  ServerLimits limits;
};

class TestServer {
 public:
  static std::unique_ptr<TestServer> start(const TestServerConfig& c = {}) {
    auto t = std::unique_ptr<TestServer>(new TestServer());
    DeploymentOptions d;
    d.dir = c.model_dir;
    d.load.max_tokens = c.max_model_len;
    d.load.max_step_tokens = c.max_batch_tokens;
    d.load.kv_pool_tokens = c.kv_tokens;
    d.engine.max_batch_tokens = c.max_batch_tokens;
    d.engine.max_running = c.max_running;
    d.engine.max_waiting = c.max_waiting;
    d.engine.prefix_caching = c.prefix_caching;
    if (c.chat_template) d.chat_template_file = kChatTemplateFile;
    auto deployment = Deployment::open(d);
    EXPECT_TRUE(deployment.ok()) << deployment.error().message;
    if (!deployment.ok()) return nullptr;
    t->deployment = std::move(*deployment);
    ServerOptions so;
    so.host = "127.0.0.1";
    so.port = 0;
    so.api_key = c.api_key;
    so.limits = c.limits;
    auto server = Server::start(so);
    EXPECT_TRUE(server.ok()) << server.error().message;
    if (!server.ok()) return nullptr;
    t->server = std::move(*server);
    t->server->attach(t->deployment->served());
    const Status warm = t->server->warm_up(std::chrono::seconds(60));
    EXPECT_TRUE(warm.ok()) << warm.error().message;
    return t;
  }
  ~TestServer() {
    if (server) server->stop();  // before the engine it points at
  }

  httplib::Client client(int timeout_s = 60) const {
    httplib::Client c("127.0.0.1", server->port());
    c.set_read_timeout(timeout_s, 0);
    c.set_write_timeout(timeout_s, 0);
    c.set_connection_timeout(5, 0);
    return c;
  }
  int port() const { return server->port(); }

  std::unique_ptr<Deployment> deployment;  // declared first: destroyed after the server
  std::unique_ptr<Server> server;

 private:
  TestServer() = default;
};

inline httplib::Result post_json(httplib::Client& c, const std::string& path, const std::string& body,
                                 const httplib::Headers& headers = {}) {
  return c.Post(path, headers, body, "application/json");
}

// The "data: ..." payloads of an SSE body, in order ("[DONE]" included).
inline std::vector<std::string> sse_data(const std::string& body) {
  std::vector<std::string> out;
  std::istringstream in(body);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("data: ", 0) == 0) out.push_back(line.substr(6));
  return out;
}

// The text of a completions or chat stream: choices[0].text or .delta.content of every chunk.
inline std::string stream_text(const std::string& body) {
  std::string text;
  for (const std::string& d : sse_data(body)) {
    if (d == "[DONE]") break;
    const auto j = nlohmann::json::parse(d, nullptr, false);
    if (!j.is_object() || !j.contains("choices") || j["choices"].empty()) continue;
    const auto& c = j["choices"][0];
    if (c.contains("text") && c["text"].is_string()) text += c["text"].get<std::string>();
    if (c.contains("delta") && c["delta"].contains("content") && c["delta"]["content"].is_string())
      text += c["delta"]["content"].get<std::string>();
  }
  return text;
}

struct Streamed {
  int status = 0;
  std::string body;
  bool completed = false;  // the whole response arrived
  std::string error;       // why not
};

// POSTs `body` and reads the response as it streams. The client drops the connection (goes away mid-stream)
// once `cancel_after_bytes` (> 0) arrived, or at the first data after `*cancel` turned true.
inline Streamed post_streaming(int port, const std::string& path, const std::string& body,
                               std::size_t cancel_after_bytes = 0, const std::atomic<bool>* cancel = nullptr) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(120, 0);
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.body = body;
  req.set_header("Content-Type", "application/json");
  Streamed s;
  req.content_receiver = [&](const char* data, std::size_t n, std::uint64_t, std::uint64_t) {
    s.body.append(data, n);
    if (cancel != nullptr && *cancel) return false;
    return cancel_after_bytes == 0 || s.body.size() < cancel_after_bytes;
  };
  httplib::Result r = c.send(req);
  if (r) {
    s.status = r->status;
    s.completed = true;
    if (s.body.empty()) s.body = r->body;
  } else {
    s.error = httplib::to_string(r.error());
  }
  return s;
}

// One sample of /metrics (name with labels, exactly as exposed), or NaN when absent.
inline double metric(int port, const std::string& sample) {
  httplib::Client c("127.0.0.1", port);
  auto r = c.Get("/metrics");
  if (!r || r->status != 200) return std::nan("");
  std::istringstream in(r->body);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(sample + " ", 0) == 0) return std::stod(line.substr(sample.size() + 1));
  return std::nan("");
}

// Polls until nothing runs or waits and no KV block is held (RELIABILITY.md's global invariants), or times out.
inline bool wait_idle(int port, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (metric(port, "day0_requests_running") == 0 && metric(port, "day0_requests_waiting") == 0 &&
        metric(port, "day0_kv_blocks_used") == 0)
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// Polls /metrics until `sample` equals `value`, or times out; a failure says what it read last (NaN: absent or
// unreadable), so a rare timeout in CI tells a request that never started from one that came and went unseen.
inline ::testing::AssertionResult wait_metric(int port, const std::string& sample, double value,
                                              std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  double last = NAN;
  while (std::chrono::steady_clock::now() < deadline) {
    if ((last = metric(port, sample)) == value) return ::testing::AssertionSuccess();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return ::testing::AssertionFailure() << sample << " did not read " << value << " within " << timeout.count()
                                       << " ms; last read " << last;
}

// Polls /metrics until `sample` is at least `value`, or times out: for counters the server bumps after the
// response has gone out (the HTTP request counter is counted by the logger, after the client may have read it).
inline ::testing::AssertionResult wait_metric_at_least(int port, const std::string& sample, double value,
                                                       std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  double last = NAN;
  while (std::chrono::steady_clock::now() < deadline) {
    if ((last = metric(port, sample)) >= value) return ::testing::AssertionSuccess();  // NaN compares false
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return ::testing::AssertionFailure() << sample << " did not reach " << value << " within " << timeout.count()
                                       << " ms; last read " << last;
}

// A client that sends one raw request and can vanish at any moment (no HTTP library in between).
class RawClient {
 public:
  RawClient(int port, const std::string& path, const std::string& json_body) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ADD_FAILURE() << "connect to port " << port << " failed";
      return;
    }
    const std::string request = "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
                                "Content-Length: " + std::to_string(json_body.size()) + "\r\n\r\n" + json_body;
    EXPECT_EQ(::send(fd_, request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
  }
  ~RawClient() { close(); }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

// The OpenAI error object of a response: {"error": {message, type, param, code}} and nothing else.
inline nlohmann::json error_of(const httplib::Result& r) {
  if (!r) return nullptr;
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
  const auto j = nlohmann::json::parse(r->body, nullptr, false);
  if (!j.is_object() || !j.contains("error")) {
    ADD_FAILURE() << "not an OpenAI error object: " << r->body;
    return nullptr;
  }
  const auto& e = j["error"];
  EXPECT_EQ(j.size(), 1u);
  EXPECT_EQ(e.size(), 4u) << r->body;
  EXPECT_TRUE(e["message"].is_string() && !e["message"].get<std::string>().empty()) << r->body;
  EXPECT_TRUE(e["type"].is_string()) << r->body;
  EXPECT_TRUE(e["param"].is_string() || e["param"].is_null()) << r->body;
  EXPECT_TRUE(e["code"].is_string() || e["code"].is_null()) << r->body;
  return e;
}

}  // namespace day0::serve_test
