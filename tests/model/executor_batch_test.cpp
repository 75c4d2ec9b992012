// The batched step: several sequences of different lengths in one forward pass over the paged KV pool, with
// the block tables of a real SequenceCache (prefix caching off), give the logits each sequence gets alone.
// Prompts are prefilled in chunks that share steps with other sequences' decode rows. Greedy steps (StepOutput::greedy)
// return the argmax of the logits the same steps return.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "cache/sequence_cache.h"
#include "model/greedy.h"
#include "model/load.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cuda/cuda_test_util.h"
#include "ops/cuda/dependent_launch.h"
#include "ops/logprobs.h"
#include "quant/mxfp4.h"

namespace day0 {
namespace {

const std::string kModel = std::string(D0_TEST_DATA) + "/gpt_oss_tiny";

std::vector<std::int32_t> prompt(int n, int seed) {
  std::vector<std::int32_t> p(n);
  for (int i = 0; i < n; ++i) p[i] = (i * 31 + seed * 17 + 3) % 256;
  return p;
}

// Greedy continuations of each prompt run alone (solo forward), logits of every generated step kept.
std::vector<GreedyResult> solo_runs(const LoadOptions& o, const std::vector<std::vector<std::int32_t>>& prompts,
                                    int new_tokens) {
  std::vector<GreedyResult> out;
  for (const auto& p : prompts) {
    auto m = load_model(kModel, o);
    EXPECT_TRUE(m.ok()) << m.error().message;
    auto r = greedy_generate(*m->executor, p, new_tokens, /*keep_logits=*/true);
    EXPECT_TRUE(r.ok()) << r.error().message;
    out.push_back(std::move(*r));
  }
  return out;
}

// The same prompts together: prefill in chunks of at most `chunk` tokens per sequence per step, sequences
// joining the batch at different steps, decode rows of early sequences sharing steps with later prefills.
const std::vector<std::vector<std::int32_t>> kPrompts = {prompt(5, 1), prompt(23, 2), prompt(1, 3), prompt(40, 4)};

void check_batched_equals_solo(const LoadOptions& base, double tolerance,
                               const std::vector<std::vector<std::int32_t>>& prompts = kPrompts,
                               std::int64_t chunk = 9) {
  const int kNew = 6;
  const auto solo = solo_runs(base, prompts, kNew);

  LoadOptions o = base;
  o.kv_pool_tokens = 512;
  o.block_size = 4;
  auto m = load_model(kModel, o);
  ASSERT_TRUE(m.ok()) << m.error().message;
  Executor& ex = *m->executor;
  SequenceCacheConfig cc;
  cc.n_blocks = ex.n_blocks();
  cc.block_size = ex.block_size();
  cc.prefix_caching = false;
  SequenceCache cache(cc);

  struct Seq {
    std::vector<std::int32_t> tokens;  // prompt + generated
    std::int64_t computed = 0;
    std::vector<std::int32_t> generated;
    int joins_at = 0;
  };
  std::vector<Seq> seqs(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) seqs[i] = {prompts[i], 0, {}, static_cast<int>(i)};
  for (int step = 0; step < 40; ++step) {
    std::vector<SequenceStep> batch;
    std::vector<size_t> who;
    for (size_t i = 0; i < seqs.size(); ++i) {
      Seq& s = seqs[i];
      if (step < s.joins_at || static_cast<int>(s.generated.size()) == kNew) continue;
      if (s.computed == 0 && !cache.contains(static_cast<SeqId>(i))) {
        ASSERT_TRUE(cache.allocate(static_cast<SeqId>(i), s.tokens).ok());
      }
      const std::int64_t n = std::min<std::int64_t>(chunk, static_cast<std::int64_t>(s.tokens.size()) - s.computed);
      const bool finishes_prompt = s.computed + n == static_cast<std::int64_t>(s.tokens.size());
      batch.push_back({std::span(s.tokens).subspan(s.computed, n), s.computed, cache.block_table(SeqId(i)),
                       finishes_prompt ? SequenceStep::Logits::last : SequenceStep::Logits::none});
      who.push_back(i);
    }
    if (batch.empty()) break;
    auto logits = ex.step(batch);
    ASSERT_TRUE(logits.ok()) << logits.error().message;
    std::int64_t row = 0;
    for (size_t j = 0; j < batch.size(); ++j) {
      Seq& s = seqs[who[j]];
      s.computed += static_cast<std::int64_t>(batch[j].tokens.size());
      ASSERT_TRUE(cache.mark_computed(SeqId(who[j]), s.computed).ok());
      if (batch[j].logits == SequenceStep::Logits::none) continue;
      const Tensor r = logits->slice_rows(row, row + 1);
      ++row;
      const auto& want = solo[who[j]];
      const size_t g = s.generated.size();
      EXPECT_LE(cudatest::relative_norm_error(r, want.step_logits[g]), tolerance)
          << "sequence " << who[j] << " token " << g;
      const std::int32_t token = argmax_token(r);
      EXPECT_EQ(token, want.tokens[g]) << "sequence " << who[j] << " token " << g;
      s.generated.push_back(token);
      s.tokens.push_back(token);
      ASSERT_TRUE(cache.append(SeqId(who[j]), std::span(&token, 1)).ok());
    }
    ASSERT_EQ(row, logits->size(0));
  }
  for (size_t i = 0; i < seqs.size(); ++i) {
    EXPECT_EQ(static_cast<int>(seqs[i].generated.size()), kNew) << i;
    ASSERT_TRUE(cache.free(SeqId(i)).ok());
  }
  EXPECT_EQ(cache.n_used_blocks(), 0);
}

TEST(ExecutorBatch, cpu_batched_steps_give_each_sequence_its_solo_logits_exactly) {
  LoadOptions o;
  o.max_tokens = 64;
  // Per-row CPU ops sum in the same order whatever the batch: identical, not merely close.
  check_batched_equals_solo(o, 0.0);
}

TEST(CudaExecutorBatch, cuda_batched_steps_give_each_sequence_its_solo_logits) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  LoadOptions o;
  o.backend = "cuda";
  o.max_tokens = 64;
  o.backend_options.memory_fraction = 0.2;
  // cuBLASLt may pick another algorithm for another M (rows in the step): bf16 GEMMs then round differently.
  check_batched_equals_solo(o, 1e-2);
}

// Batch-invariant mode: every row the same to the bit as alone. A 70-token prompt prefilled in chunks of 64
// puts decode rows into steps of 64+ rows, where the default mode switches kernels (cuBLASLt GEMMs, the tiled
// MoE GEMM, TF32 attention) and solo decode steps do not.
TEST(CudaExecutorBatch, batch_invariant_steps_give_each_sequence_its_solo_logits_exactly) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  LoadOptions o;
  o.backend = "cuda";
  o.max_tokens = 128;
  o.backend_options.memory_fraction = 0.2;
  o.backend_options.batch_invariant = true;
  std::vector<std::vector<std::int32_t>> prompts = kPrompts;
  prompts.push_back(prompt(70, 5));
  check_batched_equals_solo(o, 0.0, prompts, 64);
}

// Decode steps that replay a captured step graph (3 sequences: the bucket of 4, one padding row) against the same
// steps run op by op, the same tokens fed to both. A largest bucket of 6 puts the inputs' regions 8 apart (16-byte
// aligned), not 6. (The test above also replays graphs: its solo runs decode
// through the bucket of 1 and its late steps are pure decode batches.)
TEST(CudaExecutorBatch, step_graphs_are_captured_and_replay_what_op_by_op_steps_compute) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  LoadOptions o;
  o.backend = "cuda";
  o.max_tokens = 64;
  o.kv_pool_tokens = 256;
  o.block_size = 4;
  o.backend_options.memory_fraction = 0.2;
  o.graph_max_batch = 6;
  auto graphed = load_model(kModel, o);
  ASSERT_TRUE(graphed.ok()) << graphed.error().message;
  EXPECT_EQ(graphed->executor->graph_status(), "captured for decode batches of 1, 2, 4, 6 (padded up)");
  o.graph_max_batch = 0;
  o.backend_options.memory_fraction = 0.2;
  auto plain = load_model(kModel, o);
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  EXPECT_EQ(plain->executor->graph_status(), "off");

  const std::vector<std::vector<std::int32_t>> prompts = {prompt(7, 5), prompt(13, 6), prompt(2, 7)};
  std::vector<std::vector<BlockId>> tables(3);
  BlockId next = 0;
  for (auto& t : tables)
    for (int b = 0; b < 16; ++b) t.push_back(next++);  // 64 tokens each
  std::vector<std::vector<std::int32_t>> tokens = prompts;
  auto run = [&](Executor& ex, const std::vector<SequenceStep>& batch) {
    auto r = ex.step(batch);
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? *r : Tensor();
  };
  std::vector<SequenceStep> prefill;
  for (int i = 0; i < 3; ++i) prefill.push_back({tokens[i], 0, tables[i], SequenceStep::Logits::last});
  Tensor a = run(*graphed->executor, prefill), b = run(*plain->executor, prefill);
  for (int step = 0; step < 6; ++step) {
    std::vector<std::int32_t> next_token(3);
    for (int i = 0; i < 3; ++i) {
      next_token[i] = argmax_token(b.slice_rows(i, i + 1));
      tokens[i].push_back(next_token[i]);
    }
    std::vector<SequenceStep> decode;
    for (int i = 0; i < 3; ++i)
      decode.push_back({std::span(&next_token[i], 1), static_cast<std::int64_t>(tokens[i].size()) - 1, tables[i],
                        SequenceStep::Logits::last});
    a = run(*graphed->executor, decode);
    b = run(*plain->executor, decode);
    ASSERT_EQ(a.shape(), b.shape());
    // 1e-2 as above: the graph's block tables are as wide as max_tokens, so attention may split its keys
    // differently and the GEMMs see 4 rows instead of 3 (another cuBLASLt algorithm may round differently).
    for (int i = 0; i < 3; ++i) {
      EXPECT_LE(cudatest::relative_norm_error(a.slice_rows(i, i + 1), b.slice_rows(i, i + 1)), 1e-2)
          << "step " << step << " seq " << i;
      EXPECT_EQ(argmax_token(a.slice_rows(i, i + 1)), argmax_token(b.slice_rows(i, i + 1))) << "step " << step;
    }
  }
  EXPECT_EQ(graphed->executor->graph_status(), "captured for decode batches of 1, 2, 4, 6 (padded up)");
}

// Solo runs on the GPU with step graphs for up to `graphs` sequences (0: op by op).
LoadOptions cuda_solo_options(std::int64_t graphs) {
  LoadOptions o;
  o.backend = "cuda";
  o.max_tokens = 64;
  o.backend_options.memory_fraction = 0.2;
  o.graph_max_batch = graphs;
  return o;
}

// The same tokens and every step's logits to the bit.
void expect_same_bits(const GreedyResult& a, const GreedyResult& b, const std::string& where) {
  EXPECT_EQ(a.tokens, b.tokens) << where;
  ASSERT_EQ(a.step_logits.size(), b.step_logits.size()) << where;
  for (size_t i = 0; i < a.step_logits.size(); ++i) {
    const Tensor &x = a.step_logits[i], &y = b.step_logits[i];
    ASSERT_EQ(x.nbytes(), y.nbytes()) << where;
    EXPECT_EQ(std::memcmp(x.raw(), y.raw(), x.nbytes()), 0) << where << " step " << i;
  }
}

// Programmatic dependent launches (each kernel may be scheduled while the one before finishes) change when kernels
// start, never what they compute: every step's logits equal those of ordinary launches to the bit, through step
// graphs (decode) and op by op (prefill, and decode with graphs off).
TEST(CudaExecutorBatch, dependent_launches_give_the_bits_of_ordinary_launches) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  for (std::int64_t graphs : {8, 0}) {
    LoadOptions o = cuda_solo_options(graphs);
    const auto dependent = solo_runs(o, kPrompts, 6);
    o.backend_options.dependent_launch = false;
    const auto ordinary = solo_runs(o, kPrompts, 6);
    set_dependent_launch(true);  // process-wide: back to the default for the tests that follow
    ASSERT_EQ(dependent.size(), ordinary.size());
    for (size_t p = 0; p < dependent.size(); ++p)
      expect_same_bits(dependent[p], ordinary[p], "prompt " + std::to_string(p) + " graphs " + std::to_string(graphs));
  }
}

// StepOutput::greedy returns what CpuOps::greedy_tokens makes of the logits the same step returns: a prefill step
// of two prompts (op by op), then decode steps of both rows (through step graphs where they are on), each run once
// for its logits and once for its picks, the picks' tokens fed to the next step.
void expect_greedy_picks_of_the_logits(LoadOptions o) {
  o.max_tokens = 32;
  o.kv_pool_tokens = 64;
  o.block_size = 4;
  auto m = load_model(kModel, o);
  ASSERT_TRUE(m.ok()) << m.error().message;
  Executor& ex = *m->executor;
  const std::vector<BlockId> table_a = {0, 1, 2, 3, 4}, table_b = {5, 6, 7, 8, 9};
  std::vector<std::int32_t> a = prompt(5, 1), b = prompt(9, 2);
  CpuOps cpu;
  for (int step = 0; step < 4; ++step) {
    SCOPED_TRACE(::testing::Message() << "step " << step);
    const bool prefill = step == 0;
    const std::int64_t start_a = prefill ? 0 : static_cast<std::int64_t>(a.size()) - 1;
    const std::int64_t start_b = prefill ? 0 : static_cast<std::int64_t>(b.size()) - 1;
    const std::vector<SequenceStep> batch = {
        {std::span(a).subspan(start_a), start_a, table_a, SequenceStep::Logits::last},
        {std::span(b).subspan(start_b), start_b, table_b, SequenceStep::Logits::last}};
    auto logits = ex.step(batch);
    ASSERT_TRUE(logits.ok()) << logits.error().message;
    auto picks = ex.step(batch, {}, StepOutput::greedy);
    ASSERT_TRUE(picks.ok()) << picks.error().message;
    Tensor want = Tensor::zeros({2, 2}, DType::i32);
    ASSERT_TRUE(cpu.greedy_tokens(*logits, want, nullptr).ok());
    ASSERT_EQ(picks->dtype(), DType::i32);
    ASSERT_EQ(picks->shape(), (Shape{2, 2}));
    EXPECT_EQ(std::memcmp(picks->raw(), want.raw(), want.nbytes()), 0);
    EXPECT_EQ(picks->data<std::int32_t>()[1], -1);  // usable logits
    a.push_back(picks->data<std::int32_t>()[0]);
    b.push_back(picks->data<std::int32_t>()[2]);
  }
}

TEST(ExecutorBatch, cpu_greedy_steps_return_the_argmax_of_their_logits) { expect_greedy_picks_of_the_logits({}); }

TEST(CudaExecutorBatch, greedy_steps_return_the_argmax_of_their_logits_through_step_graphs_and_op_by_op) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  for (std::int64_t graphs : {8, 0}) {
    SCOPED_TRACE(::testing::Message() << "graphs " << graphs);
    expect_greedy_picks_of_the_logits(cuda_solo_options(graphs));
  }
}

// Executor::step_picked gives every row's pick as StepOutput::greedy does and the sampled rows' logits as the step's
// logits, to the bit, for sampled rows none, all, one, in runs, and in more runs than it downloads one by one: a
// prefill step of eight prompts (op by op), then decode steps (through step graphs where they are on). Edited rows
// are picked from their edited logits; rows reporting logprobs get their records. Rows out of order or range, sampled
// and edited, or edited or sampled and reporting logprobs, are an error.
void expect_picked_steps_of_the_logits(LoadOptions o) {
  o.max_tokens = 32;
  o.kv_pool_tokens = 256;
  o.block_size = 4;
  auto m = load_model(kModel, o);
  ASSERT_TRUE(m.ok()) << m.error().message;
  Executor& ex = *m->executor;
  const int n = 8;
  std::vector<std::vector<std::int32_t>> tokens;
  std::vector<std::vector<BlockId>> tables(n);
  for (int i = 0; i < n; ++i) {
    tokens.push_back(prompt(3 + i, 10 + i));
    for (int b = 0; b < 8; ++b) tables[i].push_back(static_cast<BlockId>(i * 8 + b));
  }
  const std::vector<std::vector<std::int32_t>> sampled_sets = {
      {}, {0, 1, 2, 3, 4, 5, 6, 7}, {5}, {1, 3, 4}, {0, 2, 3, 5}, {0, 2, 4, 6, 7}};
  for (int step = 0; step < 3; ++step) {
    SCOPED_TRACE(::testing::Message() << "step " << step);
    std::vector<SequenceStep> batch;
    for (int i = 0; i < n; ++i) {
      const std::int64_t start = step == 0 ? 0 : static_cast<std::int64_t>(tokens[i].size()) - 1;
      batch.push_back({std::span(tokens[i]).subspan(start), start, tables[i], SequenceStep::Logits::last});
    }
    auto logits = ex.step(batch);
    ASSERT_TRUE(logits.ok()) << logits.error().message;
    auto picks = ex.step(batch, {}, StepOutput::greedy);
    ASSERT_TRUE(picks.ok()) << picks.error().message;
    for (const auto& sampled : sampled_sets) {
      SCOPED_TRACE(::testing::Message() << sampled.size() << " rows sampled");
      auto got = ex.step_picked(batch, sampled);
      ASSERT_TRUE(got.ok()) << got.error().message;
      if (sampled.size() == static_cast<size_t>(n)) {
        EXPECT_FALSE(got->picks.defined());
      } else {
        ASSERT_EQ(got->picks.shape(), picks->shape());
        EXPECT_EQ(std::memcmp(got->picks.raw(), picks->raw(), picks->nbytes()), 0);
      }
      ASSERT_EQ(got->logits.size(), sampled.size());
      for (size_t k = 0; k < sampled.size(); ++k) {
        const Tensor want = logits->slice_rows(sampled[k], sampled[k] + 1);
        ASSERT_EQ(got->logits[k].shape(), want.shape());
        EXPECT_EQ(std::memcmp(got->logits[k].raw(), want.raw(), want.nbytes()), 0) << "row " << sampled[k];
      }
    }
    for (const std::vector<std::int32_t>& bad : {std::vector<std::int32_t>{2, 1}, std::vector<std::int32_t>{8}}) {
      auto r = ex.step_picked(batch, bad);
      ASSERT_FALSE(r.ok());
      EXPECT_NE(r.error().message.find("sampled rows must ascend"), std::string::npos) << r.error().message;
    }
    auto both = ex.step_picked(batch, std::vector<std::int32_t>{1}, {{1, 1.f, 0.5}});
    ASSERT_FALSE(both.ok());
    EXPECT_NE(both.error().message.find("row 1 is both sampled on the host and drawn"), std::string::npos);
    // Edited rows (Ops::edit_logits before the picks): a bias that makes token 9 row 3's pick, and row 5's argmax
    // pushed below its runner-up; the other rows' picks and the sampled row's logits are untouched.
    {
      const std::int64_t V = logits->size(1);
      const float* row5 = logits->data<float>() + 5 * V;
      const std::int32_t top5 = picks->data<std::int32_t>()[2 * 5];
      LogitEdits edits;
      edits.add_row(3, {{9, LogitEditKind::add, 1000.f}});
      edits.add_row(5, {{top5, LogitEditKind::subtract, 1000.f}});
      auto edited = ex.step_picked(batch, std::vector<std::int32_t>{4}, {}, edits);
      ASSERT_TRUE(edited.ok()) << edited.error().message;
      std::int32_t second5 = top5 == 0 ? 1 : 0;
      for (std::int32_t i = 0; i < V; ++i)
        if (i != top5 && row5[i] > row5[second5]) second5 = i;
      for (int i = 0; i < n; ++i) {
        const std::int32_t want = i == 3 ? 9 : i == 5 ? second5 : picks->data<std::int32_t>()[2 * i];
        EXPECT_EQ(edited->picks.data<std::int32_t>()[2 * i], want) << "row " << i;
      }
      ASSERT_EQ(edited->logits.size(), 1u);
      EXPECT_EQ(std::memcmp(edited->logits[0].raw(), logits->slice_rows(4, 5).raw(), V * sizeof(float)), 0);
      auto sampled_and_edited = ex.step_picked(batch, std::vector<std::int32_t>{3}, {}, edits);
      ASSERT_FALSE(sampled_and_edited.ok());
      EXPECT_NE(sampled_and_edited.error().message.find("row 3 is both sampled on the host and edited"),
                std::string::npos);
    }
    // Rows reporting logprobs (Ops::row_logprobs after the picks) beside a sampled row: each record is the host's of
    // the step's logits, equal on the CPU and within 1e-6 on CUDA (its sums run in another order; graphs or not).
    {
      const float tolerance = o.backend == "cuda" ? 1e-6f : 0.f;
      const std::int64_t V = logits->size(1);
      const std::vector<LogprobRequest> asked = {{0, 5}, {2, 0}, {7, kMaxLogprobTop}};
      auto got = ex.step_picked(batch, std::vector<std::int32_t>{4}, {}, {}, asked);
      ASSERT_TRUE(got.ok()) << got.error().message;
      ASSERT_EQ(got->logprobs.size(), asked.size());
      EXPECT_EQ(std::memcmp(got->picks.raw(), picks->raw(), picks->nbytes()), 0);
      for (size_t k = 0; k < asked.size(); ++k) {
        const std::int32_t row = asked[k].row;
        const LogprobRecord want = logprob_record(std::span(logits->data<float>() + row * V, static_cast<size_t>(V)),
                                                  picks->data<std::int32_t>()[2 * row], asked[k].top_n);
        const LogprobRecord& g = got->logprobs[k];
        EXPECT_NEAR(g.picked, want.picked, tolerance) << "row " << row;
        ASSERT_EQ(g.n, want.n) << "row " << row;
        for (int e = 0; e < want.n; ++e) {
          EXPECT_EQ(g.ids[e], want.ids[e]) << "row " << row << ", entry " << e;
          EXPECT_NEAR(g.logprobs[e], want.logprobs[e], tolerance) << "row " << row << ", entry " << e;
        }
      }
      LogitEdits edits;
      edits.add_row(2, {{9, LogitEditKind::add, 1.f}});
      auto edited = ex.step_picked(batch, std::vector<std::int32_t>{4}, {}, edits, asked);
      ASSERT_FALSE(edited.ok());
      EXPECT_NE(edited.error().message.find("row 2 is edited"), std::string::npos) << edited.error().message;
      auto sampled = ex.step_picked(batch, std::vector<std::int32_t>{7}, {}, {}, asked);
      ASSERT_FALSE(sampled.ok());
      EXPECT_NE(sampled.error().message.find("row 7 is both sampled on the host and given logprobs"),
                std::string::npos);
    }
    for (int i = 0; i < n; ++i) tokens[i].push_back(picks->data<std::int32_t>()[2 * i]);
  }
}

TEST(ExecutorBatch, cpu_picked_steps_give_the_picks_and_the_sampled_rows_logits) {
  expect_picked_steps_of_the_logits({});
}

TEST(CudaExecutorBatch, picked_steps_give_the_picks_and_the_sampled_rows_logits_through_graphs_and_op_by_op) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  for (std::int64_t graphs : {8, 0}) {
    SCOPED_TRACE(::testing::Message() << "graphs " << graphs);
    expect_picked_steps_of_the_logits(cuda_solo_options(graphs));
  }
}

// greedy_generate without kept logits takes the backend's picks: the tokens of the run that keeps the logits and
// takes their argmax. A solo forward over a prompt in several chunks joins each row's pick, as the logits.
void expect_greedy_generate_from_picks(LoadOptions o) {
  o.max_tokens = 48;
  o.max_step_tokens = 8;  // the 23-token prompt in three chunks
  const std::vector<std::int32_t> p = prompt(23, 5);
  auto with_logits = load_model(kModel, o);
  ASSERT_TRUE(with_logits.ok()) << with_logits.error().message;
  auto want = greedy_generate(*with_logits->executor, p, 8, /*keep_logits=*/true);
  ASSERT_TRUE(want.ok()) << want.error().message;
  auto with_picks = load_model(kModel, o);
  ASSERT_TRUE(with_picks.ok()) << with_picks.error().message;
  auto got = greedy_generate(*with_picks->executor, p, 8);
  ASSERT_TRUE(got.ok()) << got.error().message;
  EXPECT_EQ(got->tokens, want->tokens);
  EXPECT_TRUE(got->step_logits.empty());

  Executor& ex = *with_picks->executor;
  ex.reset();
  auto logits = ex.forward(p, /*all_logits=*/true);
  ASSERT_TRUE(logits.ok()) << logits.error().message;
  ex.reset();
  auto picks = ex.forward(p, /*all_logits=*/true, {}, StepOutput::greedy);
  ASSERT_TRUE(picks.ok()) << picks.error().message;
  Tensor rows = Tensor::zeros({23, 2}, DType::i32);
  ASSERT_TRUE(CpuOps().greedy_tokens(*logits, rows, nullptr).ok());
  ASSERT_EQ(picks->shape(), (Shape{23, 2}));
  EXPECT_EQ(std::memcmp(picks->raw(), rows.raw(), rows.nbytes()), 0);
}

TEST(ExecutorBatch, cpu_greedy_generate_takes_the_picks_of_the_logits_it_would_keep) {
  expect_greedy_generate_from_picks({});
}

TEST(CudaExecutorBatch, greedy_generate_takes_the_picks_of_the_logits_it_would_keep) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  expect_greedy_generate_from_picks(cuda_solo_options(8));
}

TEST(ExecutorBatch, a_cpu_executor_reports_step_graphs_off) {
  LoadOptions o;
  o.max_tokens = 16;
  o.graph_max_batch = 8;
  auto m = load_model(kModel, o);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->executor->graph_status(), "off: the cpu backend has no step graphs");
}

TEST(ExecutorBatch, a_table_that_does_not_cover_the_tokens_or_too_many_tokens_are_errors) {
  LoadOptions o;
  o.max_tokens = 64;
  o.kv_pool_tokens = 64;
  o.block_size = 4;
  o.max_step_tokens = 16;
  auto m = load_model(kModel, o);
  ASSERT_TRUE(m.ok()) << m.error().message;
  const std::vector<std::int32_t> tokens = prompt(6, 1);
  const std::vector<BlockId> one_block = {0};
  SequenceStep s{tokens, 0, one_block, SequenceStep::Logits::last};
  auto r = m->executor->step(std::span(&s, 1));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("does not cover 6 tokens"), std::string::npos) << r.error().message;
  const std::vector<BlockId> bad = {0, 99};
  s.block_table = bad;
  r = m->executor->step(std::span(&s, 1));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("block 99 outside the pool of 16"), std::string::npos) << r.error().message;
  const std::vector<std::int32_t> many = prompt(17, 1);
  const std::vector<BlockId> five = {0, 1, 2, 3, 4};
  SequenceStep big{many, 0, five, SequenceStep::Logits::last};
  r = m->executor->step(std::span(&big, 1));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("17 tokens exceed the step limit of 16"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace day0
