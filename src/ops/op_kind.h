// Names of operators and how a backend provides each (the operator coverage checklist).
#pragma once

#include <string_view>

namespace day0 {

enum class OpKind {
  embedding, rms_norm, linear, rope, attention, kv_write, paged_attention, router_topk_softmax,
  expert_matmul, swiglu_clamped, moe_experts, add, add_rms_norm, lm_head, greedy_tokens,
  count_,
};

enum class OpEntry {
  native,    // a dedicated implementation on this backend
  composed,  // expressed with other registered ops
  fallback,  // the CPU reference run with transfers
  missing,
};

std::string_view op_kind_name(OpKind k);
std::string_view op_entry_name(OpEntry e);

}  // namespace day0
