// Continuous batching and prefix caching seen through HTTP: 64 concurrent greedy streams all complete, each
// equals the same request run alone, and /metrics shows they shared steps; a second request sharing a long prefix
// reports prefix-cache hits and gives the same output as a server without the cache (RELIABILITY.md D3, D4).
#include <gtest/gtest.h>

#include <map>

#include "serve/server_fixture.h"

namespace day0::serve_test {
namespace {

std::string stream_request(const std::string& prompt, int max_tokens) {
  nlohmann::json j = {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}, {"ignore_eos", true},
                      {"stream", true}};
  return j.dump();
}

TEST(ServerBatching, sixty_four_concurrent_greedy_streams_complete_batched_and_each_equals_its_solo_run) {
  auto server = TestServer::start();
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  const std::vector<std::string> prompts = {"def fibonacci(n):", "import os\n",        "class Stack:",
                                            "for i in range(10):", "def read_lines(path):", "x = [",
                                            "# utilities\n",     "with open(path) as f:"};
  constexpr int kTokens = 12, kClients = 64;
  std::map<std::string, std::string> solo;
  for (const std::string& p : prompts) {
    const Streamed s = post_streaming(port, "/v1/completions", stream_request(p, kTokens));
    ASSERT_EQ(s.status, 200) << s.body;
    solo[p] = stream_text(s.body);
  }
  EXPECT_EQ(metric(port, "day0_engine_max_step_sequences"), 1);  // alone so far

  std::vector<Streamed> results(kClients);
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i)
    clients.emplace_back([&, i] {
      results[i] = post_streaming(port, "/v1/completions", stream_request(prompts[i % prompts.size()], kTokens));
    });
  for (auto& t : clients) t.join();
  for (int i = 0; i < kClients; ++i) {
    const Streamed& s = results[i];
    ASSERT_TRUE(s.completed) << "client " << i << ": " << s.error << " after " << s.body.size() << " bytes";
    ASSERT_EQ(s.status, 200) << s.body;
    const auto events = sse_data(s.body);
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events.back(), "[DONE]") << "client " << i;
    EXPECT_EQ(stream_text(s.body), solo[prompts[i % prompts.size()]]) << "client " << i;
  }
  const double batched = metric(port, "day0_engine_max_step_sequences");
  EXPECT_GT(batched, 1);
  std::printf("64 concurrent streams: at most %.0f sequences in one step\n", batched);
  EXPECT_TRUE(wait_idle(port));
}

TEST(ServerPrefixCache, a_request_sharing_a_long_prefix_hits_the_cache_and_gives_the_uncached_output) {
  std::string prefix;
  for (int i = 0; i < 24; ++i)
    prefix += "def helper_" + std::to_string(i) + "(value):\n    return value * " + std::to_string(i) + "\n\n";
  const std::string first = prefix + "def main():\n", second = prefix + "class Main:\n";
  const auto run = [&](TestServer& server, const std::string& prompt) {
    httplib::Client c = server.client();
    nlohmann::json j = {{"prompt", prompt}, {"max_tokens", 12}, {"temperature", 0}, {"ignore_eos", true}};
    const auto r = post_json(c, "/v1/completions", j.dump());
    EXPECT_TRUE(r && r->status == 200);
    return r ? nlohmann::json::parse(r->body) : nlohmann::json();
  };

  TestServerConfig uncached_config;
  uncached_config.prefix_caching = false;
  auto uncached = TestServer::start(uncached_config);
  ASSERT_NE(uncached, nullptr);
  const nlohmann::json reference = run(*uncached, second);
  EXPECT_EQ(metric(uncached->port(), "day0_prefix_cache_hit_tokens_total"), 0);

  auto cached = TestServer::start();
  ASSERT_NE(cached, nullptr);
  const int port = cached->port();
  run(*cached, first);
  const double hits_before = metric(port, "day0_prefix_cache_hit_tokens_total");
  const nlohmann::json again = run(*cached, second);
  const double hits = metric(port, "day0_prefix_cache_hit_tokens_total") - hits_before;
  const int prompt_tokens = again["usage"]["prompt_tokens"];
  EXPECT_GE(prompt_tokens, 300);
  EXPECT_GE(hits, 256) << "of " << prompt_tokens << " prompt tokens";
  EXPECT_GT(metric(port, "day0_prefix_cache_hit_rate"), 0);
  EXPECT_EQ(again["choices"][0]["text"], reference["choices"][0]["text"]);
  EXPECT_TRUE(wait_idle(port));
}

}  // namespace
}  // namespace day0::serve_test
