// Compares the executor against a reference dump (a safetensors file written by tools/reference/):
// per tap, max abs and relative error; then the greedy continuation and its per-step logits.
#pragma once

#include <string>
#include <vector>

#include "model/executor.h"

namespace day0 {

struct TapComparison {
  std::string name;
  double max_abs = 0;
  double rel = 0;           // ||ours - ref|| / ||ref||
  std::int64_t mismatches = 0;  // integer taps: differing elements
  bool integer = false;
  bool within = false;
};

struct ReferenceComparison {
  std::vector<TapComparison> taps;      // prefill taps, in the order the executor produced them
  std::vector<std::string> missing;     // reference taps the executor never produced
  int greedy_steps = 0;                 // 0 if the dump has no greedy continuation
  int greedy_first_mismatch = -1;       // first differing token index, -1 if identical
  double greedy_logits_rel = 0;         // worst per-step relative error
  // At the first mismatch: the reference's own logit gap between its token and ours (>= 0), and its row's
  // largest |logit|; a gap that is a tiny share of that scale is a near-tie a lower precision may flip.
  double greedy_mismatch_ref_gap = 0, greedy_mismatch_logit_scale = 0;
  std::vector<std::int32_t> greedy_tokens;
  double tolerance = 0;
  bool ok() const;
  // First prefill tap outside tolerance, or "" if none.
  std::string first_failing_tap() const;
};

// Runs prefill of the dump's input_ids with taps, then greedy decode for as many steps as the dump holds.
// `executor` must be fresh (length 0).
Result<ReferenceComparison> compare_with_reference(Executor& executor, const std::string& dump_path,
                                                   double tolerance);

}  // namespace day0
