// A `day0 synth` checkpoint is servable: its synthetic tokenizer covers every id the random head emits, so
// completions, whole and streamed, come back as text (the tiny gpt-oss config, its vocabulary raised to 1,024 with an
// EOS id, on the CPU).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "serve/server_fixture.h"
#include "test_util/run_day0.h"
#include "test_util/temp_dir.h"

namespace day0::serve_test {
namespace {

TEST(ServerSynth, serves_a_synthetic_checkpoint_through_its_synthetic_tokenizer) {
  testing_util::TempDir tmp;
  std::ifstream in(std::string(D0_TEST_DATA) + "/gpt_oss_tiny/config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  config["vocab_size"] = 1024;
  config["eos_token_id"] = 1000;
  std::ofstream(tmp.file("config.json")) << config.dump();
  const std::string dir = tmp.file("model");
  const auto synth = testing_util::run_day0({"synth", tmp.file("config.json"), dir, "--seed", "5"});
  ASSERT_EQ(synth.exit_code, 0) << synth.what;
  ASSERT_TRUE(std::filesystem::exists(std::filesystem::path(dir) / "tokenizer.json"));

  TestServerConfig c;
  c.model_dir = dir;
  c.kv_tokens = 4096;
  auto server = TestServer::start(c);
  ASSERT_TRUE(server);
  auto client = server->client();
  // Random weights pick ids all over the 1,024: each must decode. ignore_eos keeps the length fixed.
  const std::string body = R"({"prompt": "def parse args(argv):", "max_tokens": 24, "temperature": 0, "ignore_eos": true})";
  const auto r = post_json(client, "/v1/completions", body);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const auto j = nlohmann::json::parse(r->body);
  EXPECT_EQ(j["usage"]["completion_tokens"], 24);
  EXPECT_GT(j["usage"]["prompt_tokens"], 0);
  const std::string text = j["choices"][0]["text"].get<std::string>();
  EXPECT_FALSE(text.empty());

  const auto streamed = post_streaming(server->port(), "/v1/completions",
                                       R"({"prompt": "def parse args(argv):", "max_tokens": 24, "temperature": 0,
                                           "ignore_eos": true, "stream": true})");
  ASSERT_TRUE(streamed.completed) << streamed.error;
  EXPECT_EQ(streamed.status, 200);
  EXPECT_EQ(stream_text(streamed.body), text);  // greedy: the same tokens, streamed
  EXPECT_TRUE(wait_idle(server->port()));
}

}  // namespace
}  // namespace day0::serve_test
