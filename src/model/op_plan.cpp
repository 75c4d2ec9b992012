// ops_used: walk the block list and collect each op once; ops_plan: the largest shapes a step asks of a backend.
#include "model/op_plan.h"

#include <algorithm>
#include <map>
#include <sstream>

namespace day0 {

std::vector<OpUse> ops_used(const ModelSpec& spec) {
  std::vector<OpUse> uses;
  auto add = [&](OpKind k, std::string detail) {
    for (auto& u : uses)
      if (u.kind == k) return;
    uses.push_back({k, std::move(detail)});
  };
  add(OpKind::embedding, "vocab " + std::to_string(spec.vocab_size) + " x hidden " + std::to_string(spec.hidden_size));
  add(OpKind::rms_norm, "eps " + std::to_string(spec.final_norm.eps));
  std::map<int, int> windows;  // window -> layers (0 = full)
  for (const auto& L : spec.layers) {
    const AttentionSpec& a = L.mixer.attention;
    ++windows[a.sliding_window];
    add(OpKind::linear, std::string(a.q_bias.empty() ? "no bias" : "with bias"));
    if (a.rope.kind != RopeKind::none) {
      std::ostringstream r;
      r << (a.rope.kind == RopeKind::yarn ? "YaRN" : "default") << " theta " << a.rope.theta;
      if (a.rope.kind == RopeKind::yarn) r << " factor " << a.rope.factor << (a.rope.truncate ? "" : " no-truncate");
      add(OpKind::rope, r.str());
    }
    std::ostringstream at;
    at << "GQA " << a.n_heads << "/" << a.n_kv_heads << " heads, d=" << a.head_dim << (a.sinks ? ", sinks" : "");
    add(OpKind::attention, at.str());
    const MoESpec& m = L.channel.moe;
    add(OpKind::router_topk_softmax, "top-" + std::to_string(m.top_k) + " of " + std::to_string(m.n_experts));
    add(OpKind::expert_matmul, std::to_string(m.gate_up.out) + "x" + std::to_string(m.gate_up.in) + ", " +
                                         std::to_string(m.down.out) + "x" + std::to_string(m.down.in));
    std::ostringstream sw;
    sw << "alpha " << m.swiglu_alpha << ", limit " << m.swiglu_limit << (m.gate_up_interleaved ? ", interleaved" : "");
    add(OpKind::swiglu_clamped, sw.str());
    add(OpKind::moe_experts, std::to_string(m.n_experts) + " experts, " + std::to_string(m.top_k) + " per token");
  }
  add(OpKind::add_rms_norm, "residual add fused with the next norm");
  add(OpKind::lm_head, spec.tie_embeddings ? "tied to embedding" : "untied");
  add(OpKind::greedy_tokens, "argmax of each row of " + std::to_string(spec.vocab_size) + " logits (greedy decode)");
  // Attention detail lists the window pattern across layers.
  for (auto& u : uses)
    if (u.kind == OpKind::attention)
      for (auto [w, n] : windows)
        u.detail += w == 0 ? "; full x" + std::to_string(n) : "; window " + std::to_string(w) + " x" + std::to_string(n);
  return uses;
}

OpsPlan ops_plan(const ModelSpec& spec, std::int64_t max_step_tokens) {
  OpsPlan plan;
  plan.max_step_tokens = max_step_tokens;
  for (const auto& L : spec.layers) {
    if (L.channel.kind != ChannelMixerKind::moe) continue;
    const MoESpec& m = L.channel.moe;
    plan.n_experts = std::max(plan.n_experts, m.n_experts);
    plan.top_k = std::max(plan.top_k, m.top_k);
    plan.hidden = std::max<std::int64_t>(plan.hidden, m.down.out);
    plan.intermediate = std::max<std::int64_t>(plan.intermediate, m.intermediate);
    plan.expert_storage = expert_storage_of(m.gate_up.format);
  }
  return plan;
}

}  // namespace day0
