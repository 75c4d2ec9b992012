// The day0 binary end to end, run as a subprocess: malformed checkpoints, bad configs and bad arguments
// end in exactly one "error: ..." line on stderr and a non-zero exit (never a signal); the published
// gpt-oss configs inspect to the model cards' numbers; the tiny fixture inspects, runs and compares clean.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "arch/registry.h"
#include "io/safetensors.h"
#include "model/op_plan.h"
#include "quant/mxfp4.h"
#include "test_util/run_day0.h"
#include "test_util/temp_dir.h"

namespace day0 {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const std::string kData = D0_TEST_DATA;
const std::string kTiny = kData + "/gpt_oss_tiny";
const std::string kShard1 = "model-00001-of-00002.safetensors";
const std::string kShard2 = "model-00002-of-00002.safetensors";
const std::string kIndex = "model.safetensors.index.json";

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void spit(const fs::path& p, const std::string& contents) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << contents;
  ASSERT_TRUE(out.good()) << p;
}

// A temporary directory whose file() is a path (the CLI tests join and copy paths).
class TempDir : public testing_util::TempDir {
 public:
  fs::path file(const std::string& name) const { return path() / name; }
};

using testing_util::Proc;

Proc day0(const std::vector<std::string>& args) { return testing_util::run_day0(args); }

// The command must exit non-zero (not by a signal) with exactly one stderr line "error: ..." holding
// every needle.
void expect_one_error(const std::vector<std::string>& args, std::initializer_list<std::string> needles) {
  const Proc p = day0(args);
  const std::string& what = p.what;  // the command line and its stderr
  EXPECT_EQ(p.signal, 0) << "killed by a signal: " << what;
  EXPECT_NE(p.exit_code, 0) << what;
  EXPECT_EQ(p.err.rfind("error: ", 0), 0u) << what;
  EXPECT_EQ(std::count(p.err.begin(), p.err.end(), '\n'), 1) << "not one line: " << what;
  EXPECT_TRUE(p.err.ends_with('\n')) << what;
  for (const auto& n : needles) EXPECT_NE(p.err.find(n), std::string::npos) << "no '" << n << "' in: " << what;
}

// Both commands that open the weights must refuse `dir` with one line holding every needle.
void expect_inspect_and_run_fail(const std::string& dir, std::initializer_list<std::string> needles) {
  expect_one_error({"inspect", dir}, needles);
  expect_one_error({"run", dir, "--prompt-ids", "1,2,3", "--max-tokens", "2"}, needles);
}

// A copy of the tiny checkpoint (config, index, both shards) to corrupt.
class TinyCopy : public TempDir {
 public:
  TinyCopy() {
    for (const auto& e : fs::directory_iterator(kTiny))
      if (e.is_regular_file()) fs::copy_file(e.path(), file(e.path().filename().string()));
  }

  // The raw layout of a shard: JSON header and the data bytes after it.
  struct Raw {
    json header;
    std::string data;
  };
  Raw read_raw(const std::string& shard) const {
    const std::string bytes = slurp(file(shard));
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
    return {json::parse(bytes.substr(8, n)), bytes.substr(8 + n)};
  }
  // Writes `length` (little-endian), then `header_text`, then `data`.
  void write_raw(const std::string& shard, std::uint64_t length, const std::string& header_text,
                 const std::string& data) const {
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((length >> (8 * i)) & 0xff);
    spit(file(shard), bytes + header_text + data);
  }
  void write_raw(const std::string& shard, const Raw& raw) const {
    write_raw(shard, raw.header.dump().size(), raw.header.dump(), raw.data);
  }
  // Rewrites a shard through write_safetensors after `edit` changes its tensors.
  void rewrite_shard(const std::string& shard,
                     const std::function<void(std::vector<std::pair<std::string, Tensor>>&)>& edit) const {
    std::vector<std::pair<std::string, Tensor>> tensors;
    {
      auto f = SafetensorsFile::open(file(shard).string());
      ASSERT_TRUE(f.ok()) << f.error().message;
      for (const auto& info : (*f)->tensors()) tensors.emplace_back(info.name, (*f)->tensor(info).clone());
    }
    edit(tensors);
    Status s = write_safetensors(file(shard).string(), tensors);
    ASSERT_TRUE(s.ok()) << s.error().message;
  }
  void edit_index(const std::function<void(json&)>& edit) const {
    json index = json::parse(slurp(file(kIndex)));
    edit(index);
    spit(file(kIndex), index.dump(2));
  }
};

void replace_tensor(std::vector<std::pair<std::string, Tensor>>& ts, const std::string& name, Tensor t) {
  auto it = std::find_if(ts.begin(), ts.end(), [&](const auto& e) { return e.first == name; });
  ASSERT_NE(it, ts.end()) << name << " not in the shard";
  it->second = std::move(t);
}

// --- 1. malformed checkpoints ---

TEST(Day0CliMalformedCheckpoint, TruncatedShardIsRefusedNamingTheShard) {
  TinyCopy d;
  const std::string bytes = slurp(d.file(kShard2));
  spit(d.file(kShard2), bytes.substr(0, bytes.size() - 100));
  expect_inspect_and_run_fail(d.str(), {kShard2, "truncated"});
}

TEST(Day0CliMalformedCheckpoint, HugeHeaderLengthIsRefusedAsOversized) {
  TinyCopy d;
  const auto raw = d.read_raw(kShard1);
  d.write_raw(kShard1, 0xFFFF'FFFF'FFFF'FFF0ull, raw.header.dump(), raw.data);
  expect_inspect_and_run_fail(d.str(), {kShard1, "oversized header"});
}

TEST(Day0CliMalformedCheckpoint, HeaderLengthBeyondTheFileIsRefusedAsTruncatedHeader) {
  TinyCopy d;
  const auto raw = d.read_raw(kShard1);
  const std::string text = raw.header.dump();
  d.write_raw(kShard1, text.size() + raw.data.size() + 1, text, raw.data);
  expect_inspect_and_run_fail(d.str(), {kShard1, "truncated header"});
}

TEST(Day0CliMalformedCheckpoint, HeaderThatIsNotJsonIsRefusedAsInvalidHeader) {
  TinyCopy d;
  const auto raw = d.read_raw(kShard2);
  const std::string text = "{\"lm_head.weight\": {\"dtype\": \"BF16\", [[[";
  d.write_raw(kShard2, text.size(), text, raw.data);
  expect_inspect_and_run_fail(d.str(), {kShard2, "invalid header", "JSON"});
}

TEST(Day0CliMalformedCheckpoint, OverlappingTensorOffsetsAreRefusedNamingBothTensors) {
  TinyCopy d;
  auto raw = d.read_raw(kShard1);
  const std::string a = "model.layers.0.input_layernorm.weight", b = "model.layers.0.post_attention_layernorm.weight";
  raw.header[b]["data_offsets"] = raw.header[a]["data_offsets"];  // same size: only the overlap is wrong
  d.write_raw(kShard1, raw);
  expect_inspect_and_run_fail(d.str(), {kShard1, a, b, "overlap"});
}

TEST(Day0CliMalformedCheckpoint, UnknownDtypeNameIsRefusedNamingTheTensorAndDtype) {
  TinyCopy d;
  auto raw = d.read_raw(kShard2);
  raw.header["model.norm.weight"]["dtype"] = "wrong-dtype";
  d.write_raw(kShard2, raw);
  expect_inspect_and_run_fail(d.str(), {kShard2, "model.norm.weight", "unknown dtype", "wrong-dtype"});
}

TEST(Day0CliMalformedCheckpoint, MissingShardFileIsRefusedNamingIndexAndShard) {
  TinyCopy d;
  fs::remove(d.file(kShard2));
  expect_inspect_and_run_fail(d.str(), {kIndex, kShard2, "missing"});
}

TEST(Day0CliMalformedCheckpoint, IndexShardOutsideTheDirectoryIsRefused) {
  TinyCopy d;
  d.edit_index([](json& j) { j["weight_map"]["model.norm.weight"] = "../x.safetensors"; });
  expect_inspect_and_run_fail(d.str(), {kIndex, "../x.safetensors", "model.norm.weight", "directory"});
}

TEST(Day0CliMalformedCheckpoint, TensorOfTheWrongShapeIsNamedWithItsShape) {
  TinyCopy d;
  d.rewrite_shard(
      kShard1, [](auto& ts) { replace_tensor(ts, "model.layers.0.self_attn.sinks", Tensor::zeros({5}, DType::bf16)); });
  expect_inspect_and_run_fail(d.str(), {"model.layers.0.self_attn.sinks", "shape [5]", "[4]"});
}

TEST(Day0CliMalformedCheckpoint, MissingTensorIsNamedAsMissing) {
  TinyCopy d;
  const std::string name = "model.layers.1.mlp.router.bias";
  d.rewrite_shard(kShard2, [&](auto& ts) { std::erase_if(ts, [&](const auto& t) { return t.first == name; }); });
  d.edit_index([&](json& j) { j["weight_map"].erase(name); });
  expect_inspect_and_run_fail(d.str(), {name, "missing"});
}

TEST(Day0CliMalformedCheckpoint, ExpertBlocksInBf16InsteadOfU8AreNamedWithTheirDtype) {
  TinyCopy d;
  const std::string name = "model.layers.0.mlp.experts.gate_up_proj_blocks";
  d.rewrite_shard(kShard1, [&](auto& ts) { replace_tensor(ts, name, Tensor::zeros({4, 192, 2, 16}, DType::bf16)); });
  expect_inspect_and_run_fail(d.str(), {name, "dtype bf16", "u8"});
}

// --- 2. bad configs ---

// A config-only directory holding the 20b config after `edit`.
void write_config(const TempDir& d, const std::function<void(json&)>& edit) {
  json config = json::parse(slurp(kData + "/configs/gpt-oss-20b/config.json"));
  edit(config);
  spit(d.file("config.json"), config.dump(2));
}

TEST(Day0CliBadConfig, UnknownModelTypeListsTheSupportedFamilies) {
  TempDir d;
  write_config(d, [](json& c) { c["model_type"] = "llama4_text"; });
  expect_inspect_and_run_fail(d.str(), {"config.json", "llama4_text", "supported: gpt_oss"});
}

TEST(Day0CliBadConfig, MissingKeysAreAllListedInOneError) {
  TempDir d;
  write_config(d, [](json& c) {
    c.erase("hidden_size");
    c.erase("num_local_experts");
  });
  expect_inspect_and_run_fail(d.str(), {"config.json", "missing", "hidden_size", "num_local_experts"});
}

TEST(Day0CliBadConfig, HostileSizesAreRefusedWithoutOverflowOrHang) {
  const std::vector<std::pair<std::function<void(json&)>, std::string>> cases = {
      {[](json& c) { c["num_attention_heads"] = c["num_key_value_heads"] = 1 << 20, c["head_dim"] = 1 << 12; },
       "head_dim"},
      {[](json& c) { c["intermediate_size"] = 1 << 30; }, "intermediate_size"},
      {[](json& c) { c["num_hidden_layers"] = 2'000'000'000, c.erase("layer_types"); }, "num_hidden_layers"},
      {[](json& c) { c["head_dim"] = 0; }, "head_dim"},
  };
  for (const auto& [edit, needle] : cases) {
    TempDir d;
    write_config(d, edit);
    expect_one_error({"inspect", d.str()}, {"config.json", needle});
  }
}

TEST(Day0CliBadConfig, ConfigThatIsNotJsonIsNamed) {
  TinyCopy d;
  spit(d.file("config.json"), "{\"model_type\": \"gpt_oss\", ");
  expect_inspect_and_run_fail(d.str(), {"config.json", "JSON"});
}

// --- 3. bad command lines ---

TEST(Day0CliBadArguments, NonNumericPromptIdIsRefused) {
  expect_one_error({"run", kTiny, "--prompt-ids", "1,x"}, {"--prompt-ids", "\"x\""});
}

TEST(Day0CliBadArguments, PromptIdOutsideTheVocabularyIsRefused) {
  expect_one_error({"run", kTiny, "--prompt-ids", "1,256"}, {"--prompt-ids", "256", "vocabulary"});
}

TEST(Day0CliBadArguments, UnknownBackendListsTheKnownOnes) {
  expect_one_error({"inspect", kTiny, "--backend", "nope"}, {"nope", "known: cpu, cuda"});
  expect_one_error({"run", kTiny, "--prompt-ids", "1", "--backend", "nope"}, {"nope", "known: cpu, cuda"});
  expect_one_error({"compare", kTiny, "--reference", kTiny + "/reference/prompt0.safetensors", "--backend", "nope"},
                   {"nope", "known: cpu, cuda"});
}

TEST(Day0CliBadArguments, UsageErrorsAreOneErrorLineToo) {
  expect_one_error({}, {"subcommand"});
  expect_one_error({"run", kTiny}, {"--prompt-ids"});
  expect_one_error({"run", kTiny, "--prompt-ids", "1", "--max-tokens", "0"}, {"--max-tokens"});
  expect_one_error({"inspect", kTiny, "--frobnicate"}, {"--frobnicate"});
  for (const char* t : {"0", "-1", "inf", "abc"})
    expect_one_error({"compare", kTiny, "--reference", kTiny + "/reference/prompt0.safetensors", "--tolerance", t},
                     {"--tolerance", "positive number", t});
}

TEST(Day0CliBadArguments, PerformanceOptionsOutOfRangeAreRefused) {
  expect_one_error({"run", kTiny, "--prompt-ids", "1", "--graph-batch", "-1"}, {"--graph-batch"});
  expect_one_error({"run", kTiny, "--prompt-ids", "1", "--fused-moe-tokens", "-5"}, {"--fused-moe-tokens"});
  expect_one_error({"bench-moe", "--tokens", "0"}, {"--tokens"});
  expect_one_error({"bench-moe", "--arena-gib", "0"}, {"--arena-gib"});
  expect_one_error({"bench-moe", "--skew", "-0.5"}, {"--skew"});
  expect_one_error({"bench-moe", "--parts", "gemms"}, {"--parts"});
  // Decode rows start at the context's end: a context that is not whole KV blocks is refused before any load.
  expect_one_error({"bench", kTiny, "--backend", "cpu", "--contexts", "30"}, {"--contexts", "multiple of 16", "30"});
  expect_one_error({"run", kTiny, "--prompt-ids", "1", "--kv-cache-dtype", "f16"}, {"--kv-cache-dtype"});
  expect_one_error({"run", kTiny, "--prompt-ids", "1", "--kv-cache-dtype", "bf16"}, {"cpu", "KV cache"});
}

TEST(Day0CliBadArguments, BenchMoeWithoutAUsableGpuIsOneClearError) {
  if (cuda_device_available()) GTEST_SKIP() << "a GPU is here: bench-moe would run";
  expect_one_error({"bench-moe", "--tokens", "1"}, {"CUDA"});
  // Every part name is accepted: the error is the GPU's, not the option's.
  expect_one_error({"bench-moe", "--tokens", "1", "--parts", "fp8-gemms", "--skew", "0.75"}, {"CUDA"});
}

TEST(Day0CliBadArguments, HelpStillPrintsUsageAndSucceeds) {
  const Proc p = day0({"--help"});
  EXPECT_EQ(p.exit_code, 0) << p.err;
  EXPECT_NE(p.out.find("inspect"), std::string::npos) << p.out;
}

// --- 4. the published configs ---

// Safetensors bytes of the published gpt_oss layout, from config.json alone: everything bf16 except the
// expert matrices, stored as MXFP4 blocks (half a byte a value) plus one u8 scale per 32 values.
double published_bytes(const std::string& config_path) {
  const json c = json::parse(slurp(config_path));
  const double H = c["hidden_size"], V = c["vocab_size"], I = c["intermediate_size"], L = c["num_hidden_layers"];
  const double E = c["num_local_experts"], q = double(c["num_attention_heads"]) * double(c["head_dim"]);
  const double kv = double(c["num_key_value_heads"]) * double(c["head_dim"]);
  const double per_layer_bf16 = 2 * H                               // norms
                                + (q * H + 2 * kv * H + H * q)      // q, k, v, o
                                + (q + 2 * kv + H)                  // their biases
                                + double(c["num_attention_heads"])  // sinks
                                + (E * H + E)                       // router
                                + E * (2 * I + H);                  // expert biases
  const double bf16 = 2 * V * H + H + L * per_layer_bf16;
  const double expert_values = L * E * (2 * I * H + H * I);
  return 2 * bf16 + expert_values / 2 + expert_values / 32;
}

// The first word after the first occurrence of `prefix` in `out` (leading spaces skipped), or "".
std::string word_after(const std::string& out, const std::string& prefix) {
  const size_t at = out.find(prefix);
  if (at == std::string::npos) return "";
  std::istringstream rest(out.substr(at + prefix.size()));
  std::string word;
  rest >> word;
  return word;
}

double printed_gigabytes(const std::string& out) {
  if (out.find(" GB", out.find("\nbytes ")) == std::string::npos) return -1;
  return std::stod(word_after(out, "\nbytes ")) * 1e9;
}

void expect_published_numbers(const std::string& model, const std::string& total, const std::string& active) {
  const std::string dir = kData + "/configs/" + model;
  const Proc p = day0({"inspect", dir});
  ASSERT_EQ(p.exit_code, 0) << p.what;
  EXPECT_TRUE(p.err.empty()) << p.err;
  EXPECT_NE(p.out.find("parameters    " + total + " total, " + active + " active per token"), std::string::npos)
      << p.out;
  const double expected = published_bytes(dir + "/config.json"), printed = printed_gigabytes(p.out);
  EXPECT_NEAR(printed, expected, 0.02 * expected) << p.out;
}

TEST(Day0CliInspectPublished, Gpt_oss_20bMatchesTheModelCard) {
  // Model card: 20.91B total, 3.61B active; the published safetensors are about 13.8 GB.
  expect_published_numbers("gpt-oss-20b", "20.915 B", "3.608 B");
}

TEST(Day0CliInspectPublished, Gpt_oss_120bMatchesTheModelCard) {
  // Model card: 116.83B total, 5.13B active; the published safetensors are about 65 GB.
  expect_published_numbers("gpt-oss-120b", "116.829 B", "5.133 B");
}

// The coverage table's row for each op the model uses, or "" if it has none.
std::vector<std::string> coverage_rows(const std::string& out, const ModelSpec& spec) {
  std::vector<std::string> rows;
  const std::string table = out.substr(std::min(out.size(), out.find("\nop coverage")));
  for (const auto& use : ops_used(spec)) {
    rows.push_back(word_after(table, "\n  " + std::string(op_kind_name(use.kind)) + " "));
  }
  return rows;
}

TEST(Day0CliInspectPublished, CpuAndCudaCoverEveryOpAndCudaReportsItsWorkspaceWithoutAGpu) {
  const std::string dir = kData + "/configs/gpt-oss-20b";
  auto spec = model_spec_from_dir(dir);
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  ASSERT_FALSE(ops_used(*spec).empty());

  const Proc cpu = day0({"inspect", dir, "--backend", "cpu"});
  ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
  EXPECT_NE(cpu.out.find("op coverage   backend cpu"), std::string::npos) << cpu.out;
  for (const auto& entry : coverage_rows(cpu.out, *spec))
    EXPECT_TRUE(entry == "native" || entry == "composed") << "entry '" << entry << "' in:\n" << cpu.out;

  const Proc cuda = day0({"inspect", dir, "--backend", "cuda"});
  ASSERT_EQ(cuda.exit_code, 0) << cuda.err;
  EXPECT_TRUE(cuda.err.empty()) << cuda.err;
  EXPECT_NE(cuda.out.find("op coverage   backend cuda"), std::string::npos) << cuda.out;
  for (const auto& entry : coverage_rows(cuda.out, *spec))
    EXPECT_TRUE(entry == "native" || entry == "composed") << "entry '" << entry << "' in:\n" << cuda.out;
  // gpt-oss-20b: 32 experts, all routed at 2,048 tokens x top-4; (5760 x 2880 + 2880 x 2880) bf16 each = 1.5 GiB+.
  EXPECT_NE(cuda.out.find("moe workspace "), std::string::npos) << cuda.out;
  EXPECT_NE(cuda.out.find("32 routed experts"), std::string::npos) << cuda.out;
}

// --- 5. the tiny fixture, clean ---

// --batch-invariant is a backend option: accepted everywhere, a no-op on the CPU (its ops are per row already).
TEST(Day0CliTinyModel, BatchInvariantIsAcceptedAndChangesNothingOnTheCpu) {
  const Proc plain = day0({"run", kTiny, "--prompt-ids", "1,2,3", "--max-tokens", "6"});
  const Proc p = day0({"run", kTiny, "--prompt-ids", "1,2,3", "--max-tokens", "6", "--batch-invariant"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_EQ(word_after(p.out, "\ngenerated ids: "), word_after(plain.out, "\ngenerated ids: "));
}

// --kv-cache-dtype auto (the default) is bf16 on the GPU and f32 in the CPU reference, which takes no other: the
// bench's report names the dtype it ran with.
TEST(Day0CliTinyModel, KvCacheDtypeAutoIsF32OnTheCpu) {
  TempDir d;
  const std::string report = d.file("bench.json").string();
  const Proc p = day0({"bench", kTiny, "--backend", "cpu", "--prefill", "16", "--batches", "1", "--contexts", "16",
                       "--decode-steps", "1", "--kv-cache-dtype", "auto", "--json", report});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  std::ifstream in(report);
  EXPECT_EQ(json::parse(in).at("kv_cache_dtype"), "f32");
}

// --expert-load: one more prefill of each size, its routers' load layer by layer (tokens x top-k routed, each expert
// taking at most every token once), in the table and the JSON.
TEST(Day0CliTinyModel, BenchExpertLoadReportsEveryMoeLayer) {
  TempDir d;
  const std::string report = d.file("bench.json").string();
  const Proc p = day0({"bench", kTiny, "--backend", "cpu", "--prefill", "24", "--batches", "1", "--contexts", "16",
                       "--decode-steps", "1", "--expert-load", "--json", report});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_NE(p.out.find("expert load (tokens an expert"), std::string::npos) << p.out;
  std::ifstream config_in(kTiny + "/config.json"), report_in(report);
  const json config = json::parse(config_in), r = json::parse(report_in);
  const int layers = config.at("num_hidden_layers"), k = config.at("num_experts_per_tok");
  const int experts = config.at("num_local_experts");
  const json& load = r.at("prefill").at(0).at("expert_load");
  ASSERT_EQ(int(load.size()), layers) << load.dump();
  for (int i = 0; i < layers; ++i) {
    SCOPED_TRACE(load[i].dump());
    EXPECT_EQ(load[i].at("layer"), i);
    EXPECT_EQ(load[i].at("step"), 0);
    EXPECT_EQ(load[i].at("assignments"), 24 * k);
    const int least = load[i].at("least"), median = load[i].at("median"), most = load[i].at("most");
    EXPECT_LE(least, median);
    EXPECT_LE(median, most);
    EXPECT_LE(most, 24);
    EXPECT_GE(most * experts, 24 * k);  // the busiest expert takes at least the average
    EXPECT_LE(load[i].at("tiles").get<int>(), experts);  // 24 tokens fill at most one 192-token tile an expert
  }
}

// Each point's tokens come from a generator of its own: the 24-token prompt routes the same whether or not a 16-token
// prefill ran before it (one generator for every point gave it other tokens, and another load, after the 16).
TEST(Day0CliTinyModel, BenchPointInputsDoNotDependOnTheOtherPoints) {
  TempDir d;
  auto load_of_24 = [&](std::vector<std::string> prefill) {
    const std::string report = d.file("bench.json").string();
    std::vector<std::string> args{"bench", kTiny, "--backend", "cpu", "--prefill"};
    args.insert(args.end(), prefill.begin(), prefill.end());
    for (const char* a : {"--batches", "1", "--contexts", "16", "--decode-steps", "1", "--expert-load", "--json"})
      args.push_back(a);
    args.push_back(report);
    const Proc p = day0(args);
    EXPECT_EQ(p.exit_code, 0) << p.err;
    std::ifstream in(report);
    const json r = json::parse(in);
    for (const json& point : r.at("prefill"))
      if (point.at("tokens") == 24) return point.at("expert_load");
    return json();
  };
  const json alone = load_of_24({"24"}), after_16 = load_of_24({"16", "24"});
  ASSERT_FALSE(alone.is_null());
  EXPECT_EQ(alone, after_16);
}

// A prompt past the step size prefills in chunks: each layer's load is reported once a step, with the step's tokens.
TEST(Day0CliTinyModel, BenchExpertLoadReportsEachChunkOfAPromptPastTheStepSize) {
  TempDir d;
  const std::string report = d.file("bench.json").string();
  const Proc p = day0({"bench", kTiny, "--backend", "cpu", "--prefill", "24", "--max-step-tokens", "16", "--batches",
                       "1", "--contexts", "16", "--decode-steps", "1", "--expert-load", "--json", report});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  std::ifstream config_in(kTiny + "/config.json"), report_in(report);
  const json config = json::parse(config_in), r = json::parse(report_in);
  const int layers = config.at("num_hidden_layers"), k = config.at("num_experts_per_tok");
  const json& load = r.at("prefill").at(0).at("expert_load");
  ASSERT_EQ(int(load.size()), 2 * layers) << load.dump();
  for (int step = 0; step < 2; ++step)
    for (int i = 0; i < layers; ++i) {
      const json& l = load[step * layers + i];
      SCOPED_TRACE(l.dump());
      EXPECT_EQ(l.at("layer"), i);
      EXPECT_EQ(l.at("step"), step);
      EXPECT_EQ(l.at("assignments"), (step == 0 ? 16 : 8) * k);
    }
}

TEST(Day0CliTinyModel, InspectFindsZeroProblems) {
  const Proc p = day0({"inspect", kTiny});
  EXPECT_EQ(p.exit_code, 0) << p.err;
  EXPECT_TRUE(p.err.empty()) << p.err;
  EXPECT_NE(p.out.find(", 0 problems, 0 unexpected"), std::string::npos) << p.out;
}

// --profile: one row per span the executor opens, calls = steps x layers where a layer opens it once, and the
// same generated ids as without it.
TEST(Day0CliTinyModel, RunWithProfilePrintsEverySpanAndChangesNothing) {
  const Proc plain = day0({"run", kTiny, "--prompt-ids", "1,2,3", "--max-tokens", "8"});
  const Proc p = day0({"run", kTiny, "--prompt-ids", "1,2,3", "--max-tokens", "8", "--profile"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_EQ(word_after(p.out, "\ngenerated ids: "), word_after(plain.out, "\ngenerated ids: "));
  ASSERT_NE(p.out.find("profile (cpu"), std::string::npos) << p.out;
  const std::string table = p.out.substr(p.out.find("profile (cpu"));
  // 8 steps (the prefill and 7 decodes) over the tiny model's 2 layers.
  for (const char* span : {"moe: experts ", "moe: norm, router and top-k ", "attention: q/k/v, rope and kv write ",
                           "attention: o projection "}) {
    std::stringstream row(word_after(table, span));
    long long calls = 0;
    row >> calls;
    EXPECT_EQ(calls, 16) << span << " in " << table;
  }
  std::stringstream lm(word_after(table, "lm_head "));
  long long lm_calls = 0;
  lm >> lm_calls;
  EXPECT_EQ(lm_calls, 8) << table;
  EXPECT_EQ(plain.out.find("profile ("), std::string::npos);
}

TEST(Day0CliTinyModel, RunPrintsTheRequestedNumberOfIdsAndThroughput) {
  const Proc p = day0({"run", kTiny, "--prompt-ids", "1,2,3", "--max-tokens", "32"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_TRUE(p.err.empty()) << p.err;
  std::stringstream ids(word_after(p.out, "\ngenerated ids: "));
  int n = 0;
  for (std::string id; std::getline(ids, id, ','); ++n) EXPECT_LT(std::stoi(id), 256) << p.out;
  EXPECT_EQ(n, 32) << p.out;
  const std::string decode = word_after(p.out, "decode 32 tokens in ");  // "<seconds> s (<rate> tok/s)"
  EXPECT_GT(std::stod(decode.empty() ? "0" : decode), 0.0) << p.out;
  EXPECT_NE(p.out.find(" tok/s); backend cpu\n", p.out.find("decode 32 tokens in ")), std::string::npos) << p.out;
}

TEST(Day0CliTinyModel, CompareAgainstTheReferenceDumpPasses) {
  const Proc p = day0({"compare", kTiny, "--reference", kTiny + "/reference/prompt0.safetensors"});
  EXPECT_EQ(p.exit_code, 0) << p.out << p.err;
  EXPECT_TRUE(p.err.empty()) << p.err;
  EXPECT_NE(p.out.find("result: PASS"), std::string::npos) << p.out;
}

}  // namespace
}  // namespace day0
