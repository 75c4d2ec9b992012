// day0 convert: an MXFP4 checkpoint rewritten with its routed experts as bf16 or fp8 (model/convert.h), for
// comparing the offline-converted path with the online one. Progress on stderr, the summary on stdout.
#include <unistd.h>

#include <cstdio>
#include <string>

#include "apps/day0/commands.h"
#include "model/convert.h"

namespace day0::app {

namespace {

std::string gb(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, bytes >= 1e8 ? "%.2f GB" : "%.1f MB", bytes >= 1e8 ? bytes / 1e9 : bytes / 1e6);
  return buf;
}

}  // namespace

int convert(const ConvertCommandOptions& o) {
  ConvertOptions opt;
  if (o.experts == "bf16") opt.experts = ExpertFormat::bf16_fused;
  else if (o.experts == "fp8") opt.experts = ExpertFormat::fp8_rowwise_fused;
  else return fail("--experts " + o.experts + ": expected bf16 or fp8");
  opt.shard_bytes = o.shard_bytes;
  opt.threads = o.threads;
  opt.force = o.force;
  const bool tty = ::isatty(2) != 0;
  double last = -1e9;
  bool open_line = false;
  auto progress = [&](const ConvertProgress& p) {
    const bool done = p.bytes_done == p.bytes_total;
    if (!done && p.seconds - last < (tty ? 0.25 : 5.0)) return;
    last = p.seconds;
    std::fprintf(stderr, "%sconvert  %s / %s (%.1f%%)  %.0f MB/s%s", tty ? "\r" : "", gb(double(p.bytes_done)).c_str(),
                 gb(double(p.bytes_total)).c_str(),
                 p.bytes_total ? 100.0 * double(p.bytes_done) / double(p.bytes_total) : 100.0,
                 p.seconds > 0 ? double(p.bytes_done) / p.seconds / 1e6 : 0.0, tty ? "   " : "\n");
    open_line = tty;
  };
  auto r = convert_checkpoint(o.src, o.outdir, opt, progress);
  if (open_line) std::fputc('\n', stderr);
  if (!r.ok()) return fail(r.error().message);
  const std::string format(expert_format_name(opt.experts));
  std::printf("wrote      %s: %d shard%s%s + config.json + %zu other file%s\n", o.outdir.c_str(), r->shards,
              r->shards == 1 ? "" : "s", r->shards > 1 ? " + model.safetensors.index.json" : "",
              r->files.size() - r->shards - (r->shards > 1 ? 2 : 1),
              r->files.size() - r->shards - (r->shards > 1 ? 2 : 1) == 1 ? "" : "s");
  std::printf("experts    %zu matrices mxfp4 -> %s: %s read, %s written\n", r->expert_matrices, format.c_str(),
              gb(double(r->expert_bytes_in)).c_str(), gb(double(r->expert_bytes_out)).c_str());
  std::printf("tensors    %zu, %s (%llu bytes) of tensor data (%s copied unchanged), %llu bytes in shard files\n",
              r->tensors, gb(double(r->tensor_bytes)).c_str(), static_cast<unsigned long long>(r->tensor_bytes),
              gb(double(r->copied_bytes)).c_str(), static_cast<unsigned long long>(r->shard_file_bytes));
  if (opt.experts == ExpertFormat::fp8_rowwise_fused)
    std::printf("fp8        %llu of %llu values inexact (block exponents more than 14 binades below their row's)\n",
                static_cast<unsigned long long>(r->fp8_inexact), static_cast<unsigned long long>(r->fp8_values));
  std::printf("time       %.2f s, %.0f MB/s written\n", r->seconds,
              r->seconds > 0 ? double(r->tensor_bytes) / r->seconds / 1e6 : 0.0);
  return 0;
}

}  // namespace day0::app
