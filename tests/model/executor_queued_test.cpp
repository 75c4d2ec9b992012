// Executor::queue_decode: a chain of decode steps, each queued before the last one's picks are read and fed them on
// the device, gives the picks of the same steps run one at a time with the host passing the tokens on; through step
// graphs (where the steps are really queued) and op by op (where they run at once). Misuse is an error that says so.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "model/load.h"
#include "ops/cuda/cuda_test_util.h"

namespace day0 {
namespace {

const std::string kModel = std::string(D0_TEST_DATA) + "/gpt_oss_tiny";

constexpr int kSequences = 5, kBlocks = 10, kSteps = 8, kShrinkAt = 5, kShrunk = 3;

struct Chain {
  std::vector<std::vector<BlockId>> tables;
  std::vector<std::int64_t> lengths;  // tokens in the cache
  std::vector<std::int32_t> picks;    // the prefill's picks, then each step's (rows of that step)
};

// Loads the model and prefills kSequences prompts in one step; the chain starts from the prefill's picks.
Result<Chain> prefilled(Executor& ex) {
  Chain c;
  std::vector<std::vector<std::int32_t>> prompts;
  std::vector<SequenceStep> batch;
  for (int i = 0; i < kSequences; ++i) {
    std::vector<std::int32_t> p(3 + 2 * i);
    for (size_t t = 0; t < p.size(); ++t) p[t] = static_cast<std::int32_t>((t * 37 + i * 11 + 5) % 256);
    prompts.push_back(std::move(p));
    c.tables.emplace_back();
    for (int b = 0; b < kBlocks; ++b) c.tables.back().push_back(static_cast<BlockId>(i * kBlocks + b));
    c.lengths.push_back(static_cast<std::int64_t>(prompts.back().size()));
  }
  for (int i = 0; i < kSequences; ++i) batch.push_back({prompts[i], 0, c.tables[i], SequenceStep::Logits::last});
  D0_ASSIGN_OR_RETURN(Tensor picks, ex.step(batch, {}, StepOutput::greedy));
  for (int i = 0; i < kSequences; ++i) c.picks.push_back(picks.data<std::int32_t>()[2 * i]);
  return c;
}

int rows_at(int step) { return step < kShrinkAt ? kSequences : kShrunk; }

// Each step's batch: the first rows_at(step) sequences at their next position, tokens as given (or empty).
std::vector<SequenceStep> decode_batch(const Chain& c, int step, const std::vector<std::int32_t>* tokens) {
  std::vector<SequenceStep> batch;
  for (int i = 0; i < rows_at(step); ++i) {
    std::span<const std::int32_t> t;
    if (tokens) t = std::span(*tokens).subspan(i, 1);
    batch.push_back({t, c.lengths[i] + step, c.tables[i], SequenceStep::Logits::last});
  }
  return batch;
}

// The picks of kSteps greedy steps, one at a time, the host passing each pick on.
std::vector<std::int32_t> stepwise(Executor& ex, Chain c) {
  std::vector<std::int32_t> all, tokens(c.picks);
  for (int step = 0; step < kSteps; ++step) {
    auto picks = ex.step(decode_batch(c, step, &tokens), {}, StepOutput::greedy);
    EXPECT_TRUE(picks.ok()) << picks.error().message;
    if (!picks.ok()) return all;
    for (int i = 0; i < rows_at(step); ++i) all.push_back(tokens[i] = picks->data<std::int32_t>()[2 * i]);
  }
  return all;
}

// The same steps queued one ahead, each fed the last one's picks on the device.
std::vector<std::int32_t> queued(Executor& ex, Chain c, bool expect_queued) {
  std::vector<std::int32_t> all;
  auto next = ex.queue_decode(decode_batch(c, 0, &c.picks), /*fed_tokens=*/false);
  EXPECT_TRUE(next.ok()) << next.error().message;
  for (int step = 0; step < kSteps && next.ok(); ++step) {
    const QueuedDecode current = *next;
    EXPECT_EQ(current.queued, expect_queued) << "step " << step;
    if (step + 1 < kSteps) {
      next = ex.queue_decode(decode_batch(c, step + 1, nullptr), /*fed_tokens=*/true);
      EXPECT_TRUE(next.ok()) << next.error().message;
    }
    auto picks = ex.wait_decode(current);
    EXPECT_TRUE(picks.ok()) << picks.error().message;
    if (!picks.ok()) return all;
    EXPECT_EQ(picks->shape(), (Shape{rows_at(step), 2}));
    for (int i = 0; i < rows_at(step); ++i) {
      EXPECT_EQ(picks->data<std::int32_t>()[2 * i + 1], -1) << "step " << step << " row " << i;
      all.push_back(picks->data<std::int32_t>()[2 * i]);
    }
  }
  return all;
}

void expect_queued_chain_gives_the_stepwise_picks(LoadOptions o, bool expect_queued) {
  o.max_tokens = 4 * kBlocks;
  o.kv_pool_tokens = 4 * kBlocks * kSequences;
  o.block_size = 4;
  auto a = load_model(kModel, o);
  ASSERT_TRUE(a.ok()) << a.error().message;
  auto chain = prefilled(*a->executor);
  ASSERT_TRUE(chain.ok()) << chain.error().message;
  const std::vector<std::int32_t> want = stepwise(*a->executor, *chain);
  ASSERT_EQ(want.size(), size_t(kShrinkAt * kSequences + (kSteps - kShrinkAt) * kShrunk));

  auto b = load_model(kModel, o);
  ASSERT_TRUE(b.ok()) << b.error().message;
  Executor& ex = *b->executor;
  auto again = prefilled(ex);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again->picks, chain->picks);
  EXPECT_EQ(queued(ex, *again, expect_queued), want);

  // Fed tokens follow only a queued decode of at least as many rows.
  auto more = ex.queue_decode(decode_batch(*again, 0, nullptr), /*fed_tokens=*/true);
  ASSERT_FALSE(more.ok());
  EXPECT_NE(more.error().message.find("the last had 3"), std::string::npos) << more.error().message;
  ASSERT_TRUE(ex.step(decode_batch(*again, 0, &again->picks), {}, StepOutput::greedy).ok());
  auto after_step = ex.queue_decode(decode_batch(*again, 0, nullptr), /*fed_tokens=*/true);
  ASSERT_FALSE(after_step.ok());
  EXPECT_NE(after_step.error().message.find("another step came between"), std::string::npos)
      << after_step.error().message;
  auto fresh = ex.queue_decode(decode_batch(*again, 0, &again->picks), /*fed_tokens=*/false);
  ASSERT_TRUE(fresh.ok()) << fresh.error().message;
  auto with_tokens = ex.queue_decode(decode_batch(*again, 1, &again->picks), /*fed_tokens=*/true);
  ASSERT_FALSE(with_tokens.ok());
  EXPECT_NE(with_tokens.error().message.find("must leave its tokens empty"), std::string::npos)
      << with_tokens.error().message;
  EXPECT_TRUE(ex.wait_decode(*fresh).ok());
}

TEST(ExecutorQueued, cpu_chain_of_fed_decode_steps_gives_the_stepwise_picks) {
  expect_queued_chain_gives_the_stepwise_picks({}, /*expect_queued=*/false);
}

TEST(CudaExecutorQueued, chain_of_fed_decode_steps_gives_the_stepwise_picks_through_graphs_and_op_by_op) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  for (std::int64_t graphs : {8, 0}) {
    SCOPED_TRACE(::testing::Message() << "graphs " << graphs);
    LoadOptions o;
    o.backend = "cuda";
    o.backend_options.memory_fraction = 0.2;
    o.graph_max_batch = graphs;
    expect_queued_chain_gives_the_stepwise_picks(o, /*expect_queued=*/graphs > 0);
  }
}

}  // namespace
}  // namespace day0
