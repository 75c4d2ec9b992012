// Per-kernel device times (`day0 run --profile`): CUPTI's activity API records the start and end of every kernel
// the process launches; the trace totals them by kernel name, as a profiler's kernel summary would. libcupti is
// loaded when a trace starts (dlopen), so day0 does not depend on it; without it the trace says why it cannot run.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace day0 {

struct KernelTime {
  std::string name;  // demangled, without its parameter list
  std::string grid;  // "XxYxZ" blocks: one row per kernel and grid
  std::int64_t calls = 0;
  double seconds = 0;  // summed device time
};

class KernelTrace {
 public:
  // Starts recording (one trace per process at a time); the error names what is missing or what CUPTI said.
  static Result<std::unique_ptr<KernelTrace>> start();
  // Stops recording and returns the totals of the kernels that ran since start (the caller has synchronised the
  // device), longest total first.
  Result<std::vector<KernelTime>> finish();
  ~KernelTrace();
  KernelTrace(const KernelTrace&) = delete;
  KernelTrace& operator=(const KernelTrace&) = delete;

 private:
  KernelTrace() = default;
  bool finished_ = false;
};

}  // namespace day0
