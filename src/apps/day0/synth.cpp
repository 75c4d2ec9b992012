// day0 synth: a checkpoint with random weights in the published layout, for rehearsing load, memory and
// speed at real scale before real weights exist. Progress on stderr, the summary on stdout. A synthetic
// tokenizer.json of the config's vocabulary goes beside it (where none is there), so `day0 serve` runs it too.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/day0/commands.h"
#include "apps/day0/write_progress.h"
#include "io/checkpoint_output.h"
#include "model/synth.h"
#include "tokenizer/synthetic_tokenizer.h"

namespace day0::app {
namespace {

// OUTDIR/tokenizer.json from the config written there: vocab_size ids, its bos / eos / pad ids special. Returns
// the line for the summary; an existing tokenizer.json (the real one, say) is kept.
Result<std::string> write_synthetic_tokenizer(const std::string& outdir, std::uint64_t seed) {
  const std::filesystem::path dir = outdir, path = dir / "tokenizer.json";
  if (std::filesystem::exists(path)) return std::string("kept the tokenizer.json already there");
  std::ifstream in(dir / "config.json");
  const nlohmann::json config = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!config.is_object() || !config.contains("vocab_size") || !config["vocab_size"].is_number_integer())
    return std::string("no tokenizer.json: the config has no integer vocab_size");
  std::vector<std::int32_t> special;
  for (const char* key : {"bos_token_id", "eos_token_id", "pad_token_id"}) {
    if (!config.contains(key)) continue;
    const nlohmann::json& v = config[key];
    if (v.is_number_integer()) special.push_back(v.get<std::int32_t>());
    if (v.is_array())
      for (const auto& e : v)
        if (e.is_number_integer()) special.push_back(e.get<std::int32_t>());
  }
  const auto vocab = config["vocab_size"].get<std::int64_t>();
  auto json = synthetic_tokenizer_json(vocab, special, seed);
  if (!json.ok()) return "no tokenizer.json: " + json.error().message;
  D0_RETURN_IF_ERROR(write_file_atomically(path.string(), *json));
  return "tokenizer.json (synthetic byte-level BPE, " + std::to_string(vocab) + " ids, " +
         std::to_string(special.size()) + " of them special)";
}

}  // namespace

int synth(const SynthCommandOptions& o) {
  SynthOptions opt;
  opt.seed = o.seed;
  opt.shard_bytes = o.shard_bytes;
  opt.threads = o.threads;
  opt.force = o.force;
  WriteProgress line("synth");
  auto progress = [&](const SynthProgress& p) {
    line.update(p.bytes_done, p.bytes_total, p.seconds,
                "  shard " + std::to_string(p.file) + "/" + std::to_string(p.files));
  };
  auto r = synth_checkpoint(o.config, o.outdir, opt, progress);
  line.finish();
  if (!r.ok()) return fail(r.error().message);
  const double secs = r->seconds;
  std::printf("wrote      %s: %d shard%s%s + config.json\n", o.outdir.c_str(), r->shards, r->shards == 1 ? "" : "s",
              r->shards > 1 ? " + model.safetensors.index.json" : "");
  std::printf("tensors    %zu, %s (%llu bytes) of tensor data, %llu bytes in shard files\n", r->tensors,
              gb(double(r->tensor_bytes)).c_str(), static_cast<unsigned long long>(r->tensor_bytes),
              static_cast<unsigned long long>(r->shard_file_bytes));
  std::printf("time       %.2f s, %.0f MB/s, seed %llu\n", secs, secs > 0 ? r->tensor_bytes / secs / 1e6 : 0.0,
              static_cast<unsigned long long>(o.seed));
  auto tokenizer = write_synthetic_tokenizer(o.outdir, o.seed);
  if (!tokenizer.ok()) return fail(tokenizer.error().message);
  std::printf("tokenizer  %s\n", tokenizer->c_str());
  return 0;
}

}  // namespace day0::app
