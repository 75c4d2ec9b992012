// group_by_expert: a stable counting sort over the assignments.
#include "ops/expert_grouping.h"

#include <string>

namespace day0 {

Result<ExpertGrouping> group_by_expert(std::span<const std::int32_t> indices, int k, int n_experts) {
  if (k <= 0 || n_experts <= 0 || indices.size() % static_cast<size_t>(k) != 0)
    return make_error("group_by_expert: need k > 0, E > 0 and [S, k] indices, got " + std::to_string(indices.size()) +
                      " indices for k " + std::to_string(k));
  ExpertGrouping g;
  g.counts.assign(static_cast<size_t>(n_experts), 0);
  for (size_t a = 0; a < indices.size(); ++a) {
    const std::int32_t e = indices[a];
    if (e < 0 || e >= n_experts)
      return make_error("group_by_expert: expert id " + std::to_string(e) + " at assignment " + std::to_string(a) +
                        " outside [0, " + std::to_string(n_experts) + ")");
    ++g.counts[static_cast<size_t>(e)];
  }
  g.offsets.assign(static_cast<size_t>(n_experts) + 1, 0);
  for (int e = 0; e < n_experts; ++e) {
    g.offsets[e + 1] = g.offsets[e] + g.counts[e];
    if (g.counts[e] > 0) g.experts.push_back(e);
  }
  g.rows.resize(indices.size());
  g.assignments.resize(indices.size());
  std::vector<std::int32_t> cursor(g.offsets.begin(), g.offsets.end() - 1);
  for (size_t a = 0; a < indices.size(); ++a) {
    const std::int32_t pos = cursor[static_cast<size_t>(indices[a])]++;
    g.rows[pos] = static_cast<std::int32_t>(a / static_cast<size_t>(k));
    g.assignments[pos] = static_cast<std::int32_t>(a);
  }
  return g;
}

}  // namespace day0
