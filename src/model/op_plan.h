// Which operators a ModelSpec needs, and with what parameters — the basis of the coverage checklist — and the
// largest shapes one forward step asks of a backend (what it reserves at start-up).
#pragma once

#include <string>
#include <vector>

#include "arch/model_spec.h"
#include "ops/op_kind.h"
#include "ops/ops.h"

namespace day0 {

struct OpUse {
  OpKind kind;
  std::string detail;  // e.g. "GQA 64/8 heads, d=64, sinks, window 128 (12 layers)"
};

std::vector<OpUse> ops_used(const ModelSpec& spec);
OpsPlan ops_plan(const ModelSpec& spec, std::int64_t max_step_tokens);

}  // namespace day0
