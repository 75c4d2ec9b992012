// The bundled default model (models/pycoder-tiny, trained, MXFP4 experts) against transformers 5.17:
// held-out mean log-probability within 1e-4 relative, greedy continuations identical, perplexity far
// below the uniform baseline — and deliberate corruptions (two experts swapped, RoPE dropped) caught.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "model/evaluate.h"
#include "model/greedy.h"
#include "model/load.h"
#include "test_util/temp_dir.h"

namespace day0 {
namespace {

const std::string kModel = std::string(D0_TEST_DATA) + "/../../models/pycoder-tiny";
const std::string kReference = std::string(D0_TEST_DATA) + "/pycoder_tiny_reference";
// fp32 vs fp32 (transformers on CPU): summation order only; the bound.
constexpr double kMeanLogprobTolerance = 1e-4;

struct Heldout {
  std::vector<std::vector<std::int32_t>> windows;
  double reference_mean = 0;
};

Heldout read_heldout() {
  Heldout h;
  auto file = SafetensorsFile::open(kReference + "/heldout.safetensors");
  EXPECT_TRUE(file.ok()) << file.error().message;
  const Tensor ids = (*file)->tensor(*(*file)->find("input_ids")).clone();
  const Tensor lp = (*file)->tensor(*(*file)->find("logprobs")).clone();
  const std::int64_t n = ids.size(0), len = ids.size(1);
  for (std::int64_t w = 0; w < n; ++w) {
    std::vector<std::int32_t> window(len);
    for (std::int64_t t = 0; t < len; ++t) window[t] = static_cast<std::int32_t>(ids.data<std::int64_t>()[w * len + t]);
    h.windows.push_back(std::move(window));
  }
  for (std::int64_t i = 0; i < lp.numel(); ++i) h.reference_mean += lp.data<float>()[i];
  h.reference_mean /= double(lp.numel());
  return h;
}

Result<double> mean_logprob(Executor& executor, const Heldout& h) {
  double sum = 0;
  std::size_t count = 0;
  for (const auto& w : h.windows) {
    D0_ASSIGN_OR_RETURN(std::vector<double> lp, token_logprobs(executor, w));
    for (double v : lp) sum += v;
    count += lp.size();
  }
  return sum / double(count);
}

std::unique_ptr<Executor> executor_for(const std::string& dir, LoadedModel& holder, bool drop_rope = false) {
  auto spec = model_spec_from_dir(dir);
  EXPECT_TRUE(spec.ok()) << spec.error().message;
  if (drop_rope)
    for (auto& L : spec->layers) L.mixer.attention.rope.kind = RopeKind::none;
  auto ckpt = Checkpoint::open_dir(dir);
  EXPECT_TRUE(ckpt.ok()) << ckpt.error().message;
  auto weights = ModelWeights::bind(*spec, *ckpt);
  EXPECT_TRUE(weights.ok()) << weights.error().message;
  holder.ops = std::move(make_ops("cpu")).value();
  auto ex = Executor::create(*spec, std::move(*weights), *holder.ops, ExecutorOptions{.max_tokens = 512});
  EXPECT_TRUE(ex.ok()) << ex.error().message;
  return std::move(*ex);
}

TEST(PycoderTiny, heldout_mean_logprob_matches_transformers_and_perplexity_is_far_below_uniform) {
  const Heldout h = read_heldout();
  ASSERT_EQ(h.windows.size(), 8u);
  LoadedModel holder;
  auto ex = executor_for(kModel, holder);
  auto mean = mean_logprob(*ex, h);
  ASSERT_TRUE(mean.ok()) << mean.error().message;
  EXPECT_NEAR(*mean, h.reference_mean, kMeanLogprobTolerance * std::fabs(h.reference_mean));
  const double perplexity = std::exp(-*mean), uniform = ex->spec().vocab_size;
  // Reference: perplexity 5.63 against a uniform 4096; a broken model lands near the hundreds.
  EXPECT_LT(perplexity, 10.0) << "uniform baseline " << uniform;
  std::printf("held-out mean log-prob %.7f (transformers %.7f, relative difference %.1e), perplexity %.3f, "
              "uniform %.0f\n", *mean, h.reference_mean, std::fabs(*mean / h.reference_mean - 1), perplexity, uniform);
}

TEST(PycoderTiny, greedy_continuations_equal_transformers_token_for_token) {
  std::ifstream in(kReference + "/greedy.json");
  const nlohmann::json greedy = nlohmann::json::parse(in);
  LoadedModel holder;
  auto ex = executor_for(kModel, holder);
  ASSERT_EQ(greedy["prompts"].size(), 5u);
  for (const auto& p : greedy["prompts"]) {
    const auto prompt = p["prompt_ids"].get<std::vector<std::int32_t>>();
    const auto expected = p["greedy_ids"].get<std::vector<std::int32_t>>();
    ex->reset();
    auto out = greedy_generate(*ex, prompt, static_cast<int>(expected.size()));
    ASSERT_TRUE(out.ok()) << out.error().message;
    EXPECT_EQ(out->tokens, expected) << p["prompt"].get<std::string>();
  }
}

// Copies the model and swaps experts 0 and 1 (blocks, scales, biases) in every layer's gate_up and down.
void write_model_with_swapped_experts(const std::string& dst) {
  namespace fs = std::filesystem;
  for (const auto& e : fs::directory_iterator(kModel)) fs::copy_file(e.path(), fs::path(dst) / e.path().filename());
  auto ckpt = Checkpoint::open_dir(kModel);
  ASSERT_TRUE(ckpt.ok());
  for (const auto& file : ckpt->files()) {
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (const auto& info : file->tensors()) {
      Tensor t = file->tensor(info).clone();
      if (info.name.find(".mlp.experts.") != std::string::npos) {
        const std::size_t expert_bytes = t.nbytes() / t.size(0);
        std::swap_ranges(static_cast<std::byte*>(t.raw()), static_cast<std::byte*>(t.raw()) + expert_bytes,
                         static_cast<std::byte*>(t.raw()) + expert_bytes);
      }
      tensors.emplace_back(info.name, std::move(t));
    }
    const std::string out = (fs::path(dst) / fs::path(file->path()).filename()).string();
    fs::remove(out);
    ASSERT_TRUE(write_safetensors(out, tensors, file->metadata()).ok());
  }
}

TEST(PycoderTiny, perplexity_check_catches_swapped_experts) {
  const Heldout h = read_heldout();
  testing_util::TempDir dir;
  write_model_with_swapped_experts(dir.str());
  LoadedModel holder;
  auto ex = executor_for(dir.str(), holder);
  auto mean = mean_logprob(*ex, h);
  ASSERT_TRUE(mean.ok()) << mean.error().message;
  EXPECT_GT(std::fabs(*mean - h.reference_mean), kMeanLogprobTolerance * std::fabs(h.reference_mean));
  std::printf("experts 0 and 1 swapped: perplexity %.3f (intact %.3f)\n", std::exp(-*mean), std::exp(-h.reference_mean));
  EXPECT_GT(std::exp(-*mean), 1.2 * std::exp(-h.reference_mean)) << "swapped experts should hurt perplexity";
}

TEST(PycoderTiny, perplexity_check_catches_a_model_run_without_rope) {
  const Heldout h = read_heldout();
  LoadedModel holder;
  auto ex = executor_for(kModel, holder, /*drop_rope=*/true);
  auto mean = mean_logprob(*ex, h);
  ASSERT_TRUE(mean.ok()) << mean.error().message;
  EXPECT_GT(std::fabs(*mean - h.reference_mean), kMeanLogprobTolerance * std::fabs(h.reference_mean));
  std::printf("without RoPE: perplexity %.3f (intact %.3f)\n", std::exp(-*mean), std::exp(-h.reference_mean));
  EXPECT_GT(std::exp(-*mean), 1.2 * std::exp(-h.reference_mean)) << "dropping RoPE should hurt perplexity";
}

}  // namespace
}  // namespace day0
