// The shared logit edits: see the header.
#include "ops/logit_edits.h"

#include <algorithm>
#include <utility>

namespace day0 {

void LogitEdits::add_row(std::int32_t row, std::vector<LogitEdit> edits) {
  const auto by_id = [](const LogitEdit& a, const LogitEdit& b) { return a.id < b.id; };
  if (!std::is_sorted(edits.begin(), edits.end(), by_id)) std::stable_sort(edits.begin(), edits.end(), by_id);
  rows.push_back(row);
  entries.insert(entries.end(), edits.begin(), edits.end());
  begins.push_back(static_cast<std::int32_t>(entries.size()));
}

Status check_logit_edits(const LogitEdits& edits, std::int64_t rows, std::int64_t vocab, const std::string& what) {
  const std::size_t n = edits.rows.size();
  if (edits.begins.size() != n + 1 || edits.begins.front() != 0 ||
      edits.begins.back() != static_cast<std::int64_t>(edits.entries.size()))
    return make_error(what + ": edit row bounds must run from 0 to the " + std::to_string(edits.entries.size()) +
                      " entries, one more than the " + std::to_string(n) + " rows");
  std::vector<bool> seen(static_cast<std::size_t>(std::max<std::int64_t>(rows, 0)), false);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int32_t row = edits.rows[i];
    if (row < 0 || row >= rows || seen[static_cast<std::size_t>(row)])
      return make_error(what + ": edited row " + std::to_string(row) + " is outside the step's " +
                        std::to_string(rows) + " rows or edited twice");
    seen[static_cast<std::size_t>(row)] = true;
    const std::int32_t b = edits.begins[i], e = edits.begins[i + 1];
    if (e < b) return make_error(what + ": edit row bounds must ascend");
    for (std::int32_t j = b; j < e; ++j) {
      const LogitEdit& x = edits.entries[static_cast<std::size_t>(j)];
      if (x.id < 0 || x.id >= vocab)
        return make_error(what + ": edited token id " + std::to_string(x.id) + " is outside the " +
                          std::to_string(vocab) + " logits");
      if (j > b && x.id < edits.entries[static_cast<std::size_t>(j - 1)].id)
        return make_error(what + ": a row's edited ids must ascend");
      if (x.kind != LogitEditKind::add && x.kind != LogitEditKind::repetition && x.kind != LogitEditKind::subtract)
        return make_error(what + ": unknown logit edit kind " + std::to_string(static_cast<int>(x.kind)));
    }
  }
  return Status::success();
}

void apply_logit_edits(float* logits, const LogitEdit* edits, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    float& x = logits[edits[i].id];
    x = apply_logit_edit(x, edits[i].kind, edits[i].value);
  }
}

}  // namespace day0
