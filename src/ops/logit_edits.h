// Sparse edits of logits rows before a pick: what a sequence's logit_bias and penalties do to the ids it has seen
// (engine/penalties.h builds them), one definition for the host sampler and Ops::edit_logits (CPU, and the CUDA
// kernel bit for bit), so a penalised row picked on the device gets the token the host would have picked.
// C++17 (CUDA sources include it through ops.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/host_device.h"
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
  float next = 0.f;  // subtract: the value with one more occurrence (the row's pending token; PendingToken)
};

// A row's last token, picked on the device in the step before and not yet seen by the host (a step launched ahead):
// edit_logits reads it from its tokens operand and edits it as if it were in the row's history. Its id's entries
// (none where the host saw no such token) are then: its biases, the repetition penalty (where not 1), and a
// subtract of its entry's `next` value (`first` where it has none), where frequency or presence apply.
struct PendingToken {
  std::int32_t on = 0;
  float repetition = 1.f;
  std::int32_t subtract = 0;
  float first = 0.f;  // frequency x 1 + presence
};

// One edit, as every backend computes it: single float operations, no fused multiply-add.
D0_HOST_DEVICE float apply_logit_edit(float x, LogitEditKind kind, float value) {
  switch (kind) {
    case LogitEditKind::add:
      return x + value;
    case LogitEditKind::repetition:
      return x > 0.f ? x / value : x * value;
    default:
      return x - value;
  }
}

// A row's pending token's edits: those of its id's entries `run` (n of them, maybe none) as PendingToken says.
D0_HOST_DEVICE float apply_pending_edits(float x, const LogitEdit* run, int n, const PendingToken& p) {
  float subtract = p.first;
  for (int i = 0; i < n; ++i) {
    if (run[i].kind == LogitEditKind::add) x = apply_logit_edit(x, LogitEditKind::add, run[i].value);
    if (run[i].kind == LogitEditKind::subtract) subtract = run[i].next;
  }
  if (p.repetition != 1.f) x = apply_logit_edit(x, LogitEditKind::repetition, p.repetition);
  return p.subtract ? apply_logit_edit(x, LogitEditKind::subtract, subtract) : x;
}

// A step's edits: row i of `rows` (a logits row) takes entries [begins[i], begins[i + 1]), their ids in ascending
// order: an id's edits are consecutive and applied in their order; distinct ids are independent (a backend may take
// them in parallel). `pending`: empty, or a row's PendingToken each.
struct LogitEdits {
  std::vector<std::int32_t> rows;
  std::vector<std::int32_t> begins{0};
  std::vector<LogitEdit> entries;
  std::vector<PendingToken> pending;

  bool empty() const { return rows.empty(); }
  bool has_pending() const;
  // Appends a row's edits in the order they apply (sorted here by id, stably, unless they already ascend), and its
  // pending token's (off: none).
  void add_row(std::int32_t row, const std::vector<LogitEdit>& edits, PendingToken pending = {});
};

// Rows distinct and in [0, rows), begins ascending from 0 to entries.size(), each row's ids ascending in [0, vocab),
// kinds known, pending empty or one a row. Errors start with `what`.
Status check_logit_edits(const LogitEdits& edits, std::int64_t rows, std::int64_t vocab, const std::string& what);

// The same edits with each pending row's token (tokens[row], a step's tokens) made plain entries: its id's run
// replaced by apply_pending_edits' edits. A token outside [0, vocab) leaves the row's entries as they are (its row
// is unusable: greedy_tokens reported it).
LogitEdits resolve_pending(const LogitEdits& edits, const std::int32_t* tokens, std::int64_t vocab);

// The edits applied to one row of `vocab` logits, in order.
void apply_logit_edits(float* logits, const LogitEdit* edits, std::size_t n);

}  // namespace day0
