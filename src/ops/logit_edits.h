// Sparse edits of logits rows before a pick: what a sequence's logit_bias and penalties do to the ids it has seen
// (engine/penalties.h builds them), one definition for the host sampler and Ops::edit_logits (CPU, and the CUDA
// kernel bit for bit), so a penalised row picked on the device gets the token the host would have picked.
// C++17 (CUDA sources include it through ops.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace day0 {

enum class LogitEditKind : std::int32_t {
  add = 0,         // x + value (logit_bias)
  repetition = 1,  // x / value where x > 0, else x * value (the repetition penalty)
  subtract = 2,    // x - value (frequency x count + presence, summed on the host)
};

struct LogitEdit {
  std::int32_t id = 0;
  LogitEditKind kind = LogitEditKind::add;
  float value = 0.f;
};

// One edit, as every backend computes it: single float operations, no fused multiply-add.
#if defined(__CUDACC__)
__host__ __device__
#endif
    inline float apply_logit_edit(float x, LogitEditKind kind, float value) {
  switch (kind) {
    case LogitEditKind::add:
      return x + value;
    case LogitEditKind::repetition:
      return x > 0.f ? x / value : x * value;
    default:
      return x - value;
  }
}

// A step's edits: row i of `rows` (a logits row) takes entries [begins[i], begins[i + 1]), their ids in ascending
// order: an id's edits are consecutive and applied in their order; distinct ids are independent (a backend may take
// them in parallel).
struct LogitEdits {
  std::vector<std::int32_t> rows;
  std::vector<std::int32_t> begins{0};
  std::vector<LogitEdit> entries;

  bool empty() const { return rows.empty(); }
  // Appends a row's edits in the order they apply (sorted here by id, stably, unless they already ascend).
  void add_row(std::int32_t row, std::vector<LogitEdit> edits);
};

// Rows distinct and in [0, rows), begins ascending from 0 to entries.size(), each row's ids ascending in [0, vocab),
// kinds known. Errors start with `what`.
Status check_logit_edits(const LogitEdits& edits, std::int64_t rows, std::int64_t vocab, const std::string& what);

// The edits applied to one row of `vocab` logits, in order.
void apply_logit_edits(float* logits, const LogitEdit* edits, std::size_t n);

}  // namespace day0
