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

}  // namespace day0
