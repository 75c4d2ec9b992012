// day0 synth: a checkpoint with random weights in the published layout, for rehearsing load, memory and
// speed at real scale before real weights exist. Progress on stderr, the summary on stdout.
#include <unistd.h>

#include <cstdio>
#include <string>

#include "apps/day0/commands.h"
#include "model/synth.h"

namespace day0::app {

namespace {

std::string gb(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, bytes >= 1e8 ? "%.2f GB" : "%.1f MB", bytes >= 1e8 ? bytes / 1e9 : bytes / 1e6);
  return buf;
}

}  // namespace

int synth(const SynthCommandOptions& o) {
  SynthOptions opt;
  opt.seed = o.seed;
  opt.shard_bytes = o.shard_bytes;
  opt.threads = o.threads;
  opt.force = o.force;
  const bool tty = ::isatty(2) != 0;
  double last = -1e9;
  bool open_line = false;
  auto progress = [&](const SynthProgress& p) {
    const bool done = p.bytes_done == p.bytes_total;
    if (!done && p.seconds - last < (tty ? 0.25 : 5.0)) return;
    last = p.seconds;
    const double mbs = p.seconds > 0 ? p.bytes_done / p.seconds / 1e6 : 0.0;
    std::fprintf(stderr, "%ssynth  %s / %s (%.1f%%)  %.0f MB/s  shard %d/%d%s", tty ? "\r" : "",
                 gb(double(p.bytes_done)).c_str(), gb(double(p.bytes_total)).c_str(),
                 p.bytes_total ? 100.0 * double(p.bytes_done) / double(p.bytes_total) : 100.0, mbs, p.file, p.files,
                 tty ? "   " : "\n");
    open_line = tty;
  };
  auto r = synth_checkpoint(o.config, o.outdir, opt, progress);
  if (open_line) std::fputc('\n', stderr);
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
