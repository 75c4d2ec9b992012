// CudaOps: the CUDA backend of the Ops interface, over the kernels in this directory. Owns the CudaContext
// (device, stream, the one arena sized at start-up, cuBLASLt), the GEMM plans and the MoE workspace.
//
// Memory: one arena. Persistent tensors (uploaded weights, the MoE workspace, KV cache, tables) are carved from
// its bottom before the first step; each step's scratch is carved above them and rewound when the step ends,
// so no forward step calls cudaMalloc or cudaFree. A persistent allocation while scratch is live is an error.
// Every op enqueues on the context's one stream; errors of launches surface at once, asynchronous faults and
// device-side input errors (a token or expert id out of range) at synchronize().
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "ops/cuda/attention_cuda.h"
#include "ops/cuda/cuda_context.h"
#include "ops/cuda/gemm_bf16.h"
#include "ops/cuda/moe_cuda.h"
#include "ops/cuda/pinned_downloads.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace day0 {

// Coverage of the CUDA backend, answerable without a GPU.
OpEntry cuda_op_entry(OpKind kind);

class CudaOps final : public Ops {
 public:
  // Fails with a clear error where there is no usable CUDA device.
  static Result<std::unique_ptr<CudaOps>> create(const BackendOptions& options);
  ~CudaOps() override;

  std::string_view backend() const override { return "cuda"; }
  OpEntry entry(OpKind kind) const override { return cuda_op_entry(kind); }

  Device device() const override { return Device::cuda; }
  DType kv_cache_dtype() const override { return options_.kv_cache_dtype; }
  Status plan(const OpsPlan& plan) override;
  Result<NamedTensors> place_weights(const NamedTensors& host, const WeightRoles& roles,
                                     const ProgressFn& progress) override;
  ExpertStorage placed_expert_storage(ExpertStorage stored) const override {
    return stored == ExpertStorage::mxfp4 && experts_tiled_ ? ExpertStorage::mxfp4_tiled : stored;
  }
  Result<Tensor> allocate(const Shape& shape, DType dtype, const std::string& what) override;
  Result<Tensor> scratch(const Shape& shape, DType dtype, const std::string& what) override;
  ScratchMark scratch_mark() const override { return {ctx_->arena().mark().offset}; }
  Status scratch_release(ScratchMark mark) override;
  Result<Tensor> upload(const Tensor& host, const std::string& what) override;
  Status copy_from_host(const Tensor& host, Tensor& dst) override;
  Status copy_columns_from_host(const Tensor& host, Tensor& dst, std::int64_t cols) override;
  Result<Tensor> download(const Tensor& t) override;
  Result<Tensor> start_download(const Tensor& t) override;
  Status copy(const Tensor& src, Tensor& dst) override;
  Status synchronize() override;
  Result<QueuedFence> queue_fence() override;
  Status wait_fence(QueuedFence fence) override;
  std::vector<MemoryUse> memory_report() const override;
  std::optional<std::size_t> free_memory_bytes() const override { return ctx_->arena().free_bytes(); }
  void profile_begin(std::string_view span) override;
  void profile_end() override;
  Result<std::vector<ProfileEntry>> profile_report() override;
  Result<int> capture_graph(const std::function<Status()>& body) override;
  Status replay_graph(int graph) override;

  Status embedding(const Tensor& table, const Tensor& ids, Tensor& out) override;
  Status rms_norm(const Tensor& x, const Tensor& w, float eps, bool plus_one, Tensor& out) override;
  Status linear(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& out) override;
  Status linears(const Tensor& x, const std::vector<LinearTarget>& targets) override;
  Status rope(Tensor& x, int n_heads, int head_dim, const Tensor& positions, const Tensor& inv_freq,
              float attention_factor) override;
  Status attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_pos, const Tensor& sinks,
                   const AttentionParams& p, Tensor& out) override;
  Status kv_write(const Tensor& k, const Tensor& v, const Tensor& slots, Tensor& k_pool, Tensor& v_pool) override;
  Status rope_kv_write(Tensor& q, int n_heads, Tensor& k, int n_kv_heads, const Tensor& v, int head_dim,
                       const Tensor& positions, const Tensor& inv_freq, float attention_factor, const Tensor& slots,
                       Tensor& k_pool, Tensor& v_pool) override;
  bool linear_inputs_bf16(std::int64_t rows) const override;
  bool linear_reads_bf16(std::int64_t rows, const Tensor& w) const override;
  Status linears_rope_kv_write(const Tensor& x, const std::vector<LinearTarget>& qkv, const RopeKvArgs& r,
                               const Tensor* x_bf16) override;
  Status paged_attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool, const Tensor& q_pos,
                         const PagedKv& kv, const Tensor& sinks, const AttentionParams& p, Tensor& out) override;
  Status paged_attention_linear(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool, const Tensor& q_pos,
                                const PagedKv& kv, const Tensor& sinks, const AttentionParams& p, Tensor& mixed,
                                const LinearTarget& o) override;
  Status linears_rope_attention_linear(const Tensor& x, const std::vector<LinearTarget>& qkv, const RopeKvArgs& r,
                                       const Tensor* x_bf16, const PagedKv& kv, const Tensor& sinks,
                                       const AttentionParams& p, Tensor& mixed, const LinearTarget& o) override;
  Status router_topk_softmax(const Tensor& logits, int k, Tensor& indices, Tensor& weights) override;
  Status router(const Tensor& x, const Tensor& w, const Tensor& bias, int k, Tensor& logits, Tensor& indices,
                Tensor& weights) override;
  Status expert_matmul(const Tensor& x, const ExpertWeights& w, int expert, Tensor& out) override;
  Status swiglu_clamped(const Tensor& gate_up, const SwigluParams& p, Tensor& out) override;
  Status moe_experts(const Tensor& x, const Tensor& indices, const Tensor& weights, const ExpertWeights& gate_up,
                     const ExpertWeights& down, const SwigluParams& p, Tensor& out) override;
  Status add(Tensor& x, const Tensor& y) override;
  Status moe_experts_add_rms_norm(const Tensor& h, const Tensor& indices, const Tensor& weights,
                                  const ExpertWeights& gate_up, const ExpertWeights& down, const SwigluParams& p,
                                  Tensor& x, const Tensor& w, float eps, bool plus_one, Tensor& out,
                                  Tensor* out_bf16) override;
  Status add_rms_norm(Tensor& x, const Tensor& y, const Tensor& w, float eps, bool plus_one, Tensor& out) override;
  Status add_rms_norm_router(Tensor& x, const Tensor& y, const Tensor& w, float eps, bool plus_one, Tensor& out,
                             const Tensor& router_w, const Tensor& router_bias, int k, Tensor& logits, Tensor& indices,
                             Tensor& weights) override;
  Status lm_head(const Tensor& x, const Tensor& w, Tensor& out) override;
  Status greedy_tokens(const Tensor& logits, Tensor& out, Tensor* tokens) override;
  Status edit_logits(Tensor& logits, const LogitEdits& edits, const Tensor* tokens) override;
  Status draw_tokens(const Tensor& logits, const std::vector<TokenDraw>& draws, Tensor& out, Tensor* tokens) override;
  Status row_logprobs(const Tensor& logits, const std::vector<LogprobRequest>& requests, const Tensor& out,
                      Tensor& records) override;

  CudaContext& context() { return *ctx_; }
  const BackendOptions& options() const { return options_; }
  // Weight upload of the last place_weights: bytes read from the checkpoint, seconds, parallel readers.
  struct UploadStats {
    std::uint64_t bytes_read = 0, bytes_on_device = 0;
    double seconds = 0;
    int readers = 0;
  };
  const UploadStats& upload_stats() const { return upload_stats_; }

 private:
  CudaOps() = default;
  Result<Tensor> to_bf16(const Tensor& x, const char* what);
  // linears' GEMM path for targets the small-M kernel does not take: x as bf16 (xb, or converted here), one GEMM a
  // target.
  Status gemm_linears(const Tensor& x, const Tensor* xb, const std::vector<LinearTarget>& targets);
  bool gemm_takes(const Tensor& x, const LinearTarget& t) const;
  // q, k and v as one GEMM where place_weights put them (and their biases) back to back: false where it does not.
  Result<bool> qkv_gemm_rope_kv_write(const Tensor& x, const Tensor* x_bf16, const std::vector<LinearTarget>& qkv,
                                      const RopeKvArgs& r);
  // linears, with x's bf16 copy (or null) for the targets that take the GEMM path.
  Status linears_from(const Tensor& x, const Tensor* x_bf16, const std::vector<LinearTarget>& targets);
  std::int64_t small_m_max_rows(const std::vector<LinearTarget>& targets) const;
  Result<AttentionSplit> attention_split(std::int64_t S, std::int64_t sequences, const AttentionParams& p,
                                         std::int64_t max_keys);
  Result<AttentionSplit> paged_attention_split(const Tensor& q, const PagedKv& kv, const AttentionParams& p);
  // paged_attention_linear with the split given (paged_attention_split's, perhaps with q_cos_sin).
  Status paged_attention_linear_split(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool, const Tensor& q_pos,
                                      const PagedKv& kv, const Tensor& sinks, const AttentionParams& p,
                                      AttentionSplit split, Tensor& mixed, const LinearTarget& o);

  BackendOptions options_;
  bool experts_tiled_ = false;  // place_weights put MXFP4 expert blocks in the tiled order (options_.mxfp4_order)
  std::unique_ptr<CudaContext> ctx_;
  std::unique_ptr<MoeGemms> gemms_;  // bf16 for every dense matmul, bf16 or fp8 for the experts
  std::optional<MoeWorkspace> moe_;
  Tensor fault_flags_;                      // i32 [2]: error_flag_, then the MoE workspace's (one copy reads both)
  Tensor error_flag_;                       // i32 [1]: a kernel saw an id out of range since the last sync
  Tensor router_counters_;                  // u32 [kLinearSmallRouterSlices], zero between router launches
  std::shared_ptr<void> flags_host_;        // pinned i32 [2]: error_flag_ and the MoE's, read at synchronize
  // queue_fence's slots, a fence's serial modulo kFenceSlots: both flags as they were at the fence, and an event
  // after their copies.
  static constexpr int kFenceSlots = 4;
  std::shared_ptr<void> fence_flags_host_;  // pinned i32 [kFenceSlots, 2]
  cudaEvent_t fence_events_[kFenceSlots] = {};
  std::uint64_t fences_queued_ = 0;
  // Both flags into `into` (pinned i32 [2]) behind the queued work.
  Status queue_flag_copies(std::int32_t* into);
  PinnedDownloads downloads_;               // what download() returns borrows one of these
  std::size_t persistent_end_ = 0;          // arena offset where persistent memory ends and scratch begins
  std::size_t scratch_peak_ = 0;            // most scratch bytes live at once
  std::map<std::string, std::uint64_t> persistent_by_use_;  // "kv cache" -> bytes (the text before ':')
  std::uint64_t expert_weight_bytes_ = 0, dense_weight_bytes_ = 0;
  UploadStats upload_stats_;
  struct StepGraph {
    cudaGraphExec_t exec = nullptr;
    std::size_t scratch_base = 0;  // persistent_end_ at capture: the scratch addresses the graph uses start here
  };
  std::vector<StepGraph> graphs_;
  // Profiling: event pairs on the stream per span, resolved into totals once the device has passed them.
  struct EventSpan {
    std::string span;
    cudaEvent_t start = nullptr, stop = nullptr;
  };
  cudaEvent_t take_event();
  void resolve_spans();
  std::vector<cudaEvent_t> free_events_;
  std::vector<EventSpan> open_spans_, closed_spans_;
  ProfileTotals device_totals_;
};

}  // namespace day0
