// Which operators a ModelSpec needs, and with what parameters — the basis of the coverage checklist.
#pragma once

#include <string>
#include <vector>

#include "arch/model_spec.h"
#include "ops/op_kind.h"

namespace day0 {

struct OpUse {
  OpKind kind;
  std::string detail;  // e.g. "GQA 64/8 heads, d=64, sinks, window 128 (12 layers)"
};

std::vector<OpUse> ops_used(const ModelSpec& spec);

}  // namespace day0
