// Per-kernel device times (`day0 run --profile`): CUPTI's activity API records the start and end of every kernel
// the process launches (and its copies, fills and runtime calls); the trace totals them by kernel name, as a
// profiler's kernel summary would. libcupti is loaded when a trace starts (dlopen), so day0 does not depend on it;
// without it the trace says why it cannot run.
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
  double seconds = 0;          // summed device time
  double exposed_seconds = 0;  // summed time by which each launch's end passed every earlier end
  double idle_before_seconds = 0;  // summed device idle (no kernel running) just before each launch started
  double largest_idle_before_seconds = 0;  // the longest of those gaps
  std::string largest_idle_after;          // the kernel (and grid) whose end began that gap
};

// One kernel's launch as CUPTI records it: device clock, ns; end >= start.
struct KernelLaunch {
  std::string name;
  std::string grid;
  std::uint64_t start = 0, end = 0;
};

// Launches totalled by (name, grid), longest total first. A launch's exposed time is the part of it past the
// latest end of the launches that ended before it: in a chain where each ends after the one before (one stream,
// with or without dependent launches) the exposed times add up to the span less its idle gaps, each kernel's
// part of the critical path. A launch's idle-before time is the gap between its start and the latest end of the
// launches that started before it (0 for the first): summed over all rows, the span's idle gaps, each charged to
// the kernel that ended it (a host stall or a wait before that launch).
std::vector<KernelTime> kernel_totals(std::vector<KernelLaunch> launches);

// One CUDA runtime call on the host (CUPTI's clock, which the device records share), by thread.
struct HostCall {
  std::string name;  // "cudaMemcpyAsync"
  std::uint32_t thread = 0;
  std::uint64_t start = 0, end = 0;
};

struct HostCallTime {
  std::string name;
  std::int64_t calls = 0;
  double seconds = 0, largest_seconds = 0;
};

// Host time outside the runtime between two calls of one thread (the host's own work, or a wait the runtime does
// not see), named by the calls around it.
struct HostGap {
  std::string after, before;
  double seconds = 0;
};

struct HostSummary {
  std::vector<HostCallTime> calls;  // longest total first
  std::vector<HostGap> gaps;        // the largest kMaxGaps, largest first
  static constexpr std::size_t kMaxGaps = 3;
};

HostSummary host_summary(std::vector<HostCall> calls);

class KernelTrace {
 public:
  // Starts recording (one trace per process at a time); the error names what is missing or what CUPTI said.
  static Result<std::unique_ptr<KernelTrace>> start();
  // Stops recording and returns kernel_totals of the kernels that ran since start (the caller has synchronised the
  // device), with demangled names.
  Result<std::vector<KernelTime>> finish();
  // After finish: the runtime calls the host made meanwhile (empty where CUPTI would not record them).
  const HostSummary& host() const { return host_; }
  ~KernelTrace();
  KernelTrace(const KernelTrace&) = delete;
  KernelTrace& operator=(const KernelTrace&) = delete;

 private:
  KernelTrace() = default;
  bool finished_ = false;
  HostSummary host_;
};

}  // namespace day0
