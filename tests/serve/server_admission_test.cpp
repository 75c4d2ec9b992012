// Who gets in and who gets out (RELIABILITY.md A1, A2, B1, E3, C1, C2, S1): the API key on every non-public
// route; a full queue answered 429 with Retry-After (also for streams: a status, not an in-band error); a client
// that disconnects mid-stream, while its non-streamed request runs, or while queued is aborted and its KV blocks
// return to the pool without disturbing the others, as bad requests do not; drain lets running requests finish,
// aborts them at its deadline, and refuses new ones.
#include <gtest/gtest.h>

#include "serve/server_fixture.h"

namespace day0::serve_test {
namespace {

const std::string kGood = R"({"prompt": "def f(x):", "max_tokens": 2, "temperature": 0})";

// A greedy stream of `n` tokens that never ends early.
std::string long_stream(int n) {
  return R"({"prompt": "import os\n", "temperature": 0, "ignore_eos": true, "stream": true, "max_tokens": )" +
         std::to_string(n) + "}";
}

void expect_good_request_answered(const TestServer& server) {
  httplib::Client c = server.client();
  const auto r = post_json(c, "/v1/completions", kGood);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

TEST(ServerAuth, requests_without_the_right_key_get_401_and_the_right_key_passes) {
  TestServerConfig config;
  config.api_key = "sk-test-123";
  auto server = TestServer::start(config);
  ASSERT_NE(server, nullptr);
  httplib::Client c = server->client();
  const auto none = post_json(c, "/v1/completions", kGood);
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  EXPECT_EQ(error_of(none)["type"], "authentication_error");
  EXPECT_EQ(none->get_header_value("WWW-Authenticate"), "Bearer");
  EXPECT_EQ(none->body.find("sk-test-123"), std::string::npos);
  for (const std::string bad : {"Bearer sk-test-12", "Bearer sk-test-1234", "Bearer SK-TEST-123", "sk-test-123",
                                "Basic sk-test-123"}) {
    const auto r = post_json(c, "/v1/completions", kGood, {{"Authorization", bad}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401) << bad;
  }
  const auto bearer = post_json(c, "/v1/completions", kGood, {{"Authorization", "Bearer sk-test-123"}});
  ASSERT_TRUE(bearer);
  EXPECT_EQ(bearer->status, 200);
  const auto header = post_json(c, "/v1/completions", kGood, {{"X-Api-Key", "sk-test-123"}});
  ASSERT_TRUE(header);
  EXPECT_EQ(header->status, 200);
}

// A2: every route of the table is either public or refused without the key; a new route must be classified.
TEST(ServerAuth, every_route_is_public_or_needs_the_key) {
  TestServerConfig config;
  config.api_key = "sk-test-123";
  auto server = TestServer::start(config);
  ASSERT_NE(server, nullptr);
  httplib::Client c = server->client();
  for (const Route& route : Server::routes()) {
    const auto r = route.method == "GET" ? c.Get(route.path) : c.Post(route.path, kGood, "application/json");
    ASSERT_TRUE(r) << route.path;
    if (route.is_public) {
      EXPECT_NE(r->status, 401) << route.path;
    } else {
      EXPECT_EQ(r->status, 401) << route.path;
    }
  }
  std::vector<std::string> public_paths;
  for (const Route& route : Server::routes())
    if (route.is_public) public_paths.push_back(route.path);
  EXPECT_EQ(public_paths, (std::vector<std::string>{"/metrics", "/health", "/health/live", "/ready", "/health/ready"}));
}

// B1 and E3: one running, one queued; the next request is refused at once with 429 and Retry-After, streamed or not.
TEST(ServerAdmission, full_queue_is_429_with_retry_after_even_for_streams) {
  TestServerConfig config;
  config.max_running = 1;
  config.max_waiting = 1;
  auto server = TestServer::start(config);
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  std::atomic<bool> cancel{false};
  Streamed first;  // what the running request got, for a failure to report
  std::thread running([&] { first = post_streaming(port, "/v1/completions", long_stream(600), 0, &cancel); });
  if (const auto seen = wait_metric(port, "day0_requests_running", 1); !seen) {
    cancel = true;
    running.join();
    FAIL() << seen.message() << "; the request got status " << first.status << " " << first.error << ": "
           << first.body.substr(0, 300);
  }
  std::thread queued([&] { post_streaming(port, "/v1/completions", long_stream(600), 0, &cancel); });
  ASSERT_TRUE(wait_metric(port, "day0_requests_waiting", 1));

  httplib::Client c = server->client();
  const auto refused = post_json(c, "/v1/completions", kGood);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 429) << refused->body;
  EXPECT_EQ(refused->get_header_value("Retry-After"), "1");
  EXPECT_EQ(error_of(refused)["type"], "rate_limit_exceeded");
  // "At once": the refusal came while the queued request still waits, so it never waited for a slot to free.
  EXPECT_TRUE(wait_metric(port, "day0_requests_waiting", 1));
  const Streamed stream = post_streaming(port, "/v1/completions", long_stream(4));
  EXPECT_EQ(stream.status, 429) << stream.body;

  cancel = true;
  running.join();
  queued.join();
  EXPECT_TRUE(wait_idle(port));
  expect_good_request_answered(*server);
}

// C1: a client gone mid-stream is aborted within a few steps; its blocks return to the pool.
TEST(ServerDisconnect, client_gone_mid_stream_aborts_and_frees_its_blocks) {
  auto server = TestServer::start();
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  const double disconnects = metric(port, "day0_client_disconnects_total");
  const double tokens = metric(port, "day0_generation_tokens_total");
  const Streamed s = post_streaming(port, "/v1/completions", long_stream(800), /*cancel_after_bytes=*/600);
  EXPECT_GE(s.body.size(), 600u);
  EXPECT_TRUE(wait_idle(port, std::chrono::seconds(3)));
  EXPECT_EQ(metric(port, "day0_client_disconnects_total"), disconnects + 1);
  EXPECT_LT(metric(port, "day0_generation_tokens_total") - tokens, 400);  // stopped well before 800
  expect_good_request_answered(*server);
}

TEST(ServerDisconnect, client_gone_during_a_non_streamed_request_aborts_it) {
  auto server = TestServer::start();
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  RawClient client(port, "/v1/completions",
                   R"({"prompt": "import os\n", "temperature": 0, "ignore_eos": true, "max_tokens": 800})");
  ASSERT_TRUE(wait_metric(port, "day0_requests_running", 1));
  client.close();
  EXPECT_TRUE(wait_idle(port, std::chrono::seconds(3)));
  EXPECT_GE(metric(port, "day0_client_disconnects_total"), 1);
  EXPECT_LT(metric(port, "day0_generation_tokens_total"), 400);
  expect_good_request_answered(*server);
}

// C1 while queued, and C2: the running request's output is exactly its solo output.
TEST(ServerDisconnect, client_gone_while_queued_leaves_the_queue_and_the_running_request_unchanged) {
  TestServerConfig config;
  config.max_running = 1;
  auto server = TestServer::start(config);
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  const std::string body = R"({"prompt": "class Stack:", "temperature": 0, "ignore_eos": true, "max_tokens": 60})";
  httplib::Client solo_client = server->client();
  const auto solo = post_json(solo_client, "/v1/completions", body);
  ASSERT_TRUE(solo);
  ASSERT_EQ(solo->status, 200);

  std::string running_text;
  std::thread running([&] {
    httplib::Client c = server->client();
    const auto r = post_json(c, "/v1/completions", body);
    if (r) running_text = nlohmann::json::parse(r->body)["choices"][0]["text"];
  });
  ASSERT_TRUE(wait_metric(port, "day0_requests_running", 1));
  RawClient queued(port, "/v1/completions", R"({"prompt": "x", "max_tokens": 5})");
  ASSERT_TRUE(wait_metric(port, "day0_requests_waiting", 1));
  queued.close();
  EXPECT_TRUE(wait_metric(port, "day0_requests_waiting", 0, std::chrono::seconds(2)));
  running.join();
  EXPECT_EQ(running_text, nlohmann::json::parse(solo->body)["choices"][0]["text"].get<std::string>());
  EXPECT_TRUE(wait_idle(port));
}

// Anti-pattern 1: a bad request is refused alone; a stream running meanwhile gives exactly its solo output.
TEST(ServerIsolation, bad_requests_alongside_a_running_stream_leave_it_unchanged) {
  auto server = TestServer::start();
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  const Streamed solo = post_streaming(port, "/v1/completions", long_stream(40));
  Streamed during;
  std::thread client([&] { during = post_streaming(port, "/v1/completions", long_stream(40)); });
  ASSERT_TRUE(wait_metric(port, "day0_requests_running", 1));
  httplib::Client c = server->client();
  for (const std::string bad : {R"({"prompt": )", R"({"prompt": "x", "temperature": -3})", R"({"prompt": [99999999]})",
                                R"({"prompt": "x", "max_tokens": 100000})", R"({"model": "nope", "prompt": "x"})"}) {
    const auto r = post_json(c, "/v1/completions", bad);
    ASSERT_TRUE(r);
    EXPECT_GE(r->status, 400) << bad;
  }
  client.join();
  EXPECT_EQ(during.status, 200);
  EXPECT_EQ(stream_text(during.body), stream_text(solo.body));
  EXPECT_TRUE(wait_idle(port));
}

// S1: drain refuses new work and readiness, lets the running stream finish normally, then stops.
TEST(ServerDrain, running_streams_finish_and_new_requests_get_503) {
  auto server = TestServer::start();
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  Streamed stream;
  std::thread client([&] { stream = post_streaming(port, "/v1/completions", long_stream(60)); });
  ASSERT_TRUE(wait_metric(port, "day0_requests_running", 1));
  std::thread drain([&] { server->server->drain_and_stop(std::chrono::seconds(30)); });
  httplib::Client c = server->client();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  httplib::Result ready = c.Get("/ready");
  while ((!ready || ready->status == 200) && std::chrono::steady_clock::now() < deadline) ready = c.Get("/ready");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 503);
  const auto refused = post_json(c, "/v1/completions", kGood);
  if (refused) {  // or the listener already closed
    EXPECT_EQ(refused->status, 503);
    EXPECT_EQ(refused->get_header_value("Retry-After"), "1");
  }
  client.join();
  drain.join();
  EXPECT_EQ(stream.status, 200);
  const auto events = sse_data(stream.body);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.back(), "[DONE]");
  EXPECT_EQ(nlohmann::json::parse(events[events.size() - 2])["choices"][0]["finish_reason"], "length");
  EXPECT_FALSE(c.Get("/health"));  // stopped listening
}

TEST(ServerDrain, streams_still_running_at_the_deadline_end_with_an_error_event) {
  auto server = TestServer::start();
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  Streamed stream;
  std::thread client([&] { stream = post_streaming(port, "/v1/completions", long_stream(900)); });
  ASSERT_TRUE(wait_metric(port, "day0_requests_running", 1));
  const auto t0 = std::chrono::steady_clock::now();
  server->server->drain_and_stop(std::chrono::milliseconds(200));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  client.join();
  const auto events = sse_data(stream.body);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.back(), "[DONE]");
  const auto error = nlohmann::json::parse(events[events.size() - 2]);
  EXPECT_EQ(error["error"]["type"], "unavailable_error");
}

}  // namespace
}  // namespace day0::serve_test
