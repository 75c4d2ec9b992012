// The engine on the CUDA backend with step graphs: greedy requests batched together, their decode steps launched
// ahead (Executor::queue_decode: each queued before the last one's picks are read, fed them on the device), each get
// the tokens of their solo greedy run on the same backend, and every block comes back. Skipped visibly without a GPU.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/engine_test_util.h"
#include "model/greedy.h"
#include "model/load.h"
#include "ops/cuda/cuda_test_util.h"

namespace day0 {
namespace {

const std::string kModel = std::string(D0_TEST_DATA) + "/gpt_oss_tiny";

LoadOptions cuda_options() {
  LoadOptions o;
  o.backend = "cuda";
  o.max_tokens = 64;
  o.kv_pool_tokens = 512;
  o.block_size = 4;
  o.graph_max_batch = 8;
  o.backend_options.memory_fraction = 0.2;
  return o;
}

TEST(CudaEngine, greedy_requests_launched_ahead_get_their_solo_tokens) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  constexpr int kNew = 12;
  std::vector<std::vector<std::int32_t>> prompts;
  for (int n : {5, 23, 1, 17}) {
    std::vector<std::int32_t> p(n);
    for (int i = 0; i < n; ++i) p[i] = (i * 31 + n * 17 + 3) % 256;
    prompts.push_back(std::move(p));
  }
  std::vector<std::vector<std::int32_t>> solo;
  for (const auto& p : prompts) {
    auto m = load_model(kModel, cuda_options());
    ASSERT_TRUE(m.ok()) << m.error().message;
    auto r = greedy_generate(*m->executor, p, kNew);
    ASSERT_TRUE(r.ok()) << r.error().message;
    solo.push_back(r->tokens);
  }
  auto m = load_model(kModel, cuda_options());
  ASSERT_TRUE(m.ok()) << m.error().message;
  EngineConfig cfg;
  cfg.max_batch_tokens = 64;
  auto engine = Engine::create(*m->executor, cfg);
  ASSERT_TRUE(engine.ok()) << engine.error().message;
  enginetest::Collector c;
  for (size_t i = 0; i < prompts.size(); ++i)
    ASSERT_TRUE((*engine)->submit(enginetest::greedy_request(prompts[i], kNew), c.sink(int(i))).ok());
  c.wait(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(c.tokens_[int(i)], solo[i]) << "request " << i;
    EXPECT_TRUE(c.final_[int(i)].error.empty()) << c.final_[int(i)].error;
  }
  (*engine)->drain();
  const EngineStats st = (*engine)->stats();
  EXPECT_GT(st.ahead_steps, 0) << "no decode step was queued ahead";
  EXPECT_EQ(st.kv_blocks_used, 0);
}

}  // namespace
}  // namespace day0
