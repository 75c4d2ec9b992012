// What the benchmarks (bench, bench-moe) print and write alike: the measured ceilings, and the --json file.
#pragma once

#include <cstdio>
#include <fstream>
#include <string>

#include "core/status.h"
#include "ops/cuda/ceilings.h"

namespace day0::app {

// Two lines (device, ceilings) on stdout and report["ceilings"].
template <class Json>
void report_ceilings(const DeviceCeilings& c, Json& report) {
  std::printf("device      %s\n", c.device.c_str());
  std::printf("ceilings    copy %.2f TB/s (read + write), bf16 matmul %.0f TFLOP/s, fp8 matmul %.0f TFLOP/s "
              "(%lld^3, cuBLASLt as the model uses it)\n",
              c.copy_bytes_per_s / 1e12, c.bf16_flops / 1e12, c.fp8_flops / 1e12, static_cast<long long>(c.gemm_size));
  report["ceilings"] = {{"device", c.device}, {"copy_bytes_per_s", c.copy_bytes_per_s}, {"bf16_flops", c.bf16_flops},
                        {"fp8_flops", c.fp8_flops}};
}

// The report, indented, to a file (nothing when no path was given).
template <class Json>
Status write_json_report(const std::string& path, const Json& report) {
  if (path.empty()) return Status::success();
  std::ofstream f(path);
  f << report.dump(2) << "\n";
  if (!f) return make_error("cannot write " + path);
  return Status::success();
}

}  // namespace day0::app
