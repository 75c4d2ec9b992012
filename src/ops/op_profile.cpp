// ProfileTotals and the host-clock spans of Ops (synchronous backends).
#include "ops/op_profile.h"

#include <algorithm>

#include "ops/ops.h"

namespace day0 {

void ProfileTotals::add(std::string_view span, double seconds) {
  auto it = totals_.find(span);
  if (it == totals_.end()) it = totals_.emplace(std::string(span), ProfileEntry{std::string(span), 0, 0}).first;
  ++it->second.calls;
  it->second.seconds += seconds;
}

std::vector<ProfileEntry> ProfileTotals::entries() const {
  std::vector<ProfileEntry> v;
  for (const auto& [name, e] : totals_) v.push_back(e);
  std::stable_sort(v.begin(), v.end(), [](const ProfileEntry& a, const ProfileEntry& b) { return a.seconds > b.seconds; });
  return v;
}

void Ops::profile_begin(std::string_view span) {
  if (!profiling_) return;
  host_open_.push_back({std::string(span), std::chrono::steady_clock::now()});
}

void Ops::profile_end() {
  if (!profiling_ || host_open_.empty()) return;
  const auto& [span, t0] = host_open_.back();
  host_totals_.add(span, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  host_open_.pop_back();
}

Result<std::vector<ProfileEntry>> Ops::profile_report() { return host_totals_.entries(); }

}  // namespace day0
