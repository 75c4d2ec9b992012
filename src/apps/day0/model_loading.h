// Loading a model for a subcommand: backend options to LoadOptions, a progress bar on the terminal while the
// weights are placed, and the load and memory reports printed after.
#pragma once

#include <cstdint>
#include <string>

#include "apps/day0/commands.h"
#include "model/load.h"
#include "ops/cuda/kernel_trace.h"

namespace day0::app {

// The backend's options from the command line (the expert compute parsed).
Result<BackendOptions> backend_options(const BackendCliOptions& o);

// Loads `dir` for at most `max_tokens` tokens per sequence, drawing a progress bar on stderr when it is a
// terminal; prints one line: bytes, seconds and GB/s of the weight placement.
Result<LoadedModel> load_for_command(const std::string& dir, const BackendCliOptions& o, std::int64_t max_tokens);

// A progress bar for weight placement on stderr, or nothing when stderr is not a terminal.
ProgressFn terminal_progress();

// The profile totals (day0 run --profile): span, calls, total, per call, share.
Status print_profile(Ops& ops);
// A kernel table on the GPU (KernelTrace's totals: `run --profile`, `bench --kernels`); `what` names the traced
// work in its heading.
void print_kernel_times(const std::vector<KernelTime>& kernels, const std::string& what);
// The host's side of a kernel trace: its time in runtime calls and the largest gaps between them (host work).
void print_host_calls(const HostSummary& host);

// The memory report: one line per use (weights, workspace, KV cache, activations, free).
void print_memory_report(Ops& ops);

}  // namespace day0::app
