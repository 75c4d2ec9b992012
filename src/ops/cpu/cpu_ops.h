// The CPU reference backend: plain loops, f32 accumulation, readable. The oracle every kernel is tested against.
#pragma once

#include "ops/ops.h"

namespace day0 {

class CpuOps final : public Ops {
 public:
  std::string_view backend() const override { return "cpu"; }
  OpEntry entry(OpKind kind) const override;

  // Memory (cpu_memory.cpp): heap tensors; weights stay where the checkpoint maps them.
  Device device() const override { return Device::cpu; }
  Status plan(const OpsPlan&) override { return Status::success(); }
  Result<NamedTensors> place_weights(const NamedTensors& host, const WeightRoles& roles,
                                     const ProgressFn& progress) override;
  Result<Tensor> allocate(const Shape& shape, DType dtype, const std::string& what) override;
  Result<Tensor> scratch(const Shape& shape, DType dtype, const std::string& what) override;
  ScratchMark scratch_mark() const override { return {}; }
  Status scratch_release(ScratchMark) override { return Status::success(); }
  Result<Tensor> upload(const Tensor& host, const std::string& what) override;
  Result<Tensor> download(const Tensor& t) override;
  Result<Tensor> start_download(const Tensor& t) override { return download(t); }
  Status copy_from_host(const Tensor& host, Tensor& dst) override { return copy(host, dst); }
  Status copy(const Tensor& src, Tensor& dst) override;
  Status synchronize() override { return Status::success(); }
  std::vector<MemoryUse> memory_report() const override;

  Status embedding(const Tensor& table, const Tensor& ids, Tensor& out) override;
  Status rms_norm(const Tensor& x, const Tensor& w, float eps, bool plus_one, Tensor& out) override;
  Status linear(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& out) override;
  Status rope(Tensor& x, int n_heads, int head_dim, const Tensor& positions, const Tensor& inv_freq,
              float attention_factor) override;
  Status attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_pos, const Tensor& sinks,
                   const AttentionParams& p, Tensor& out) override;
  Status kv_write(const Tensor& k, const Tensor& v, const Tensor& slots, Tensor& k_pool, Tensor& v_pool) override;
  Status paged_attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool, const Tensor& q_pos,
                         const PagedKv& kv, const Tensor& sinks, const AttentionParams& p, Tensor& out) override;
  Status router_topk_softmax(const Tensor& logits, int k, Tensor& indices, Tensor& weights) override;
  Status expert_matmul(const Tensor& x, const ExpertWeights& w, int expert, Tensor& out) override;
  Status swiglu_clamped(const Tensor& gate_up, const SwigluParams& p, Tensor& out) override;
  Status moe_experts(const Tensor& x, const Tensor& indices, const Tensor& weights, const ExpertWeights& gate_up,
                     const ExpertWeights& down, const SwigluParams& p, Tensor& out) override;
  Status add(Tensor& x, const Tensor& y) override;
  Status add_rms_norm(Tensor& x, const Tensor& y, const Tensor& w, float eps, bool plus_one, Tensor& out) override;
  Status lm_head(const Tensor& x, const Tensor& w, Tensor& out) override;
  Status greedy_tokens(const Tensor& logits, Tensor& out, Tensor* tokens) override;
  Status edit_logits(Tensor& logits, const LogitEdits& edits, const Tensor* tokens) override;
  Status draw_tokens(const Tensor& logits, const std::vector<TokenDraw>& draws, Tensor& out, Tensor* tokens) override;
  Status row_logprobs(const Tensor& logits, const std::vector<LogprobRequest>& requests, const Tensor& out,
                      Tensor& records) override;

 private:
  std::uint64_t weight_bytes_ = 0, allocated_bytes_ = 0;
};

// Shape checks shared by the CPU ops (and usable by other backends' launchers).
Status check_f32_matrix(const Tensor& t, const char* op, const char* what, std::int64_t rows, std::int64_t cols);
// Reads element i of a float tensor of any float dtype as f32.
float load_f32(const Tensor& t, std::int64_t i);

}  // namespace day0
