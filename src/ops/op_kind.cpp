// Operator and coverage-entry names.
#include "ops/op_kind.h"

namespace day0 {

std::string_view op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::embedding: return "embedding";
    case OpKind::rms_norm: return "rms_norm";
    case OpKind::linear: return "linear";
    case OpKind::rope: return "rope";
    case OpKind::attention: return "attention";
    case OpKind::kv_write: return "kv_write";
    case OpKind::paged_attention: return "paged_attention";
    case OpKind::router_topk_softmax: return "router_topk_softmax";
    case OpKind::expert_matmul: return "expert_matmul";
    case OpKind::swiglu_clamped: return "swiglu_clamped";
    case OpKind::moe_experts: return "moe_experts";
    case OpKind::add: return "add";
    case OpKind::add_rms_norm: return "add_rms_norm";
    case OpKind::lm_head: return "lm_head";
    case OpKind::greedy_tokens: return "greedy_tokens";
    case OpKind::count_: break;
  }
  return "?";
}

std::string_view op_entry_name(OpEntry e) {
  switch (e) {
    case OpEntry::native: return "native";
    case OpEntry::composed: return "composed";
    case OpEntry::fallback: return "fallback";
    case OpEntry::missing: return "missing";
  }
  return "?";
}

}  // namespace day0
