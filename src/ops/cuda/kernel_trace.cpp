// KernelTrace: CUPTI activity records of kind CONCURRENT_KERNEL (which, unlike KERNEL, does not serialise
// kernels), MEMCPY and MEMSET, and RUNTIME (the host's calls) where CUPTI gives it, delivered in buffers CUPTI asks
// for and hands back; CUPTI's callbacks are plain functions, so the library's entry points and the running totals
// live in one process-wide state.
#include "ops/cuda/kernel_trace.h"

#include <cupti.h>
#include <cxxabi.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace day0 {
namespace {

struct Cupti {
  void* lib = nullptr;
  CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc) = nullptr;
  CUptiResult (*enable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*disable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*flush_all)(uint32_t) = nullptr;
  CUptiResult (*next_record)(uint8_t*, size_t, CUpti_Activity**) = nullptr;
  CUptiResult (*result_string)(CUptiResult, const char**) = nullptr;
  CUptiResult (*callback_name)(CUpti_CallbackDomain, uint32_t, const char**) = nullptr;  // optional
};

// A runtime call as CUPTI records it: named in finish() from its callback id.
struct RuntimeRecord {
  std::uint32_t callback_id = 0, thread = 0;
  std::uint64_t start = 0, end = 0;
};

struct State {
  std::mutex mu;
  Cupti api;
  bool running = false;
  bool registered = false;  // buffer callbacks: registered once per process, kept across traces
  // Every launch since start: the totals come from them, and so does each kernel's share of the timeline.
  std::vector<KernelLaunch> launches;  // names mangled
  std::vector<RuntimeRecord> runtime_calls;
};

State& state() {
  static State s;
  return s;
}

constexpr std::size_t kBufferBytes = std::size_t(8) << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

// Copies and fills are rows of the trace too (in brackets, their bytes for a grid): the device's time between
// kernels is often theirs.
std::string memcpy_name(std::uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "[memcpy HtoD]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "[memcpy DtoH]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "[memcpy DtoD]";
    default: return "[memcpy]";
  }
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    CUpti_Activity* record = nullptr;
    while (s.api.next_record && s.api.next_record(buffer, valid, &record) == CUPTI_SUCCESS) {
      if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
        const auto* c = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
        s.launches.push_back(
            {memcpy_name(c->copyKind), std::to_string(c->bytes) + " B", c->start, std::max(c->start, c->end)});
        continue;
      }
      if (record->kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
        const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(record);
        s.runtime_calls.push_back({a->cbid, a->threadId, a->start, std::max(a->start, a->end)});
        continue;
      }
      if (record->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
        s.launches.push_back({"[memset]", std::to_string(m->bytes) + " B", m->start, std::max(m->start, m->end)});
        continue;
      }
      if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && record->kind != CUPTI_ACTIVITY_KIND_KERNEL)
        continue;
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      const std::string grid =
          std::to_string(k->gridX) + "x" + std::to_string(k->gridY) + "x" + std::to_string(k->gridZ);
      s.launches.push_back({k->name ? k->name : "?", grid, k->start, std::max(k->start, k->end)});
    }
  }
  std::free(buffer);
}

std::string cupti_error(const Cupti& api, CUptiResult r, const char* call) {
  const char* text = nullptr;
  if (api.result_string) api.result_string(r, &text);
  return std::string("kernel trace: ") + call + " failed: " + (text ? text : "CUPTI error " + std::to_string(int(r)));
}

Status load(Cupti& api) {
  if (api.lib) return Status::success();
  for (const char* name : {"libcupti.so.13", "libcupti.so", "/usr/local/cuda/lib64/libcupti.so",
                           "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so"})
    if ((api.lib = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
  if (!api.lib) return make_error("kernel trace: libcupti (CUDA's profiling library) was not found");
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(api.lib, name));
    return fn != nullptr;
  };
  if (!sym(api.register_callbacks, "cuptiActivityRegisterCallbacks") || !sym(api.enable, "cuptiActivityEnable") ||
      !sym(api.disable, "cuptiActivityDisable") || !sym(api.flush_all, "cuptiActivityFlushAll") ||
      !sym(api.next_record, "cuptiActivityGetNextRecord") || !sym(api.result_string, "cuptiGetResultString")) {
    dlclose(api.lib);
    api = Cupti{};
    return make_error("kernel trace: libcupti lacks the activity API");
  }
  sym(api.callback_name, "cuptiGetCallbackName");
  return Status::success();
}

// What a trace records: the device's activity (a trace cannot start without it) and the host's runtime calls (where
// CUPTI takes them; the trace does without).
constexpr CUpti_ActivityKind kDeviceKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                               CUPTI_ACTIVITY_KIND_MEMSET};
constexpr CUpti_ActivityKind kHostKind = CUPTI_ACTIVITY_KIND_RUNTIME;

void disable_all(const Cupti& api) {
  for (CUpti_ActivityKind kind : kDeviceKinds) api.disable(kind);
  api.disable(kHostKind);
}

// "void day0::(anonymous namespace)::k<1, true>(day0::Args)" -> "k<1, true>".
std::string short_name(const std::string& mangled) {
  int status = 0;
  char* d = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
  std::string n = status == 0 && d ? d : mangled;
  std::free(d);
  int depth = 0;
  for (std::size_t i = 0; i < n.size(); ++i) {  // cut the parameter list: the first '(' outside template brackets
    if (n[i] == '<') ++depth;
    if (n[i] == '>') --depth;
    if (n[i] == '(' && depth == 0 && n.compare(i, 21, "(anonymous namespace)") != 0) {
      n.resize(i);
      break;
    }
  }
  for (const std::string prefix : {"void ", "day0::", "(anonymous namespace)::"})
    for (std::size_t p; (p = n.find(prefix)) != std::string::npos;) n.erase(p, prefix.size());
  return n;
}

}  // namespace

HostSummary host_summary(std::vector<HostCall> calls) {
  HostSummary out;
  std::map<std::string, HostCallTime> by_name;
  for (const HostCall& c : calls) {
    HostCallTime& t = by_name[c.name];
    const double d = double(c.end - c.start) * 1e-9;
    t.calls += 1;
    t.seconds += d;
    t.largest_seconds = std::max(t.largest_seconds, d);
  }
  for (auto& [name, t] : by_name) {
    t.name = name;
    out.calls.push_back(t);
  }
  std::sort(out.calls.begin(), out.calls.end(),
            [](const HostCallTime& a, const HostCallTime& b) { return a.seconds > b.seconds; });
  // Per thread in start order: the time from one call's end to the next one's start.
  std::sort(calls.begin(), calls.end(), [](const HostCall& a, const HostCall& b) {
    return a.thread != b.thread ? a.thread < b.thread : a.start < b.start;
  });
  for (std::size_t i = 1; i < calls.size(); ++i) {
    const HostCall &a = calls[i - 1], &b = calls[i];
    if (a.thread != b.thread || b.start <= a.end) continue;
    out.gaps.push_back({a.name, b.name, double(b.start - a.end) * 1e-9});
  }
  std::sort(out.gaps.begin(), out.gaps.end(), [](const HostGap& a, const HostGap& b) { return a.seconds > b.seconds; });
  if (out.gaps.size() > HostSummary::kMaxGaps) out.gaps.resize(HostSummary::kMaxGaps);
  return out;
}

std::vector<KernelTime> kernel_totals(std::vector<KernelLaunch> launches) {
  std::map<std::pair<std::string, std::string>, KernelTime> by_name;
  // In start order, the idle gap before each launch: past every earlier-started launch's end.
  std::sort(launches.begin(), launches.end(),
            [](const KernelLaunch& a, const KernelLaunch& b) { return a.start < b.start; });
  std::uint64_t running_end = 0;
  const KernelLaunch* last_to_end = nullptr;  // the launch whose end is running_end
  for (std::size_t i = 0; i < launches.size(); ++i) {
    const KernelLaunch& l = launches[i];
    if (i > 0 && l.start > running_end) {
      KernelTime& k = by_name[{l.name, l.grid}];
      const double gap = double(l.start - running_end) * 1e-9;
      k.idle_before_seconds += gap;
      if (gap > k.largest_idle_before_seconds) {
        k.largest_idle_before_seconds = gap;
        k.largest_idle_after = last_to_end->name + " " + last_to_end->grid;
      }
    }
    if (i == 0 || l.end > running_end) {
      running_end = l.end;
      last_to_end = &l;
    }
  }
  // In end order, a launch's exposed time is how far it moved the latest end: with dependent launches a kernel
  // starts while the one before still runs, and only the part past it lengthens the timeline.
  std::sort(launches.begin(), launches.end(), [](const KernelLaunch& a, const KernelLaunch& b) { return a.end < b.end; });
  std::uint64_t latest_end = 0;
  for (const KernelLaunch& l : launches) {
    KernelTime& k = by_name[{l.name, l.grid}];
    k.calls += 1;
    k.seconds += double(l.end - l.start) * 1e-9;
    k.exposed_seconds += double(l.end - std::max(l.start, latest_end)) * 1e-9;  // latest_end <= l.end
    latest_end = l.end;
  }
  std::vector<KernelTime> out;
  for (auto& [key, k] : by_name) {
    k.name = key.first;
    k.grid = key.second;
    out.push_back(k);
  }
  std::sort(out.begin(), out.end(), [](const KernelTime& a, const KernelTime& b) { return a.seconds > b.seconds; });
  return out;
}

Result<std::unique_ptr<KernelTrace>> KernelTrace::start() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.running) return make_error("kernel trace: a trace is already running in this process");
  D0_RETURN_IF_ERROR(load(s.api));
  if (!s.registered) {
    if (CUptiResult r = s.api.register_callbacks(buffer_requested, buffer_completed); r != CUPTI_SUCCESS)
      return make_error(cupti_error(s.api, r, "cuptiActivityRegisterCallbacks"));
    s.registered = true;
  }
  for (CUpti_ActivityKind kind : kDeviceKinds) {
    if (CUptiResult r = s.api.enable(kind); r != CUPTI_SUCCESS) {
      disable_all(s.api);
      return make_error(cupti_error(s.api, r, "cuptiActivityEnable"));
    }
  }
  s.api.enable(kHostKind);  // refused: host() stays empty
  s.launches.clear();
  s.runtime_calls.clear();
  s.running = true;
  return std::unique_ptr<KernelTrace>(new KernelTrace());
}

Result<std::vector<KernelTime>> KernelTrace::finish() {
  State& s = state();
  if (finished_) return make_error("kernel trace: finish() called twice");
  finished_ = true;
  // Outside the lock: flushing runs buffer_completed, which takes it.
  const CUptiResult flushed = s.api.flush_all(1);  // CUPTI_ACTIVITY_FLAG_FLUSH_FORCED
  std::lock_guard<std::mutex> lock(s.mu);
  disable_all(s.api);
  s.running = false;
  if (flushed != CUPTI_SUCCESS) return make_error(cupti_error(s.api, flushed, "cuptiActivityFlushAll"));
  std::map<std::string, std::string> demangled;  // once per kernel, not per launch
  for (KernelLaunch& l : s.launches) {
    auto it = demangled.find(l.name);
    if (it == demangled.end()) it = demangled.emplace(l.name, short_name(l.name)).first;
    l.name = it->second;
  }
  std::vector<KernelTime> out = kernel_totals(s.launches);
  s.launches.clear();
  std::map<std::uint32_t, std::string> api_names;  // callback id -> "cudaMemcpyAsync"
  std::vector<HostCall> host_calls;
  host_calls.reserve(s.runtime_calls.size());
  for (const RuntimeRecord& r : s.runtime_calls) {
    auto it = api_names.find(r.callback_id);
    if (it == api_names.end()) {
      const char* n = nullptr;
      const bool named = s.api.callback_name &&
                         s.api.callback_name(CUPTI_CB_DOMAIN_RUNTIME_API, r.callback_id, &n) == CUPTI_SUCCESS &&
                         n != nullptr;
      std::string name = named ? std::string(n) : "runtime call " + std::to_string(r.callback_id);
      // "cudaMemcpyAsync_v3020" -> "cudaMemcpyAsync": the version suffix of the entry point
      if (const std::size_t v = name.rfind("_v");
          v != std::string::npos && v + 2 < name.size() &&
          name.find_first_not_of("0123456789", v + 2) == std::string::npos)
        name.resize(v);
      it = api_names.emplace(r.callback_id, name).first;
    }
    host_calls.push_back({it->second, r.thread, r.start, r.end});
  }
  s.runtime_calls.clear();
  host_ = host_summary(std::move(host_calls));
  return out;
}

KernelTrace::~KernelTrace() {
  if (finished_) return;
  State& s = state();
  s.api.flush_all(1);
  std::lock_guard<std::mutex> lock(s.mu);
  disable_all(s.api);
  s.running = false;
}

}  // namespace day0
