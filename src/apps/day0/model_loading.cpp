// load_for_command and the reports.
#include "apps/day0/model_loading.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/device_arena.h"

namespace day0::app {

// "[#########.........]  41%  5.62 / 13.76 GB" redrawn in place; only on a terminal.
ProgressFn terminal_progress() {
  if (!isatty(STDERR_FILENO)) return {};
  return [](std::uint64_t done, std::uint64_t total) {
    constexpr int kWidth = 40;
    const double f = total ? double(done) / double(total) : 1.0;
    char bar[kWidth + 1];
    for (int i = 0; i < kWidth; ++i) bar[i] = i < int(f * kWidth) ? '#' : '.';
    bar[kWidth] = 0;
    std::fprintf(stderr, "\rloading weights [%s] %3d%%  %.2f / %.2f GB", bar, int(f * 100), done / 1e9, total / 1e9);
    if (done >= total) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  };
}

Result<BackendOptions> backend_options(const BackendCliOptions& o) {
  BackendOptions b;
  b.memory_fraction = o.memory_fraction;
  D0_ASSIGN_OR_RETURN(b.expert_compute, parse_expert_compute(o.expert_compute));
  b.fused_moe_max_tokens = o.fused_moe_tokens;
  b.attention_tensor_cores = !o.f32_attention;
  b.attention_bf16_operands = !o.f16_attention;
  b.batch_invariant = o.batch_invariant;
  // Profiled spans are bounded by events between kernels: kernels that overlap would blur them.
  b.dependent_launch = !o.no_dependent_launch && !o.profile;
  // auto: bf16 K/V on the GPU (as vLLM's auto for a bf16 model: half the bytes per token, and decode attention on
  // tensor cores), f32 in the CPU reference, which takes no other.
  const bool bf16 = o.kv_cache_dtype == "bf16" || (o.kv_cache_dtype == "auto" && o.backend != "cpu");
  b.kv_cache_dtype = bf16 ? DType::bf16 : DType::f32;
  D0_ASSIGN_OR_RETURN(b.mxfp4_order, parse_mxfp4_order(o.mxfp4_order));
  return b;
}

Result<LoadedModel> load_for_command(const std::string& dir, const BackendCliOptions& o, std::int64_t max_tokens) {
  LoadOptions lo;
  lo.backend = o.backend;
  lo.max_tokens = max_tokens;
  lo.max_step_tokens = o.max_step_tokens;
  D0_ASSIGN_OR_RETURN(lo.backend_options, backend_options(o));
  lo.graph_max_batch = o.graph_batch;
  lo.profile = o.profile;
  lo.progress = terminal_progress();
  D0_ASSIGN_OR_RETURN(LoadedModel m, load_model(dir, lo));
  std::printf("load: weights %s placed on %s in %.3f s", format_bytes(m.weight_bytes).c_str(), o.backend.c_str(),
              m.place_seconds);
  if (auto* cuda = dynamic_cast<CudaOps*>(m.ops.get()))
    std::printf(" (%.2f GB/s from %d parallel readers, %s on the device)",
                m.place_seconds > 0 ? cuda->upload_stats().bytes_read / 1e9 / m.place_seconds : 0.0,
                cuda->upload_stats().readers, format_bytes(cuda->upload_stats().bytes_on_device).c_str());
  std::printf("; %.3f s in all\n", m.load_seconds);
  if (o.backend != "cpu") std::printf("step graphs: %s\n", m.executor->graph_status().c_str());
  return m;
}

namespace {

struct TimeRow {
  std::string name;
  std::int64_t calls;
  double seconds;
  double exposed = -1;  // the critical-path part of `seconds` (kernels), or -1 where there is none (spans)
};

// One table of timed rows (profile spans, kernels): calls, total, per call and share, and where the rows have
// them the exposed time per call, its share and the totals. Rows whose name starts with a space are spans nested
// in the row above them (their time is in it too), so the shares count top-level rows.
void print_time_table(const char* label, int width, const std::vector<TimeRow>& rows) {
  double total = 0, exposed = 0;
  bool with_exposed = false;
  for (const TimeRow& r : rows) {
    if (r.name.empty() || r.name[0] != ' ') total += r.seconds;
    if (r.exposed >= 0) with_exposed = true, exposed += r.exposed;
  }
  std::printf("  %-*s %8s %12s %12s %7s", width, label, "calls", "total ms", "us per call", "share");
  if (with_exposed) std::printf(" %12s %7s", "exposed/call", "share");
  std::printf("\n");
  for (const TimeRow& r : rows) {
    const std::string name = static_cast<int>(r.name.size()) > width ? r.name.substr(0, width - 3) + "..." : r.name;
    const double calls = static_cast<double>(std::max<std::int64_t>(r.calls, 1));
    std::printf("  %-*s %8lld %12.3f %12.1f %6.1f%%", width, name.c_str(), static_cast<long long>(r.calls),
                r.seconds * 1e3, r.seconds * 1e6 / calls, total > 0 ? 100 * r.seconds / total : 0.0);
    if (with_exposed)
      std::printf(" %12.1f %6.1f%%", std::max(r.exposed, 0.0) * 1e6 / calls,
                  exposed > 0 ? 100 * std::max(r.exposed, 0.0) / exposed : 0.0);
    std::printf("\n");
  }
  if (with_exposed)
    std::printf("  %-*s %8s %12.3f %12s %7s %12.3f ms\n", width, "all", "", total * 1e3, "", "", exposed * 1e3);
}

}  // namespace

Status print_profile(Ops& ops) {
  D0_ASSIGN_OR_RETURN(std::vector<ProfileEntry> entries, ops.profile_report());
  std::printf("profile (%s, the device's clock; spans of the work each part of a layer enqueues):\n",
              std::string(ops.backend()).c_str());
  std::vector<TimeRow> rows;
  for (const ProfileEntry& e : entries) rows.push_back({e.span, e.calls, e.seconds});
  print_time_table("span", 40, rows);
  return Status::success();
}

void print_kernel_times(const std::vector<KernelTime>& kernels, const std::string& what) {
  std::printf("kernels (CUPTI, device time of every launch in %s, longest total first; exposed: the part of it that "
              "lengthened the timeline, past every earlier kernel's end):\n",
              what.c_str());
  std::vector<TimeRow> rows;
  constexpr int kWidth = 72;
  for (const KernelTime& k : kernels) {  // the grid stays whole: a long name is cut instead
    const int room = std::max<int>(8, kWidth - static_cast<int>(k.grid.size()) - 1);
    const std::string name = static_cast<int>(k.name.size()) > room ? k.name.substr(0, room - 3) + "..." : k.name;
    rows.push_back({name + " " + k.grid, k.calls, k.seconds, k.exposed_seconds});
  }
  print_time_table("kernel (grid)", kWidth, rows);
  // Where the device sat idle between kernels (a host stall, a synchronisation, a copy): charged to the kernel that
  // ended each gap, the largest three.
  std::vector<const KernelTime*> by_idle;
  double idle = 0;
  for (const KernelTime& k : kernels) {
    idle += k.idle_before_seconds;
    if (k.idle_before_seconds > 0) by_idle.push_back(&k);
  }
  std::sort(by_idle.begin(), by_idle.end(),
            [](const KernelTime* a, const KernelTime* b) { return a->idle_before_seconds > b->idle_before_seconds; });
  std::printf("  idle between kernels %.3f ms%s", idle * 1e3, by_idle.empty() ? "\n" : "; before ");
  for (std::size_t i = 0; i < std::min<std::size_t>(3, by_idle.size()); ++i)
    std::printf("%s%s %s %.3f ms (largest gap %.3f ms, after %s)", i ? ", " : "", by_idle[i]->name.c_str(),
                by_idle[i]->grid.c_str(), by_idle[i]->idle_before_seconds * 1e3,
                by_idle[i]->largest_idle_before_seconds * 1e3, by_idle[i]->largest_idle_after.c_str());
  if (!by_idle.empty()) std::printf("\n");
}

void print_host_calls(const HostSummary& host) {
  if (host.calls.empty()) return;
  double total = 0;
  for (const HostCallTime& c : host.calls) total += c.seconds;
  std::printf("  host in runtime calls %.3f ms:", total * 1e3);
  for (std::size_t i = 0; i < std::min<std::size_t>(3, host.calls.size()); ++i)
    std::printf("%s %s x%lld %.3f ms (largest %.3f)", i ? "," : "", host.calls[i].name.c_str(),
                static_cast<long long>(host.calls[i].calls), host.calls[i].seconds * 1e3,
                host.calls[i].largest_seconds * 1e3);
  std::printf("\n");
  if (host.gaps.empty()) return;
  std::printf("  host between runtime calls, largest:");
  for (std::size_t i = 0; i < host.gaps.size(); ++i)
    std::printf("%s %.3f ms after %s before %s", i ? "," : "", host.gaps[i].seconds * 1e3,
                host.gaps[i].after.c_str(), host.gaps[i].before.c_str());
  std::printf("\n");
}

void print_memory_report(Ops& ops) {
  std::printf("memory (%s):\n", std::string(ops.backend()).c_str());
  for (const MemoryUse& u : ops.memory_report())
    std::printf("  %-45s %12s%s%s\n", u.what.c_str(), format_bytes(u.bytes).c_str(), u.note.empty() ? "" : "  ",
                u.note.c_str());
}

}  // namespace day0::app
