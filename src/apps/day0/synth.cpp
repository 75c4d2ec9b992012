// day0 synth: a checkpoint with random weights in the published layout, for rehearsing load, memory and
// speed at real scale before real weights exist. Progress on stderr, the summary on stdout.
#include <cstdio>
#include <string>

#include "apps/day0/commands.h"
#include "apps/day0/write_progress.h"
#include "model/synth.h"

namespace day0::app {

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
  return 0;
}

}  // namespace day0::app
