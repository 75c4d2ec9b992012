// `day0 serve` as a process: it prints its address and readiness, answers on the bundled model, drains on SIGTERM
// (the running stream finishes, exit 0), exits at once on a second signal, takes the API key from the
// environment, and fails with one line on a bad model directory (RELIABILITY.md S1, S2, A1).
#include <gtest/gtest.h>

#include "serve/server_fixture.h"
#include "test_util/serve_process.h"

namespace day0 {
namespace {

using serve_test::kBundledModel;
using testing_util::ServeProcess;

const std::vector<std::string> kArgs = {kBundledModel, "--port", "0", "--kv-tokens", "4096"};

std::string stream_body(int max_tokens) {
  return R"({"prompt": "import os\n", "temperature": 0, "ignore_eos": true, "stream": true, "max_tokens": )" +
         std::to_string(max_tokens) + "}";
}

TEST(Day0Serve, prints_its_address_turns_ready_and_drains_a_running_stream_on_sigterm) {
  ServeProcess p(kArgs);
  const int port = p.wait_ready(std::chrono::seconds(60));
  ASSERT_GT(port, 0);
  EXPECT_NE(p.stdout_text().find("listening on http://127.0.0.1:"), std::string::npos);
  httplib::Client c("127.0.0.1", port);
  ASSERT_TRUE(c.Get("/ready"));
  EXPECT_EQ(c.Get("/ready")->status, 200);

  serve_test::Streamed stream;
  std::thread client([&] { stream = serve_test::post_streaming(port, "/v1/completions", stream_body(80)); });
  ASSERT_TRUE(serve_test::wait_metric(port, "day0_requests_running", 1));
  p.signal(SIGTERM);
  client.join();
  EXPECT_EQ(p.wait_exit(std::chrono::seconds(20)), 0) << p.stdout_text() << p.stderr_text();
  EXPECT_EQ(stream.status, 200);
  const auto events = serve_test::sse_data(stream.body);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.back(), "[DONE]");
  EXPECT_EQ(nlohmann::json::parse(events[events.size() - 2])["choices"][0]["finish_reason"], "length");
  EXPECT_NE(p.stdout_text().find("draining"), std::string::npos);
  EXPECT_NE(p.stdout_text().find("drained"), std::string::npos);
}

TEST(Day0Serve, a_second_signal_exits_at_once) {
  ServeProcess p(kArgs);
  const int port = p.wait_ready(std::chrono::seconds(60));
  ASSERT_GT(port, 0);
  std::thread client([&] { serve_test::post_streaming(port, "/v1/completions", stream_body(900)); });
  ASSERT_TRUE(serve_test::wait_metric(port, "day0_requests_running", 1));
  p.signal(SIGTERM);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto t0 = std::chrono::steady_clock::now();
  p.signal(SIGINT);
  EXPECT_EQ(p.wait_exit(std::chrono::seconds(5)), 1);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  client.join();
}

TEST(Day0Serve, api_key_from_the_environment_is_required) {
  ServeProcess p(kArgs, {"DAY0_API_KEY=sk-env-key"});
  const int port = p.wait_ready(std::chrono::seconds(60));
  ASSERT_GT(port, 0);
  httplib::Client c("127.0.0.1", port);
  const std::string body = R"({"prompt": "x", "max_tokens": 1})";
  auto refused = c.Post("/v1/completions", body, "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 401);
  auto ok = c.Post("/v1/completions", {{"Authorization", "Bearer sk-env-key"}}, body, "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(p.stdout_text().find("sk-env-key"), std::string::npos);  // never logged
  p.signal(SIGINT);
  EXPECT_EQ(p.wait_exit(std::chrono::seconds(20)), 0);
}

TEST(Day0Serve, a_directory_without_a_model_fails_with_one_line) {
  testing_util::TempDir empty;
  const auto r = testing_util::run_day0({"serve", empty.str(), "--port", "0"});
  EXPECT_EQ(r.exit_code, 1) << r.what;
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(Day0Serve, a_kv_memory_budget_that_holds_no_block_fails_naming_what_one_block_needs) {
  // pycoder-tiny: 16-token blocks of f32 K and V over its layers need 32,768 bytes.
  const auto r = testing_util::run_day0({"serve", kBundledModel, "--port", "0", "--kv-memory", "1KB"});
  EXPECT_EQ(r.exit_code, 1) << r.what;
  EXPECT_NE(r.err.find("--kv-memory: kv budget of 1000 bytes holds no block; one block of 16 tokens needs 32768"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace day0
