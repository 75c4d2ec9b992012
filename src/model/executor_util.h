// Small helpers shared by the executor's files.
#pragma once

#include <string>
#include <vector>

#include "ops/ops.h"

namespace day0 {

inline std::string layer_tap(int layer, const char* what) { return "layers." + std::to_string(layer) + "." + what; }

// Logprob requests of a step of `rows` logits rows (check_logprob_requests), none of them an edited row (their
// records read the raw logits). Errors start with `what`.
Status check_raw_logprob_rows(const std::vector<LogprobRequest>& logprobs, const LogitEdits& edits, std::int64_t rows,
                              const std::string& what);

// Rewinds the backend's per-step scratch however the step ends.
class ScratchScope {
 public:
  explicit ScratchScope(Ops& ops) : ops_(ops), mark_(ops.scratch_mark()) {}
  ~ScratchScope() { (void)ops_.scratch_release(mark_); }
  ScratchScope(const ScratchScope&) = delete;
  ScratchScope& operator=(const ScratchScope&) = delete;

 private:
  Ops& ops_;
  ScratchMark mark_;
};

// Times the work enqueued during its lifetime under `span` while the ops profile (Ops::enable_profiling).
class ProfileSpan {
 public:
  ProfileSpan(Ops& ops, std::string_view span) : ops_(ops) { ops_.profile_begin(span); }
  ~ProfileSpan() { ops_.profile_end(); }
  ProfileSpan(const ProfileSpan&) = delete;
  ProfileSpan& operator=(const ProfileSpan&) = delete;

 private:
  Ops& ops_;
};

}  // namespace day0
