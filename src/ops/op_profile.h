// Time spent per named span of enqueued work (`day0 run --profile`): what a profiler would show per op, for
// machines that have none. Spans are opened and closed by the caller around the ops it issues (the executor
// around each part of a layer); a backend times them on its device's clock: the CPU with the host clock (its
// ops are synchronous), CUDA with events on its stream.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace day0 {

struct ProfileEntry {
  std::string span;
  std::int64_t calls = 0;
  double seconds = 0;
};

// Totals by span name.
class ProfileTotals {
 public:
  void add(std::string_view span, double seconds);
  // Largest total first.
  std::vector<ProfileEntry> entries() const;
  void clear() { totals_.clear(); }

 private:
  std::map<std::string, ProfileEntry, std::less<>> totals_;
};

}  // namespace day0
