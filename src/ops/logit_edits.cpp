// The shared logit edits: see the header.
#include "ops/logit_edits.h"

#include <algorithm>
#include <utility>

namespace day0 {

bool LogitEdits::has_pending() const {
  return std::any_of(pending.begin(), pending.end(), [](const PendingToken& p) { return p.on != 0; });
}

void LogitEdits::add_row(std::int32_t row, const std::vector<LogitEdit>& edits, PendingToken row_pending) {
  const auto by_id = [](const LogitEdit& a, const LogitEdit& b) { return a.id < b.id; };
  if (row_pending.on != 0 && pending.size() < rows.size()) pending.resize(rows.size());
  rows.push_back(row);
  const auto first = entries.insert(entries.end(), edits.begin(), edits.end());
  if (!std::is_sorted(first, entries.end(), by_id)) std::stable_sort(first, entries.end(), by_id);
  begins.push_back(static_cast<std::int32_t>(entries.size()));
  if (row_pending.on != 0 || !pending.empty()) pending.push_back(row_pending);
}

Status check_logit_edits(const LogitEdits& edits, std::int64_t rows, std::int64_t vocab, const std::string& what) {
  const std::size_t n = edits.rows.size();
  if (edits.begins.size() != n + 1 || edits.begins.front() != 0 ||
      edits.begins.back() != static_cast<std::int64_t>(edits.entries.size()))
    return make_error(what + ": edit row bounds must run from 0 to the " + std::to_string(edits.entries.size()) +
                      " entries, one more than the " + std::to_string(n) + " rows");
  if (!edits.pending.empty() && edits.pending.size() != n)
    return make_error(what + ": pending tokens must be none or one a row, got " + std::to_string(edits.pending.size()) +
                      " for " + std::to_string(n) + " rows");
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

LogitEdits resolve_pending(const LogitEdits& edits, const std::int32_t* tokens, std::int64_t vocab) {
  LogitEdits out;
  for (std::size_t i = 0; i < edits.rows.size(); ++i) {
    const auto first = edits.entries.begin() + edits.begins[i], last = edits.entries.begin() + edits.begins[i + 1];
    const PendingToken p = edits.pending.empty() ? PendingToken{} : edits.pending[i];
    const std::int32_t t = p.on != 0 ? tokens[edits.rows[i]] : -1;
    if (t < 0 || t >= vocab) {
      out.add_row(edits.rows[i], std::vector<LogitEdit>(first, last));
      continue;
    }
    const auto by_id = [](const LogitEdit& a, std::int32_t id) { return a.id < id; };
    const auto run = std::lower_bound(first, last, t, by_id);
    auto run_end = run;
    while (run_end != last && run_end->id == t) ++run_end;
    std::vector<LogitEdit> row(first, run);
    for (auto e = run; e != run_end; ++e)
      if (e->kind == LogitEditKind::add) row.push_back(*e);
    if (p.repetition != 1.f) row.push_back({t, LogitEditKind::repetition, p.repetition});
    if (p.subtract != 0) {
      float value = p.first;
      for (auto e = run; e != run_end; ++e)
        if (e->kind == LogitEditKind::subtract) value = e->next;
      row.push_back({t, LogitEditKind::subtract, value});
    }
    row.insert(row.end(), run_end, last);
    out.add_row(edits.rows[i], std::move(row));
  }
  return out;
}

void apply_logit_edits(float* logits, const LogitEdit* edits, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    float& x = logits[edits[i].id];
    x = apply_logit_edit(x, edits[i].kind, edits[i].value);
  }
}

}  // namespace day0
