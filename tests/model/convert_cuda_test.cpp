// The offline-converted checkpoints on the GPU against online conversion, end to end: for the tiny gpt_oss
// fixture and models/pycoder-tiny, `--backend cuda` with online bf16 over the MXFP4 checkpoint vs the offline bf16
// checkpoint, and online fp8 vs the offline fp8 checkpoint, give bit-identical logits and identical 32-token
// greedy continuations; a converted checkpoint run with the other --expert-compute is a clear error.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "convert_test_util.h"
#include "quant/mxfp4.h"

namespace day0 {
namespace {

using testing_util::TempDir;

LoadOptions cuda_options(ExpertCompute compute) {
  LoadOptions o;
  o.backend = "cuda";
  o.max_tokens = 64;
  o.backend_options.memory_fraction = 0.2;  // tiny models; leave the GPU to others
  o.backend_options.expert_compute = compute;
  // Online conversion + GEMMs against the offline-converted checkpoint: the fused MXFP4 decode path sums in
  // another order (tested against the CPU in CudaMoe), so it is off here.
  o.backend_options.fused_moe_max_tokens = 0;
  return o;
}

struct Case {
  const char* name;
  std::string model;
  ExpertCompute compute;
};

class CudaConvert : public ::testing::TestWithParam<Case> {};

TEST_P(CudaConvert, offline_converted_experts_give_bit_identical_logits_and_greedy_tokens_to_online_conversion) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  const Case& c = GetParam();
  TempDir tmp;
  const ExpertFormat format =
      c.compute == ExpertCompute::bf16 ? ExpertFormat::bf16_fused : ExpertFormat::fp8_rowwise_fused;
  const ConvertResult r = converttest::convert_into(c.model, tmp, "converted", format, 1'000'000);
  const auto online = converttest::run_prompts(c.model, cuda_options(c.compute));
  const auto offline = converttest::run_prompts(tmp.file("converted"), cuda_options(c.compute));
  ASSERT_EQ(online.prefill_logits.size(), converttest::prompts().size());
  const std::int64_t differing = converttest::differing_bits(offline, online);
  std::printf("[convert cuda] %s: %lld logits differ in any bit (fp8 inexact weights %llu), greedy %s\n", c.name,
              static_cast<long long>(differing), static_cast<unsigned long long>(r.fp8_inexact),
              offline.greedy == online.greedy ? "identical" : "DIFFERENT");
  EXPECT_EQ(differing, 0);
  ASSERT_EQ(offline.greedy.size(), online.greedy.size());
  for (std::size_t p = 0; p < online.greedy.size(); ++p) {
    EXPECT_EQ(online.greedy[p].size(), 32u);
    EXPECT_EQ(offline.greedy[p], online.greedy[p]) << "prompt " << p;
  }
}

// "CudaModels/CudaConvert.*": the instance prefix starts with Cuda too, so --gtest_filter='Cuda*' picks it.
INSTANTIATE_TEST_SUITE_P(
    CudaModels, CudaConvert,
    ::testing::Values(Case{"tiny_bf16", converttest::kTiny, ExpertCompute::bf16},
                      Case{"tiny_fp8", converttest::kTiny, ExpertCompute::fp8},
                      Case{"pycoder_bf16", converttest::kPycoder, ExpertCompute::bf16},
                      Case{"pycoder_fp8", converttest::kPycoder, ExpertCompute::fp8}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

TEST(CudaConvertInexact, fp8_experts_with_inexact_values_stay_bit_identical_to_online_conversion) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  TempDir tmp;
  converttest::write_fixture_with_far_apart_block_exponents(tmp.file("src"));
  const ConvertResult r = converttest::convert_into(tmp.file("src"), tmp, "fp8", ExpertFormat::fp8_rowwise_fused);
  EXPECT_GT(r.fp8_inexact, 0u);  // the kernel rounds them as the CPU codec did
  const auto online = converttest::run_prompts(tmp.file("src"), cuda_options(ExpertCompute::fp8));
  const auto offline = converttest::run_prompts(tmp.file("fp8"), cuda_options(ExpertCompute::fp8));
  EXPECT_EQ(converttest::differing_bits(offline, online), 0);
  EXPECT_EQ(offline.greedy, online.greedy);
}

TEST(CudaConvertMismatch, a_converted_checkpoint_run_with_the_other_expert_compute_is_a_clear_error) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  TempDir tmp;
  converttest::convert_into(converttest::kTiny, tmp, "fp8", ExpertFormat::fp8_rowwise_fused);
  converttest::convert_into(converttest::kTiny, tmp, "bf16", ExpertFormat::bf16_fused);
  auto fp8_as_bf16 = load_model(tmp.file("fp8"), cuda_options(ExpertCompute::bf16));
  ASSERT_FALSE(fp8_as_bf16.ok());
  EXPECT_NE(fp8_as_bf16.error().message.find("run with --expert-compute fp8, not bf16"), std::string::npos)
      << fp8_as_bf16.error().message;
  auto bf16_as_fp8 = load_model(tmp.file("bf16"), cuda_options(ExpertCompute::fp8));
  ASSERT_FALSE(bf16_as_fp8.ok());
  EXPECT_NE(bf16_as_fp8.error().message.find("run with --expert-compute bf16, not fp8"), std::string::npos)
      << bf16_as_fp8.error().message;
}

TEST(CudaConvertMemory, a_converted_checkpoint_places_its_experts_as_stored_and_plans_no_conversion_buffers) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  TempDir tmp;
  converttest::convert_into(converttest::kTiny, tmp, "fp8", ExpertFormat::fp8_rowwise_fused);
  auto model = load_model(tmp.file("fp8"), cuda_options(ExpertCompute::fp8));
  ASSERT_TRUE(model.ok()) << model.error().message;
  bool experts_line = false;
  for (const MemoryUse& m : model->ops->memory_report()) {
    std::printf("  %-45s %12llu  %s\n", m.what.c_str(), static_cast<unsigned long long>(m.bytes), m.note.c_str());
    if (m.what == "weights: experts (as stored: fp8_rowwise)") {
      experts_line = true;
      // 2 layers x 4 experts x (192x64 + 64x96) e4m3 bytes + (192 + 64) f32 row scales each, arena-aligned.
      EXPECT_GE(m.bytes, 2u * 4 * (192 * 64 + 64 * 96 + 4 * (192 + 64)));
    }
    if (m.what == "moe workspace") {
      EXPECT_NE(m.note.find("no conversion buffers"), std::string::npos) << m.note;
    }
  }
  EXPECT_TRUE(experts_line);
}

}  // namespace
}  // namespace day0
