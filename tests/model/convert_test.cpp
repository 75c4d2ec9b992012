// convert_checkpoint / `day0 convert` on the CPU: converted checkpoints load; their expert tensors are the CPU
// codecs' output (the codecs the GPU runs online); every other tensor is copied byte for byte; the CPU reference
// gives bit-identical logits and greedy tokens for bf16 experts (an exact decode), and for fp8 ones wherever the
// conversion was exact; bad input is refused in one line.
#include "model/convert.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "arch/registry.h"
#include "convert_test_util.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "quant/fp8_experts.h"
#include "quant/mxfp4.h"
#include "test_util/run_day0.h"

namespace day0 {
namespace {

namespace fs = std::filesystem;
using converttest::convert_into;
using converttest::kPycoder;
using converttest::kTiny;
using testing_util::TempDir;

std::vector<std::string> sorted_names(const fs::path& dir) {
  std::vector<std::string> v;
  for (const auto& e : fs::directory_iterator(dir)) v.push_back(e.path().filename().string());
  std::sort(v.begin(), v.end());
  return v;
}

Tensor tensor_of(const Checkpoint& ck, const std::string& name) {
  auto t = ck.tensor(name);
  EXPECT_TRUE(t.ok()) << t.error().message;
  return t.ok() ? t->clone() : Tensor();
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// Every MXFP4 matrix of the source, converted with the CPU codecs, equals the converted checkpoint's tensors; every
// other source tensor is in the output unchanged. Returns the fp8 values that did not convert exactly.
std::int64_t expect_converted(const std::string& src, const std::string& out, ExpertFormat format) {
  auto src_spec = model_spec_from_dir(src);
  auto out_spec = model_spec_from_dir(out);
  auto src_ck = Checkpoint::open_dir(src);
  auto out_ck = Checkpoint::open_dir(out);
  EXPECT_TRUE(src_spec.ok() && out_spec.ok() && src_ck.ok() && out_ck.ok());
  if (!src_spec.ok() || !out_spec.ok() || !src_ck.ok() || !out_ck.ok()) return -1;
  std::set<std::string> expert_names = expert_tensor_names(*src_spec);
  for (const std::string& name : src_ck->names()) {
    if (expert_names.count(name)) continue;
    EXPECT_TRUE(same_bytes(tensor_of(*src_ck, name), tensor_of(*out_ck, name))) << name;
  }
  std::int64_t inexact = 0;
  for (std::size_t l = 0; l < src_spec->layers.size(); ++l) {
    const MoESpec& m = src_spec->layers[l].channel.moe;
    const MoESpec& mo = out_spec->layers[l].channel.moe;
    for (auto [in_m, out_m] : {std::pair{&m.gate_up, &mo.gate_up}, std::pair{&m.down, &mo.down}}) {
      EXPECT_EQ(out_m->format, format);
      const auto src_t = expert_tensors(*in_m, m.n_experts);
      const auto out_t = expert_tensors(*out_m, m.n_experts);
      const Tensor blocks = tensor_of(*src_ck, src_t[0].name), scales = tensor_of(*src_ck, src_t[1].name);
      const Tensor values = tensor_of(*out_ck, out_t[0].name);
      const Tensor row_scales = out_t.size() > 1 ? tensor_of(*out_ck, out_t[1].name) : Tensor();
      const std::int64_t rows = std::int64_t(m.n_experts) * in_m->out, in = in_m->in, groups = in / kMxfp4GroupSize;
      EXPECT_EQ(values.shape(), (Shape{m.n_experts, in_m->out, in}));
      std::vector<std::uint16_t> want16(in);
      std::vector<std::uint8_t> want8(in);
      std::int64_t bad = 0;
      for (std::int64_t r = 0; r < rows; ++r) {
        const std::uint8_t* b = blocks.data<std::uint8_t>() + r * groups * kMxfp4GroupBytes;
        const std::uint8_t* s = scales.data<std::uint8_t>() + r * groups;
        if (format == ExpertFormat::bf16_fused) {
          mxfp4_decode_row_bf16(b, s, in, want16.data());
          bad += std::memcmp(want16.data(), values.data<std::uint16_t>() + r * in, in * 2) != 0;
        } else {
          const Fp8Row row = mxfp4_row_to_fp8(b, s, in, want8.data());
          inexact += row.inexact;
          bad += std::memcmp(want8.data(), values.data<std::uint8_t>() + r * in, in) != 0;
          bad += std::memcmp(&row.scale, row_scales.data<float>() + r, 4) != 0;
        }
      }
      EXPECT_EQ(bad, 0) << out_t[0].name << ": rows differing from the CPU codec";
    }
  }
  return inexact;
}

TEST(Convert, bf16_experts_are_the_exact_decode_and_every_other_tensor_is_copied_byte_for_byte) {
  TempDir tmp;
  const ConvertResult r = convert_into(kTiny, tmp, "bf16", ExpertFormat::bf16_fused);
  EXPECT_GT(r.shards, 2);  // small shards: the index path
  EXPECT_EQ(r.expert_matrices, 4u);
  EXPECT_EQ(r.fp8_values, 0u);
  // bf16 holds 4 bytes per MXFP4 byte pair of values (2 values x 2 bytes per packed byte; scales dropped).
  EXPECT_GT(r.expert_bytes_out, 3 * r.expert_bytes_in);
  EXPECT_EQ(expect_converted(kTiny, tmp.file("bf16"), ExpertFormat::bf16_fused), 0);
  std::ifstream in(tmp.file("bf16") + "/config.json");
  const nlohmann::json config = nlohmann::json::parse(in);
  EXPECT_EQ(config["quantization_config"],
            (nlohmann::json{{"quant_method", "day0_experts"}, {"experts", "bf16"}, {"converted_from", "mxfp4"}}));
  EXPECT_EQ(config["hidden_size"], 64);  // the rest as it was
  std::printf("[convert] tiny -> bf16: %.1f KB experts in, %.1f KB out, %.1f KB copied, %d shards, %.3f s\n",
              r.expert_bytes_in / 1e3, r.expert_bytes_out / 1e3, r.copied_bytes / 1e3, r.shards, r.seconds);
}

TEST(Convert, fp8_experts_are_the_row_conversion_with_its_power_of_two_scales) {
  TempDir tmp;
  const ConvertResult r = convert_into(kTiny, tmp, "fp8", ExpertFormat::fp8_rowwise_fused);
  const std::int64_t inexact = expect_converted(kTiny, tmp.file("fp8"), ExpertFormat::fp8_rowwise_fused);
  EXPECT_EQ(r.fp8_inexact, static_cast<std::uint64_t>(inexact));
  EXPECT_EQ(r.fp8_values, 2u * 4 * (192 * 64 + 64 * 96));  // 2 layers x 4 experts x (gate_up 192x64 + down 64x96)
  std::printf("[convert] tiny -> fp8: %llu of %llu values inexact, %.1f KB experts out\n",
              static_cast<unsigned long long>(r.fp8_inexact), static_cast<unsigned long long>(r.fp8_values),
              r.expert_bytes_out / 1e3);
}

TEST(Convert, output_is_byte_identical_whatever_the_thread_count_and_chunk_size) {
  TempDir tmp;
  for (auto [name, threads, chunk] :
       {std::tuple{"a", 1, std::size_t(1) << 20}, std::tuple{"b", 3, std::size_t(4096)}}) {
    ConvertOptions o;
    o.experts = ExpertFormat::fp8_rowwise_fused;
    o.shard_bytes = 100'000;
    o.threads = threads;
    o.chunk_bytes = chunk;
    auto r = convert_checkpoint(kTiny, tmp.file(name), o);
    ASSERT_TRUE(r.ok()) << r.error().message;
  }
  ASSERT_EQ(sorted_names(tmp.file("a")), sorted_names(tmp.file("b")));
  for (const std::string& f : sorted_names(tmp.file("a")))
    EXPECT_EQ(testing_util::slurp_file(tmp.file("a") + "/" + f), testing_util::slurp_file(tmp.file("b") + "/" + f))
        << f;
}

TEST(Convert, bf16_checkpoint_gives_bit_identical_cpu_logits_and_greedy_tokens) {
  TempDir tmp;
  convert_into(kTiny, tmp, "bf16", ExpertFormat::bf16_fused);
  LoadOptions o;
  o.max_tokens = 64;
  const auto mxfp4 = converttest::run_prompts(kTiny, o);
  const auto bf16 = converttest::run_prompts(tmp.file("bf16"), o);
  EXPECT_EQ(converttest::differing_bits(bf16, mxfp4), 0);
  EXPECT_EQ(bf16.greedy, mxfp4.greedy);
}

TEST(Convert, fp8_checkpoint_runs_on_the_cpu_and_matches_mxfp4_where_the_conversion_was_exact) {
  for (const std::string& model : {kTiny, kPycoder}) {
    SCOPED_TRACE(model);
    TempDir tmp;
    const ConvertResult r = convert_into(model, tmp, "fp8", ExpertFormat::fp8_rowwise_fused, 1'000'000);
    LoadOptions o;
    o.max_tokens = 64;
    const auto mxfp4 = converttest::run_prompts(model, o);
    const auto fp8 = converttest::run_prompts(tmp.file("fp8"), o);
    // The CPU decodes e4m3 * 2^R exactly: the weights are MXFP4's except the r.fp8_inexact values.
    const double rel = converttest::relative_error(fp8, mxfp4);
    std::printf("[convert] %s fp8 on the cpu: logits rel. error %.3e vs mxfp4 (%llu of %llu weights inexact), "
                "greedy %s\n",
                fs::path(model).filename().c_str(), rel, static_cast<unsigned long long>(r.fp8_inexact),
                static_cast<unsigned long long>(r.fp8_values), fp8.greedy == mxfp4.greedy ? "identical" : "differs");
    if (r.fp8_inexact == 0) {
      EXPECT_EQ(converttest::differing_bits(fp8, mxfp4), 0);
      EXPECT_EQ(fp8.greedy, mxfp4.greedy);
    }
    EXPECT_LT(rel, 1e-2);
  }
}

TEST(Convert, inexact_fp8_values_are_counted_as_the_codec_counts_them_and_cost_little_on_the_cpu) {
  TempDir tmp;
  converttest::write_fixture_with_far_apart_block_exponents(tmp.file("src"));
  const ConvertResult r = convert_into(tmp.file("src"), tmp, "fp8", ExpertFormat::fp8_rowwise_fused);
  EXPECT_GT(r.fp8_inexact, 0u);
  EXPECT_EQ(expect_converted(tmp.file("src"), tmp.file("fp8"), ExpertFormat::fp8_rowwise_fused),
            static_cast<std::int64_t>(r.fp8_inexact));
  LoadOptions o;
  o.max_tokens = 64;
  const auto mxfp4 = converttest::run_prompts(tmp.file("src"), o);
  const auto fp8 = converttest::run_prompts(tmp.file("fp8"), o);
  const double rel = converttest::relative_error(fp8, mxfp4);
  std::printf("[convert] tiny with far-apart block exponents -> fp8: %llu of %llu values inexact, cpu logits rel. "
              "error %.3e vs mxfp4, greedy %s\n",
              static_cast<unsigned long long>(r.fp8_inexact), static_cast<unsigned long long>(r.fp8_values), rel,
              fp8.greedy == mxfp4.greedy ? "identical" : "differs");
  // The lost values are 2^-20 of their row's largest: far below the logits' scale.
  EXPECT_LT(rel, 1e-4);
}

TEST(Convert, pycoder_tiny_keeps_its_tokenizer_and_its_greedy_tokens) {
  TempDir tmp;
  const ConvertResult r = convert_into(kPycoder, tmp, "bf16", ExpertFormat::bf16_fused, 1'000'000);
  const std::vector<std::string> names = sorted_names(tmp.file("bf16"));
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "MODEL_CARD.md", "config.json",
                        "model.safetensors.index.json"})
    EXPECT_NE(std::find(names.begin(), names.end(), f), names.end()) << f;
  EXPECT_EQ(testing_util::slurp_file(tmp.file("bf16") + "/tokenizer.json"),
            testing_util::slurp_file(kPycoder + "/tokenizer.json"));
  EXPECT_EQ(expect_converted(kPycoder, tmp.file("bf16"), ExpertFormat::bf16_fused), 0);
  LoadOptions o;
  o.max_tokens = 64;
  const auto mxfp4 = converttest::run_prompts(kPycoder, o);
  const auto bf16 = converttest::run_prompts(tmp.file("bf16"), o);
  EXPECT_EQ(converttest::differing_bits(bf16, mxfp4), 0);
  EXPECT_EQ(bf16.greedy, mxfp4.greedy);
  std::printf("[convert] pycoder-tiny -> bf16: %.2f MB experts in, %.2f MB out, %.3f s (%.0f MB/s written)\n",
              r.expert_bytes_in / 1e6, r.expert_bytes_out / 1e6, r.seconds, r.tensor_bytes / r.seconds / 1e6);
}

TEST(Convert, refuses_a_converted_source_a_used_outdir_the_source_itself_and_mxfp4_as_target) {
  TempDir tmp;
  convert_into(kTiny, tmp, "bf16", ExpertFormat::bf16_fused);
  ConvertOptions o;
  o.experts = ExpertFormat::fp8_rowwise_fused;
  auto again = convert_checkpoint(tmp.file("bf16"), tmp.file("x"), o);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.error().message.find("day0 convert reads MXFP4"), std::string::npos) << again.error().message;
  EXPECT_FALSE(fs::exists(tmp.file("x")));
  auto used = convert_checkpoint(kTiny, tmp.file("bf16"), o);
  ASSERT_FALSE(used.ok());
  EXPECT_NE(used.error().message.find("not empty"), std::string::npos) << used.error().message;
  auto self = convert_checkpoint(kTiny, kTiny, o);
  ASSERT_FALSE(self.ok());
  EXPECT_NE(self.error().message.find("source directory"), std::string::npos) << self.error().message;
  o.experts = ExpertFormat::mxfp4_fused;
  EXPECT_FALSE(convert_checkpoint(kTiny, tmp.file("y"), o).ok());
}

TEST(Convert, force_replaces_a_previous_conversion_without_leaving_stale_shards) {
  TempDir tmp;
  convert_into(kTiny, tmp, "out", ExpertFormat::bf16_fused, 60'000);  // many shards + index
  ConvertOptions o;
  o.experts = ExpertFormat::fp8_rowwise_fused;
  o.force = true;  // default shard size: one model.safetensors, no index
  auto r = convert_checkpoint(kTiny, tmp.file("out"), o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(sorted_names(tmp.file("out")), (std::vector<std::string>{"config.json", "model.safetensors"}));
  auto spec = model_spec_from_dir(tmp.file("out"));
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_EQ(spec->layers[0].channel.moe.down.format, ExpertFormat::fp8_rowwise_fused);
}

// One "error: ..." line and a non-zero exit.
void expect_one_error(const testing_util::Proc& p, const std::string& needle) {
  EXPECT_EQ(p.signal, 0) << p.what;
  EXPECT_NE(p.exit_code, 0) << p.what;
  EXPECT_EQ(p.err.rfind("error: ", 0), 0u) << p.what;
  EXPECT_EQ(std::count(p.err.begin(), p.err.end(), '\n'), 1) << p.what;
  EXPECT_NE(p.err.find(needle), std::string::npos) << p.what;
}

TEST(ConvertCli, converts_reports_inspects_and_refuses_bad_input_in_one_line) {
  TempDir tmp;
  const std::string out = tmp.file("fp8");
  auto ok = testing_util::run_day0({"convert", kTiny, out, "--experts", "fp8", "--shard-bytes", "100KB"});
  ASSERT_EQ(ok.exit_code, 0) << ok.what;
  for (const char* line : {" shards + model.safetensors.index.json", "4 matrices mxfp4 -> fp8_e4m3_rowwise",
                           "values inexact", "MB/s written"})
    EXPECT_NE(ok.out.find(line), std::string::npos) << line << "\n" << ok.out;
  EXPECT_NE(ok.err.find("convert "), std::string::npos) << ok.err;  // progress

  auto inspect = testing_util::run_day0({"inspect", out, "--backend", "cuda", "--expert-compute", "fp8"});
  ASSERT_EQ(inspect.exit_code, 0) << inspect.what;
  for (const char* line : {"fp8_e4m3_rowwise experts (converted from mxfp4 by day0 convert)",
                           "f8_e4m3 (fp8_e4m3_rowwise experts)", "f32 (fp8_e4m3_rowwise row scales)",
                           "experts stored as fp8_rowwise, read in place (fp8 GEMMs)", "0 problems"})
    EXPECT_NE(inspect.out.find(line), std::string::npos) << line << "\n" << inspect.out;
  // The stored format decides the compute: a mismatched --expert-compute is a note in the plan, not a failure.
  auto mismatched = testing_util::run_day0({"inspect", out, "--backend", "cuda"});
  ASSERT_EQ(mismatched.exit_code, 0) << mismatched.what;
  EXPECT_NE(mismatched.out.find("run with --expert-compute fp8, not bf16; planned with fp8"), std::string::npos)
      << mismatched.out;

  expect_one_error(testing_util::run_day0({"convert", kTiny, tmp.file("a"), "--experts", "int4"}), "--experts");
  expect_one_error(testing_util::run_day0({"convert", kTiny, tmp.file("b")}), "--experts");
  expect_one_error(testing_util::run_day0({"convert", kTiny, out, "--experts", "bf16"}), "not empty");
  expect_one_error(testing_util::run_day0({"convert", out, tmp.file("c"), "--experts", "bf16"}),
                   "day0 convert reads MXFP4");
  expect_one_error(testing_util::run_day0({"convert", tmp.file("missing"), tmp.file("d"), "--experts", "bf16"}),
                   "missing");
  auto forced = testing_util::run_day0({"convert", kTiny, out, "--experts", "bf16", "--force"});
  ASSERT_EQ(forced.exit_code, 0) << forced.what;
}

}  // namespace
}  // namespace day0
