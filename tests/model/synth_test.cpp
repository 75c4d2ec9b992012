// synth_checkpoint / `day0 synth`: random checkpoints in the published layout that load, bind and run;
// byte-identical for a seed whatever the thread count or chunk size; streamed with bounded memory.
#include "model/synth.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "arch/registry.h"
#include "io/checkpoint.h"
#include "io/safetensors_writer.h"
#include "model/load.h"
#include "model/weights.h"
#include "quant/mxfp4.h"
#include "test_util/run_day0.h"
#include "test_util/temp_dir.h"
#include "tokenizer/tokenizer.h"

namespace day0 {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing_util::TempDir;

const std::string kData = D0_TEST_DATA;
const std::string kTinyConfig = kData + "/gpt_oss_tiny/config.json";

std::string slurp(const fs::path& p) { return testing_util::slurp_file(p.string()); }

std::vector<std::string> sorted_names(const fs::path& dir) {
  std::vector<std::string> v;
  for (const auto& e : fs::directory_iterator(dir)) v.push_back(e.path().filename().string());
  std::sort(v.begin(), v.end());
  return v;
}

// Tensor bytes as `day0 inspect` counts them from a config: the first accepted dtype of each tensor.
std::uint64_t predicted_bytes(const ModelSpec& spec) {
  std::uint64_t total = 0;
  for (const auto& w : spec.weights) {
    std::uint64_t n = 1;
    for (auto d : w.shape) n *= static_cast<std::uint64_t>(d);
    total += n * dtype_bits(w.dtypes.front()) / 8;
  }
  return total;
}

ModelSpec spec_of(const std::string& config_path) {
  std::ifstream in(config_path);
  auto spec = model_spec_from_config(json::parse(in));
  EXPECT_TRUE(spec.ok()) << spec.error().message;
  return spec.ok() ? *spec : ModelSpec{};
}

long vm_hwm_kb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

TEST(Synth, tiny_config_in_three_or_more_shards_loads_binds_and_gives_finite_logits) {
  TempDir tmp;
  const std::string out = tmp.file("ckpt");
  SynthOptions opt;
  opt.seed = 7;
  opt.shard_bytes = 60000;  // the tiny model is ~200 KB
  std::uint64_t last_done = 0;
  int calls = 0;
  auto r = synth_checkpoint(kTinyConfig, out, opt, [&](const SynthProgress& p) {
    EXPECT_GE(p.bytes_done, last_done);
    last_done = p.bytes_done;
    ++calls;
  });
  ASSERT_TRUE(r.ok()) << r.error().message;
  const ModelSpec spec = spec_of(kTinyConfig);
  ASSERT_GE(r->shards, 3);
  EXPECT_GT(calls, 0);
  EXPECT_EQ(last_done, r->tensor_bytes);
  EXPECT_EQ(r->tensors, spec.weights.size());
  EXPECT_EQ(r->tensor_bytes, predicted_bytes(spec));

  std::vector<std::string> expect = {"config.json", "model.safetensors.index.json"};
  for (int k = 1; k <= r->shards; ++k) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", k, r->shards);
    expect.push_back(name);
  }
  std::sort(expect.begin(), expect.end());
  EXPECT_EQ(sorted_names(out), expect);
  EXPECT_EQ(slurp(out + "/config.json"), slurp(kTinyConfig));
  const json index = json::parse(slurp(out + "/model.safetensors.index.json"));
  EXPECT_EQ(index["metadata"]["total_size"].get<std::uint64_t>(), r->tensor_bytes);
  EXPECT_EQ(index["weight_map"].size(), spec.weights.size());

  auto ck = Checkpoint::open_dir(out);
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  EXPECT_EQ(ck->files().size(), static_cast<std::size_t>(r->shards));
  EXPECT_EQ(ck->total_bytes(), r->tensor_bytes);
  const WeightCheck check = check_weights(spec, *ck);
  EXPECT_TRUE(check.ok()) << check.problems.front().name << ": " << check.problems.front().fault;
  EXPECT_TRUE(check.unexpected.empty());
  for (const auto& w : spec.weights) {
    const auto* e = ck->find(w.name);
    ASSERT_NE(e, nullptr) << w.name;
    EXPECT_EQ(e->info->dtype, w.dtypes.front() == DType::u8 ? DType::u8 : DType::bf16)
        << w.name;
  }
  auto bound = ModelWeights::bind(spec, *ck);
  ASSERT_TRUE(bound.ok()) << bound.error().message;

  // Values: matrices ~N(0, 0.02), norms ~1, MXFP4 scales those of such values (2^-8..2^-6), not random bytes.
  auto stats = [&](const std::string& name) {
    const Tensor t = ck->tensor(name)->clone().to_f32();
    double s = 0, s2 = 0;
    for (std::int64_t i = 0; i < t.numel(); ++i) s += t.data<float>()[i], s2 += double(t.data<float>()[i]) * t.data<float>()[i];
    const double mean = s / t.numel();
    return std::pair{mean, std::sqrt(s2 / t.numel() - mean * mean)};
  };
  const auto [emb_mean, emb_std] = stats("model.embed_tokens.weight");
  EXPECT_NEAR(emb_mean, 0.0, 0.002);
  EXPECT_NEAR(emb_std, 0.02, 0.002);
  EXPECT_NEAR(stats("model.norm.weight").first, 1.0, 0.01);
  const Tensor scales = *ck->tensor("model.layers.1.mlp.experts.down_proj_scales");
  const auto* sc = static_cast<const std::uint8_t*>(scales.raw());
  const auto [lo, hi] = std::minmax_element(sc, sc + scales.numel());
  EXPECT_GE(*lo, 127 - 9);
  EXPECT_LE(*hi, 127 - 5);

  auto model = load_model(out, "cpu", 32);
  ASSERT_TRUE(model.ok()) << model.error().message;
  std::vector<std::int32_t> ids;
  for (int i = 0; i < 12; ++i) ids.push_back((i * 37 + 11) % spec.vocab_size);
  auto logits = model->executor->forward(ids, /*all_logits=*/true);
  ASSERT_TRUE(logits.ok()) << logits.error().message;
  const Tensor l = logits->to_f32();
  ASSERT_EQ(l.numel(), std::int64_t(ids.size()) * spec.vocab_size);
  for (std::int64_t i = 0; i < l.numel(); ++i) ASSERT_TRUE(std::isfinite(l.data<float>()[i])) << i;
}

TEST(Synth, same_seed_gives_identical_bytes_whatever_the_threads_and_chunks_and_another_seed_differs) {
  TempDir tmp;
  auto make = [&](const std::string& name, std::uint64_t seed, int threads, std::size_t chunk) {
    SynthOptions opt;
    opt.seed = seed;
    opt.shard_bytes = 70000;
    opt.threads = threads;
    opt.chunk_bytes = chunk;
    auto r = synth_checkpoint(kTinyConfig, tmp.file(name), opt);
    EXPECT_TRUE(r.ok()) << r.error().message;
    return tmp.path() / name;
  };
  const fs::path a = make("a", 42, 1, 16u << 20), b = make("b", 42, 3, 4096), c = make("c", 43, 2, 16u << 20);
  ASSERT_EQ(sorted_names(a), sorted_names(b));
  ASSERT_EQ(sorted_names(a), sorted_names(c));
  int differing = 0;
  for (const auto& name : sorted_names(a)) {
    EXPECT_EQ(slurp(a / name), slurp(b / name)) << name;
    if (name.ends_with(".safetensors")) {
      EXPECT_EQ(slurp(a / name).size(), slurp(c / name).size()) << name;
      differing += slurp(a / name) != slurp(c / name);
    }
  }
  EXPECT_EQ(differing, static_cast<int>(sorted_names(a).size()) - 2);  // every shard, not the index or config
}

TEST(Synth, a_20b_shaped_config_streams_with_bounded_memory_and_matches_inspect) {
  TempDir tmp;
  // gpt-oss-20b's widths (hidden 2880, head_dim 64, MXFP4 experts), cut to ~56 MB.
  json config = json::parse(slurp(kData + "/configs/gpt-oss-20b/config.json"));
  config["num_hidden_layers"] = 2;
  config["layer_types"] = {"sliding_attention", "full_attention"};
  config["num_local_experts"] = 4;
  config["num_experts_per_tok"] = 2;
  config["experts_per_token"] = 2;
  config["vocab_size"] = 1024;
  config["num_attention_heads"] = 8;
  config["intermediate_size"] = 576;
  fs::create_directories(tmp.path() / "config_only");
  const std::string config_path = tmp.file("config_only/config.json");
  std::ofstream(config_path) << config.dump(2);
  const ModelSpec spec = spec_of(config_path);

  SynthOptions opt;
  opt.seed = 1;
  opt.shard_bytes = 20'000'000;
  opt.threads = 2;
  opt.chunk_bytes = 4u << 20;
  std::ofstream("/proc/self/clear_refs") << "5";  // reset VmHWM to the current RSS
  const long before_kb = vm_hwm_kb();
  auto r = synth_checkpoint(config_path, tmp.file("out"), opt);
  const long peak_kb = vm_hwm_kb();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_GT(r->tensor_bytes, 50'000'000u);
  EXPECT_EQ(r->shards, 3);
  EXPECT_EQ(r->tensor_bytes, predicted_bytes(spec));
  // One 4 MB chunk buffer and one tensor's MXFP4 scales (~0.4 MB), not the model: measured ~9 MB in
  // Release, ~19 MB under ASan (its allocator and per-thread stacks), against 57 MB written.
  const double growth = (peak_kb - before_kb) * 1024.0;
  EXPECT_LT(growth, 0.5 * double(r->tensor_bytes)) << "peak RSS grew " << growth / 1e6 << " MB";
  std::printf("[synth] %.1f MB in %.2f s (%.0f MB/s), peak RSS growth %.1f MB\n", r->tensor_bytes / 1e6, r->seconds,
              r->tensor_bytes / r->seconds / 1e6, growth / 1e6);

  // `day0 inspect` of the config alone predicts the bytes the synthesized checkpoint then reports.
  auto bytes_line = [](const std::string& out) {
    const auto at = out.find("\nbytes");
    if (at == std::string::npos) return std::string();
    std::string line = out.substr(at + 1, out.find_first_of("(\n", at + 1) - at - 1);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    return line;
  };
  const auto predicted = testing_util::run_day0({"inspect", tmp.file("config_only")});
  const auto actual = testing_util::run_day0({"inspect", tmp.file("out")});
  ASSERT_EQ(predicted.exit_code, 0) << predicted.what;
  ASSERT_EQ(actual.exit_code, 0) << actual.what;
  EXPECT_FALSE(bytes_line(predicted.out).empty()) << predicted.out;
  EXPECT_EQ(bytes_line(predicted.out), bytes_line(actual.out));
  EXPECT_NE(actual.out.find("3 files, " + std::to_string(spec.weights.size()) + " tensors expected, 0 problems, 0 unexpected"),
            std::string::npos)
      << actual.out;
}

TEST(SafetensorsWriter, streams_declared_tensors_in_order_and_refuses_overruns_disorder_and_short_files) {
  TempDir tmp;
  const std::vector<TensorDecl> decls = {{"b", DType::u8, {3}}, {"a", DType::bf16, {2}}};
  auto w = SafetensorsWriter::create(tmp.file("ok.safetensors"), decls, {{"format", "pt"}});
  ASSERT_TRUE(w.ok()) << w.error().message;
  EXPECT_EQ((*w)->header_bytes() % 8, 0u);
  ASSERT_TRUE((*w)->write_tensor("b", 2, [](std::uint64_t off, std::span<std::byte> c) {
    for (std::size_t i = 0; i < c.size(); ++i) c[i] = std::byte(off + i + 1);
    return Status::success();
  }).ok());
  const std::uint16_t a[2] = {0x3f80, 0x4000};
  ASSERT_TRUE((*w)->append(a, sizeof a).ok());
  ASSERT_TRUE((*w)->close().ok());
  auto f = SafetensorsFile::open(tmp.file("ok.safetensors"));
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ((*f)->metadata().at("format"), "pt");
  const Tensor b = (*f)->tensor(*(*f)->find("b"));
  EXPECT_EQ(std::memcmp(b.raw(), "\x01\x02\x03", 3), 0);
  EXPECT_EQ((*f)->find("a")->begin, 3u);  // declared order, not name order

  auto over = SafetensorsWriter::create(tmp.file("over.safetensors"), decls);
  ASSERT_TRUE(over.ok());
  EXPECT_FALSE((*over)->append(std::string(8, 'x').data(), 8).ok());  // the data region holds 7
  auto disorder = SafetensorsWriter::create(tmp.file("disorder.safetensors"), decls);
  ASSERT_TRUE(disorder.ok());
  EXPECT_FALSE((*disorder)->write_tensor("a", 4, [](std::uint64_t, std::span<std::byte>) { return Status::success(); }).ok());
  auto short_file = SafetensorsWriter::create(tmp.file("short.safetensors"), decls);
  ASSERT_TRUE(short_file.ok());
  ASSERT_TRUE((*short_file)->append("xyz", 3).ok());
  const Status s = (*short_file)->close();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("\"a\" incomplete"), std::string::npos) << s.error().message;
  over->reset(), disorder->reset(), short_file->reset();
  EXPECT_EQ(sorted_names(tmp.path()), std::vector<std::string>{"ok.safetensors"});  // no temporary files left
  EXPECT_FALSE(SafetensorsWriter::create(tmp.file("dup.safetensors"), {decls[0], decls[0]}).ok());
}

// One "error: ..." line and a non-zero exit.
void expect_one_error(const testing_util::Proc& p, const std::string& needle) {
  EXPECT_EQ(p.signal, 0) << p.what;
  EXPECT_NE(p.exit_code, 0) << p.what;
  EXPECT_EQ(p.err.rfind("error: ", 0), 0u) << p.what;
  EXPECT_EQ(std::count(p.err.begin(), p.err.end(), '\n'), 1) << p.what;
  EXPECT_NE(p.err.find(needle), std::string::npos) << p.what;
}

TEST(Synth, in_memory_tensors_equal_the_checkpoint_byte_for_byte_and_load_without_files) {
  TempDir tmp;
  const std::string out = tmp.file("ckpt");
  SynthOptions opt;
  opt.seed = 11;
  opt.shard_bytes = 60000;
  auto r = synth_checkpoint(kTinyConfig, out, opt);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const ModelSpec spec = spec_of(kTinyConfig);
  auto mem = synth_tensors(spec, 11, 3);
  ASSERT_TRUE(mem.ok()) << mem.error().message;
  auto ck = Checkpoint::open_dir(out);
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  auto bound = ModelWeights::bind(spec, *ck);
  ASSERT_TRUE(bound.ok()) << bound.error().message;
  ASSERT_EQ(mem->size(), bound->tensors().size());
  for (const auto& [name, t] : bound->tensors()) {
    SCOPED_TRACE(name);
    ASSERT_EQ(mem->count(name), 1u);
    const Tensor& m = mem->at(name);
    ASSERT_EQ(m.shape(), t.shape());
    ASSERT_EQ(m.dtype(), t.dtype());
    EXPECT_EQ(std::memcmp(m.raw(), t.raw(), t.nbytes()), 0);
  }
  auto other = synth_tensors(spec, 12, 1);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(std::memcmp(other->begin()->second.raw(), mem->begin()->second.raw(), mem->begin()->second.nbytes()), 0);

  // load_model with synthetic weights: a directory with only config.json, and the same logits as the files.
  const std::string cfg_dir = tmp.file("config_only");
  fs::create_directories(cfg_dir);
  fs::copy_file(kTinyConfig, cfg_dir + "/config.json");
  LoadOptions lo;
  lo.max_tokens = 16;
  lo.synthetic = true;
  lo.synthetic_seed = 11;
  auto synthetic = load_model(cfg_dir, lo);
  ASSERT_TRUE(synthetic.ok()) << synthetic.error().message;
  EXPECT_EQ(synthetic->weight_bytes, r->tensor_bytes);
  auto from_files = load_model(out, "cpu", 16);
  ASSERT_TRUE(from_files.ok()) << from_files.error().message;
  const std::vector<std::int32_t> prompt = {1, 2, 3, 4};
  auto a = synthetic->executor->forward(prompt);
  auto b = from_files->executor->forward(prompt);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(std::memcmp(a->raw(), b->raw(), a->nbytes()), 0);
}

TEST(BenchCli, runs_on_synthetic_weights_from_a_config_alone_and_writes_json) {
  TempDir tmp;
  const std::string cfg_dir = tmp.file("config_only");
  fs::create_directories(cfg_dir);
  fs::copy_file(kTinyConfig, cfg_dir + "/config.json");
  auto run = testing_util::run_day0({"bench", cfg_dir, "--synthetic", "--prefill", "8", "--batches", "1,2",
                                     "--contexts", "16", "--decode-steps", "2", "--json", tmp.file("b.json"),
                                     "--kernels"});
  ASSERT_EQ(run.exit_code, 0) << run.what << run.err;
  EXPECT_NE(run.out.find("synthetic "), std::string::npos) << run.out;
  const json report = json::parse(slurp(tmp.file("b.json")));
  // No --backend: the GPU where there is one, else the CPU; --kernels traces CUDA kernels, and on the CPU backend it
  // says so once and the bench runs as without it.
  if (cuda_device_available()) {
    EXPECT_EQ(report["backend"], "cuda");
  } else {
    EXPECT_EQ(report["backend"], "cpu");
    EXPECT_NE(run.out.find("kernels     not traced on the cpu backend"), std::string::npos) << run.out;
  }
  EXPECT_TRUE(report["load"]["synthetic"].get<bool>());
  EXPECT_EQ(report["decode"].size(), 2u);
  EXPECT_GT(report["decode"][1]["tokens_per_s"].get<double>(), 0);
  // Without --synthetic the same directory has no checkpoint: one clear error.
  auto none = testing_util::run_day0({"bench", cfg_dir, "--prefill", "8", "--batches", "1", "--contexts", "16"});
  EXPECT_NE(none.exit_code, 0);
  EXPECT_NE(none.err.find("error: "), std::string::npos) << none.err;
}

TEST(SynthCli, writes_reports_and_refuses_bad_input_in_one_line) {
  TempDir tmp;
  const std::string out = tmp.file("out");
  auto ok = testing_util::run_day0({"synth", kTinyConfig, out, "--seed", "3", "--shard-bytes", "60KB"});
  ASSERT_EQ(ok.exit_code, 0) << ok.what;
  EXPECT_NE(ok.out.find(" shards + model.safetensors.index.json"), std::string::npos) << ok.out;
  EXPECT_NE(ok.err.find("synth "), std::string::npos) << ok.err;  // progress
  auto inspect = testing_util::run_day0({"inspect", out});
  EXPECT_EQ(inspect.exit_code, 0) << inspect.what;
  // A synthetic tokenizer of the config's vocabulary (256 ids, no special ids in this config) beside it.
  EXPECT_NE(ok.out.find("tokenizer  tokenizer.json (synthetic byte-level BPE, 256 ids, 0 of them special)"),
            std::string::npos)
      << ok.out;
  auto tokenizer = Tokenizer::from_file((fs::path(out) / "tokenizer.json").string());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().message;
  EXPECT_EQ(tokenizer->vocab_size(), 256);

  // A non-empty OUTDIR is refused unless --force; --force replaces the checkpoint (here: one file) and keeps a
  // tokenizer.json that is there.
  expect_one_error(testing_util::run_day0({"synth", kTinyConfig, out}), "not empty");
  auto forced = testing_util::run_day0({"synth", kData + "/gpt_oss_tiny", out, "--force"});
  ASSERT_EQ(forced.exit_code, 0) << forced.what;
  EXPECT_EQ(sorted_names(out), (std::vector<std::string>{"config.json", "model.safetensors", "tokenizer.json"}));
  EXPECT_NE(forced.out.find("kept the tokenizer.json already there"), std::string::npos) << forced.out;

  // Unknown architecture, unreadable config, an OUTDIR that cannot be created, a zero shard size.
  json bad = json::parse(slurp(kTinyConfig));
  bad["model_type"] = "no_such_arch";
  std::ofstream(tmp.file("bad.json")) << bad.dump();
  expect_one_error(testing_util::run_day0({"synth", tmp.file("bad.json"), tmp.file("o1")}), "unknown model_type");
  EXPECT_FALSE(fs::exists(tmp.file("o1")));
  expect_one_error(testing_util::run_day0({"synth", tmp.file("missing.json"), tmp.file("o2")}), "missing.json");
  std::ofstream(tmp.file("plain_file")) << "x";
  expect_one_error(testing_util::run_day0({"synth", kTinyConfig, tmp.file("plain_file") + "/sub"}), "cannot create");
  expect_one_error(testing_util::run_day0({"synth", kTinyConfig, tmp.file("o3"), "--shard-bytes", "0"}), "shard-bytes");
}

}  // namespace
}  // namespace day0
