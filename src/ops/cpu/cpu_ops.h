// The CPU reference backend: plain loops, f32 accumulation, readable. The oracle every kernel is tested against.
#pragma once

#include "ops/ops.h"

namespace day0 {

class CpuOps final : public Ops {
 public:
  std::string_view backend() const override { return "cpu"; }
  OpEntry entry(OpKind kind) const override;

  Status embedding(const Tensor& table, const Tensor& ids, Tensor& out) override;
  Status rms_norm(const Tensor& x, const Tensor& w, float eps, bool plus_one, Tensor& out) override;
  Status linear(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& out) override;
  Status rope(Tensor& x, int n_heads, int head_dim, const Tensor& positions, const std::vector<float>& inv_freq,
              float attention_factor) override;
  Status attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_pos, const Tensor& sinks,
                   const AttentionParams& p, Tensor& out) override;
  Status router_topk_softmax(const Tensor& logits, int k, Tensor& indices, Tensor& weights) override;
  Status expert_matmul_mxfp4(const Tensor& x, const Mxfp4Experts& w, int expert, Tensor& out) override;
  Status swiglu_clamped(const Tensor& gate_up, const SwigluParams& p, Tensor& out) override;
  Status moe_experts(const Tensor& x, const Tensor& indices, const Tensor& weights, const Mxfp4Experts& gate_up,
                     const Mxfp4Experts& down, const SwigluParams& p, Tensor& out) override;
  Status add(Tensor& x, const Tensor& y) override;
  Status lm_head(const Tensor& x, const Tensor& w, Tensor& out) override;
};

// Shape checks shared by the CPU ops (and usable by other backends' launchers).
Status check_f32_matrix(const Tensor& t, const char* op, const char* what, std::int64_t rows, std::int64_t cols);
// Reads element i of a float tensor of any float dtype as f32.
float load_f32(const Tensor& t, std::int64_t i);

}  // namespace day0
