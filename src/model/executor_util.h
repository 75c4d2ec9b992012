// Small helpers shared by the executor's files.
#pragma once

#include <string>

#include "ops/ops.h"

namespace day0 {

inline std::string layer_tap(int layer, const char* what) { return "layers." + std::to_string(layer) + "." + what; }

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
