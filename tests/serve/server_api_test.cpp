// The OpenAI endpoints over HTTP on the bundled model: health and readiness, the model list, completions and chat
// (whole and streamed, which give the same text), usage counts, stop strings (which end the engine request too),
// logprobs, and greedy repeatability (RELIABILITY.md D1, D4, H1).
#include <gtest/gtest.h>

#include "serve/server_fixture.h"

namespace day0::serve_test {
namespace {

class ServerApi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    TestServerConfig c;
    c.chat_template = true;
    server_ = TestServer::start(c).release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(server_, nullptr); }
  void TearDown() override { EXPECT_TRUE(wait_idle(server_->port())); }

  nlohmann::json post_ok(const std::string& path, const std::string& body) {
    httplib::Client c = server_->client();
    const auto r = post_json(c, path, body);
    EXPECT_TRUE(r);
    if (!r) return nullptr;
    EXPECT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
    return nlohmann::json::parse(r->body, nullptr, false);
  }

  static TestServer* server_;
};

TestServer* ServerApi::server_ = nullptr;

TEST(ServerLifecycle, alive_at_once_ready_only_after_a_model_is_attached_and_warmed_up) {
  ServerOptions o;
  o.port = 0;
  auto server = Server::start(o);
  ASSERT_TRUE(server.ok()) << server.error().message;
  httplib::Client c("127.0.0.1", (*server)->port());
  auto health = c.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto ready = c.Get("/ready");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 503);
  EXPECT_EQ(ready->get_header_value("Retry-After"), "1");
  EXPECT_EQ(error_of(ready)["type"], "unavailable_error");
  auto gen = c.Post("/v1/completions", R"({"prompt": "x"})", "application/json");
  ASSERT_TRUE(gen);
  EXPECT_EQ(gen->status, 503);
  EXPECT_FALSE(gen->get_header_value("Retry-After").empty());

  DeploymentOptions d;
  d.dir = kBundledModel;
  d.load.kv_pool_tokens = 4096;
  auto deployment = Deployment::open(d);
  ASSERT_TRUE(deployment.ok()) << deployment.error().message;
  (*server)->attach((*deployment)->served());
  EXPECT_EQ(c.Get("/ready")->status, 503);  // attached, not yet warmed up
  ASSERT_TRUE((*server)->warm_up(std::chrono::seconds(30)).ok());
  EXPECT_EQ(c.Get("/ready")->status, 200);
  EXPECT_EQ(c.Get("/health/ready")->status, 200);
  EXPECT_EQ(c.Get("/health/live")->status, 200);
  (*server)->stop();
}

// The GPU's warm-up (serve.cpp) adds a prefill as long as a step: it runs through the engine (its tokens are the
// engine's), within the model's context however long it is asked to be, and stays out of the client metrics.
TEST(ServerLifecycle, a_warm_up_with_a_long_prompt_prefills_within_the_context_and_counts_no_client_tokens) {
  ServerOptions o;
  o.port = 0;
  auto server = Server::start(o);
  ASSERT_TRUE(server.ok()) << server.error().message;
  DeploymentOptions d;
  d.dir = kBundledModel;
  d.load.kv_pool_tokens = 4096;
  auto deployment = Deployment::open(d);
  ASSERT_TRUE(deployment.ok()) << deployment.error().message;
  const ServedModel served = (*deployment)->served();
  (*server)->attach(served);
  ASSERT_TRUE((*server)->warm_up(std::chrono::seconds(60), 100000).ok());  // clamped to the 1,024-token context
  // The 1-token generation's prefill, then 1,022 prompt tokens and a decode step (a generation's last token is not
  // stepped). The engine publishes a step's counts after it reports the step's tokens, so the last step may not be
  // counted yet.
  const EngineStats stats = served.engine->stats();
  EXPECT_GE(stats.step_tokens, 1 + 1022);
  EXPECT_LE(stats.step_tokens, 1 + 1022 + 1);
  httplib::Client c("127.0.0.1", (*server)->port());
  EXPECT_EQ(c.Get("/ready")->status, 200);
  const auto metrics = c.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("day0_prompt_tokens_total 0"), std::string::npos) << metrics->body;
  EXPECT_NE(metrics->body.find("day0_generation_tokens_total 0"), std::string::npos);
  (*server)->stop();
}

TEST_F(ServerApi, models_lists_the_served_name_with_its_limits) {
  httplib::Client c = server_->client();
  const auto r = c.Get("/v1/models");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  const auto j = nlohmann::json::parse(r->body);
  ASSERT_EQ(j["data"].size(), 1u);
  EXPECT_EQ(j["data"][0]["id"], "pycoder-tiny");
  EXPECT_EQ(j["data"][0]["max_model_len"], 1024);
}

TEST_F(ServerApi, completion_returns_text_finish_reason_and_usage) {
  const auto j = post_ok("/v1/completions", R"({"prompt": "def fibonacci(n):", "max_tokens": 6, "temperature": 0})");
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["model"], "pycoder-tiny");
  EXPECT_TRUE(j["id"].get<std::string>().rfind("cmpl-", 0) == 0);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_FALSE(j["choices"][0]["text"].get<std::string>().empty());
  EXPECT_GT(j["usage"]["prompt_tokens"], 0);
  EXPECT_EQ(j["usage"]["completion_tokens"], 6);
  EXPECT_EQ(j["usage"]["total_tokens"], j["usage"]["prompt_tokens"].get<int>() + 6);
}

TEST_F(ServerApi, greedy_requests_repeat_exactly) {
  const std::string body = R"({"prompt": "class Stack:", "max_tokens": 12, "temperature": 0})";
  const auto a = post_ok("/v1/completions", body), b = post_ok("/v1/completions", body);
  EXPECT_EQ(a["choices"][0]["text"], b["choices"][0]["text"]);
}

TEST_F(ServerApi, seeded_sampling_repeats_exactly) {
  const std::string body = R"({"prompt": "import os\n", "max_tokens": 12, "temperature": 1, "seed": 42})";
  const auto a = post_ok("/v1/completions", body), b = post_ok("/v1/completions", body);
  EXPECT_EQ(a["choices"][0]["text"], b["choices"][0]["text"]);
}

TEST_F(ServerApi, stream_is_sse_ending_in_done_with_usage_and_the_same_text_as_whole) {
  const std::string prompt = R"("prompt": "def read_lines(path):", "max_tokens": 10, "temperature": 0)";
  const auto whole = post_ok("/v1/completions", "{" + prompt + "}");
  const Streamed s = post_streaming(server_->port(), "/v1/completions",
                                    "{" + prompt + R"(, "stream": true, "stream_options": {"include_usage": true}})");
  ASSERT_TRUE(s.completed);
  ASSERT_EQ(s.status, 200) << s.body;
  const auto events = sse_data(s.body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  const auto usage = nlohmann::json::parse(events[events.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 10);
  const auto finish = nlohmann::json::parse(events[events.size() - 3]);
  EXPECT_EQ(finish["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(stream_text(s.body), whole["choices"][0]["text"].get<std::string>());
}

TEST_F(ServerApi, chat_renders_the_template_and_equals_the_completion_of_the_rendered_prompt) {
  const auto chat = post_ok("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "sort a list"}],
      "max_tokens": 8, "temperature": 0})");
  ASSERT_TRUE(chat.is_object());
  EXPECT_EQ(chat["object"], "chat.completion");
  EXPECT_EQ(chat["choices"][0]["message"]["role"], "assistant");
  const auto plain = post_ok("/v1/completions", R"({"prompt": "# user: sort a list\n# assistant:\n",
      "max_tokens": 8, "temperature": 0})");
  EXPECT_EQ(chat["choices"][0]["message"]["content"], plain["choices"][0]["text"]);
  EXPECT_EQ(chat["usage"]["prompt_tokens"], plain["usage"]["prompt_tokens"]);
}

TEST_F(ServerApi, chat_stream_starts_with_the_role_and_matches_whole) {
  const std::string body = R"("messages": [{"role": "user", "content": "read a file"}], "max_tokens": 8,
      "temperature": 0)";
  const auto whole = post_ok("/v1/chat/completions", "{" + body + "}");
  const Streamed s = post_streaming(server_->port(), "/v1/chat/completions", "{" + body + R"(, "stream": true})");
  ASSERT_EQ(s.status, 200);
  const auto events = sse_data(s.body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(nlohmann::json::parse(events[0])["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(events.back(), "[DONE]");
  EXPECT_EQ(stream_text(s.body), whole["choices"][0]["message"]["content"].get<std::string>());
}

TEST_F(ServerApi, stop_string_cuts_the_text_before_it_and_frees_the_sequence) {
  const auto free_run = post_ok("/v1/completions", R"({"prompt": "def f(x):\n", "max_tokens": 24, "temperature": 0})");
  const std::string text = free_run["choices"][0]["text"];
  ASSERT_GE(text.size(), 6u);
  const std::string stop = text.substr(3, 3);  // a stop string the greedy output surely contains
  nlohmann::json req = {{"prompt", "def f(x):\n"}, {"max_tokens", 24}, {"temperature", 0}, {"stop", stop}};
  const auto stopped = post_ok("/v1/completions", req.dump());
  const std::string cut = stopped["choices"][0]["text"];
  EXPECT_EQ(stopped["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(cut, text.substr(0, text.find(stop)));
  EXPECT_LT(stopped["usage"]["completion_tokens"].get<int>(), 24);
}

TEST_F(ServerApi, completion_logprobs_have_the_legacy_shape) {
  const auto j = post_ok("/v1/completions", R"({"prompt": "import", "max_tokens": 3, "temperature": 0, "logprobs": 2})");
  const auto& lp = j["choices"][0]["logprobs"];
  ASSERT_TRUE(lp.is_object()) << j.dump();
  EXPECT_EQ(lp["tokens"].size(), 3u);
  EXPECT_EQ(lp["token_logprobs"].size(), 3u);
  EXPECT_EQ(lp["top_logprobs"].size(), 3u);
  EXPECT_LE(lp["token_logprobs"][0].get<double>(), 0.0);
}

TEST_F(ServerApi, metrics_count_requests_tokens_and_latencies) {
  const double before = metric(server_->port(), "day0_generation_tokens_total");
  post_ok("/v1/completions", R"({"prompt": "x = ", "max_tokens": 4, "temperature": 0, "ignore_eos": true})");
  EXPECT_EQ(metric(server_->port(), "day0_generation_tokens_total"), before + 4);
  // Counted once the response is out, so the client can read /metrics first: wait for it.
  const std::string answered = "day0_requests_total{route=\"/v1/completions\",status=\"200\"}";
  EXPECT_TRUE(wait_metric_at_least(server_->port(), answered, 1));
  EXPECT_GE(metric(server_->port(), "day0_time_to_first_token_seconds_count"), 1);
  EXPECT_GE(metric(server_->port(), "day0_inter_token_latency_seconds_count"), 3);
  EXPECT_EQ(metric(server_->port(), "day0_ready"), 1);
  EXPECT_GT(metric(server_->port(), "day0_kv_blocks_total"), 0);
}

TEST(ServerNoTemplate, chat_on_a_model_without_a_chat_template_is_a_clear_400) {
  auto server = TestServer::start();
  ASSERT_NE(server, nullptr);
  httplib::Client c = server->client();
  const auto r = post_json(c, "/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}]})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  const auto e = error_of(r);
  EXPECT_EQ(e["param"], "messages");
  EXPECT_NE(e["message"].get<std::string>().find("no chat template"), std::string::npos);
}

}  // namespace
}  // namespace day0::serve_test
