// GET /v1/models: OpenAI's list of model objects, with the request limits (RELIABILITY.md V2).
#include "serve/models_response.h"

#include <gtest/gtest.h>

#include "serve_test_util.h"

namespace day0 {
namespace {

TEST(ModelsResponse, lists_each_served_name_as_an_openai_model_object_with_limits) {
  const auto j = models_response(serve_test::test_config(), 1700000000);
  EXPECT_EQ(j["object"], "list");
  ASSERT_EQ(j["data"].size(), 2u);
  const auto& m = j["data"][0];
  EXPECT_EQ(m["id"], "gpt-oss-20b");
  EXPECT_EQ(m["object"], "model");
  EXPECT_EQ(m["created"], 1700000000);
  EXPECT_EQ(m["owned_by"], "day0");
  EXPECT_EQ(m["max_model_len"], 4096);
  EXPECT_EQ(m["limits"]["max_stop_strings"], 16);
  EXPECT_EQ(m["limits"]["max_logprobs"], 20);
  EXPECT_EQ(m["limits"]["temperature"], "[0, 2]");
  EXPECT_EQ(m["limits"]["top_p"], "(0, 1]");
  EXPECT_EQ(j["data"][1]["id"], "default-alias");
}

}  // namespace
}  // namespace day0
