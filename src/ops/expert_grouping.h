// Token-to-expert grouping: the (token, slot) assignments of a router's top-k, sorted by expert, stable (in
// assignment order within each expert), as the MoE path needs them: per expert its count and offset, the token
// row and assignment index of every grouped entry, and the routed experts in ascending order.
// group_by_expert is the CPU reference; ops/cuda/expert_grouping_cuda.cu computes the same on the device, so the
// MoE path can stop copying the router's choices back to the host (issue 7).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"

namespace day0 {

struct ExpertGrouping {
  std::vector<std::int32_t> counts;       // [E]
  std::vector<std::int32_t> offsets;      // [E + 1], exclusive prefix sum of counts
  std::vector<std::int32_t> rows;         // [S * k]: token row of each grouped assignment
  std::vector<std::int32_t> assignments;  // [S * k]: index s * k + j of each grouped assignment
  std::vector<std::int32_t> experts;      // routed experts (count > 0), ascending
};

// indices: the router's choices, [S, k] row-major, each in [0, n_experts); an id outside is an error.
Result<ExpertGrouping> group_by_expert(std::span<const std::int32_t> indices, int k, int n_experts);

}  // namespace day0
