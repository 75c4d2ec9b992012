// Helpers shared by the convert tests (CPU and CUDA): a converted copy of a checkpoint in a temporary directory,
// and the logits and greedy tokens of one load, to compare two loads bit for bit.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <cstring>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "model/convert.h"
#include "model/greedy.h"
#include "model/load.h"
#include "test_util/temp_dir.h"

namespace day0::converttest {

const std::string kTiny = std::string(D0_TEST_DATA) + "/gpt_oss_tiny";
const std::string kPycoder = std::string(D0_TEST_DATA) + "/../../models/pycoder-tiny";

// `src` converted into dir/name (small shards, so the index path is exercised); fails the test on error.
inline ConvertResult convert_into(const std::string& src, const testing_util::TempDir& dir, const std::string& name,
                                  ExpertFormat experts, std::uint64_t shard_bytes = 150'000) {
  ConvertOptions o;
  o.experts = experts;
  o.shard_bytes = shard_bytes;
  auto r = convert_checkpoint(src, dir.file(name), o);
  EXPECT_TRUE(r.ok()) << r.error().message;
  return r.ok() ? *r : ConvertResult{};
}

// Prompts of in-vocabulary ids (vocab >= 256 in both models).
inline std::vector<std::vector<std::int32_t>> prompts() {
  std::vector<std::vector<std::int32_t>> p(3);
  for (int i = 0; i < 11; ++i) p[0].push_back((i * 37 + 11) % 256);
  for (int i = 0; i < 5; ++i) p[1].push_back((i * 101 + 7) % 256);
  p[2] = {1};
  return p;
}

struct RunOutput {
  std::vector<Tensor> prefill_logits;           // per prompt: all positions [S, V]
  std::vector<std::vector<std::int32_t>> greedy;  // per prompt: 32 tokens
};

inline RunOutput run_prompts(const std::string& dir, const LoadOptions& options) {
  RunOutput out;
  auto model = load_model(dir, options);
  EXPECT_TRUE(model.ok()) << dir << ": " << model.error().message;
  if (!model.ok()) return out;
  for (const auto& prompt : prompts()) {
    model->executor->reset();
    auto logits = model->executor->forward(prompt, /*all_logits=*/true);
    EXPECT_TRUE(logits.ok()) << logits.error().message;
    if (!logits.ok()) return out;
    out.prefill_logits.push_back(logits->clone());
    model->executor->reset();
    auto g = greedy_generate(*model->executor, prompt, 32);
    EXPECT_TRUE(g.ok()) << g.error().message;
    if (!g.ok()) return out;
    out.greedy.push_back(g->tokens);
  }
  return out;
}

// Elements whose f32 bits differ, over all prompts' prefill logits.
inline std::int64_t differing_bits(const RunOutput& a, const RunOutput& b) {
  std::int64_t n = 0;
  EXPECT_EQ(a.prefill_logits.size(), b.prefill_logits.size());
  for (std::size_t p = 0; p < std::min(a.prefill_logits.size(), b.prefill_logits.size()); ++p) {
    const Tensor &x = a.prefill_logits[p], &y = b.prefill_logits[p];
    EXPECT_EQ(x.shape(), y.shape());
    if (x.shape() != y.shape()) return -1;
    for (std::int64_t i = 0; i < x.numel(); ++i)
      n += std::memcmp(x.data<float>() + i, y.data<float>() + i, sizeof(float)) != 0;
  }
  return n;
}

// ||a - b|| / ||b|| over all prompts' prefill logits.
inline double relative_error(const RunOutput& a, const RunOutput& b) {
  double num = 0, den = 0;
  for (std::size_t p = 0; p < std::min(a.prefill_logits.size(), b.prefill_logits.size()); ++p)
    for (std::int64_t i = 0; i < b.prefill_logits[p].numel(); ++i) {
      const double x = a.prefill_logits[p].data<float>()[i], y = b.prefill_logits[p].data<float>()[i];
      num += (x - y) * (x - y);
      den += y * y;
    }
  return den > 0 ? std::sqrt(num / den) : 0;
}

// A copy of the tiny fixture where, in every row of layer 0's down experts, group 1's scale sits 20 binades below
// the row's largest: those values fall under E4M3's subnormals relative to the row scale and convert inexactly.
inline void write_fixture_with_far_apart_block_exponents(const std::string& dst) {
  std::filesystem::create_directories(dst);
  for (const auto& e : std::filesystem::directory_iterator(kTiny))
    if (e.is_regular_file()) std::filesystem::copy_file(e.path(), std::filesystem::path(dst) / e.path().filename());
  auto ck = Checkpoint::open_dir(kTiny);
  ASSERT_TRUE(ck.ok());
  const std::string name = "model.layers.0.mlp.experts.down_proj_scales";
  for (const auto& file : ck->files()) {
    if (!file->find(name)) continue;
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (const auto& info : file->tensors()) {
      Tensor t = file->tensor(info).clone();
      if (info.name == name) {
        const std::int64_t groups = t.size(2);  // [E, out, in/32]
        std::uint8_t* sc = t.data<std::uint8_t>();
        for (std::int64_t r = 0; r < t.size(0) * t.size(1); ++r) {
          const std::uint8_t top = *std::max_element(sc + r * groups, sc + (r + 1) * groups);
          sc[r * groups + 1] = static_cast<std::uint8_t>(top - 20);
        }
      }
      tensors.emplace_back(info.name, std::move(t));
    }
    const std::string out = (std::filesystem::path(dst) / std::filesystem::path(file->path()).filename()).string();
    std::filesystem::remove(out);
    ASSERT_TRUE(write_safetensors(out, tensors, file->metadata()).ok());
  }
}

}  // namespace day0::converttest
