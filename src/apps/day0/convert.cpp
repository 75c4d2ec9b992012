// day0 convert: an MXFP4 checkpoint rewritten with its routed experts as bf16 or fp8 (model/convert.h), for
// comparing the offline-converted path with the online one. Progress on stderr, the summary on stdout.
#include <cstdio>
#include <string>

#include "apps/day0/commands.h"
#include "apps/day0/write_progress.h"
#include "model/convert.h"

namespace day0::app {

int convert(const ConvertCommandOptions& o) {
  ConvertOptions opt;
  if (o.experts == "bf16") opt.experts = ExpertFormat::bf16_fused;
  else if (o.experts == "fp8") opt.experts = ExpertFormat::fp8_rowwise_fused;
  else return fail("--experts " + o.experts + ": expected bf16 or fp8");
  opt.shard_bytes = o.shard_bytes;
  opt.threads = o.threads;
  opt.force = o.force;
  WriteProgress line("convert");
  auto progress = [&](const ConvertProgress& p) { line.update(p.bytes_done, p.bytes_total, p.seconds); };
  auto r = convert_checkpoint(o.src, o.outdir, opt, progress);
  line.finish();
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
