// CudaOps: creation, profiling spans, step graphs and the op entry points (each op validates through its launcher);
// its device memory and copies are cuda_ops_memory.cpp.
#include "ops/cuda/cuda_ops.h"

#include <limits>
#include <string>

#include "ops/cuda/attention_cuda.h"
#include "ops/cuda/attention_tc_cuda.h"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/dependent_launch.h"
#include "ops/cuda/linear_small_cuda.h"
#include "ops/cuda/norm_router_cuda.h"

namespace day0 {

OpEntry cuda_op_entry(OpKind kind) {
  switch (kind) {
    case OpKind::lm_head: return OpEntry::composed;  // linear without bias
    case OpKind::count_: return OpEntry::missing;
    default: return OpEntry::native;
  }
}

Result<std::unique_ptr<CudaOps>> CudaOps::create(const BackendOptions& options) {
  if (!(options.memory_fraction > 0.0 && options.memory_fraction <= 1.0))
    return make_error("cuda: memory fraction " + std::to_string(options.memory_fraction) + " must be in (0, 1]");
  int n_devices = 0;
  if (cudaGetDeviceCount(&n_devices) != cudaSuccess || n_devices == 0) {
    (void)cudaGetLastError();
    return make_error("cuda: no CUDA device is visible on this machine (use --backend cpu)");
  }
  if (options.device < 0 || options.device >= n_devices)
    return make_error("cuda: device " + std::to_string(options.device) + " does not exist (" +
                      std::to_string(n_devices) + " visible)");
  D0_CUDA_RETURN_IF_ERROR(cudaSetDevice(options.device));
  std::size_t free_bytes = 0, total_bytes = 0;
  D0_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
  // This instance's budget, as vLLM's gpu_memory_utilization: a share of the total, which must be free now
  // (with room for the CUDA context and cuBLASLt's own allocations).
  const auto budget = static_cast<std::size_t>(options.memory_fraction * double(total_bytes));
  constexpr std::size_t kHeadroom = std::size_t(512) << 20;
  if (budget + kHeadroom > free_bytes)
    return make_error("cuda: memory fraction " + std::to_string(options.memory_fraction) + " asks for " +
                      format_bytes(budget) + " but only " + format_bytes(free_bytes) + " of " +
                      format_bytes(total_bytes) + " is free on device " + std::to_string(options.device) +
                      " (lower --memory-fraction)");
  std::unique_ptr<CudaOps> ops(new CudaOps());
  ops->options_ = options;
  set_dependent_launch(options.dependent_launch);
  CudaContextOptions co;
  co.device = options.device;
  co.arena_bytes = budget;
  D0_ASSIGN_OR_RETURN(ops->ctx_, CudaContext::create(co));
  ops->gemms_ = std::make_unique<MoeGemms>(*ops->ctx_);
  D0_ASSIGN_OR_RETURN(ops->fault_flags_, ops->ctx_->arena().allocate({2}, DType::i32, "fault flags"));
  D0_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(ops->fault_flags_.raw(), 0, ops->fault_flags_.nbytes(), ops->ctx_->stream()));
  ops->error_flag_ = ops->fault_flags_.slice_rows(0, 1);
  D0_ASSIGN_OR_RETURN(ops->router_counters_,
                      ops->ctx_->arena().allocate({kLinearSmallRouterSlices}, DType::u32, "router counters"));
  D0_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(ops->router_counters_.raw(), 0, ops->router_counters_.nbytes(), ops->ctx_->stream()));
  D0_ASSIGN_OR_RETURN(ops->flags_host_, PinnedDownloads::allocate(2 * sizeof(std::int32_t)));
  D0_ASSIGN_OR_RETURN(ops->fence_flags_host_, PinnedDownloads::allocate(2 * kFenceSlots * sizeof(std::int32_t)));
  ops->persistent_end_ = ops->ctx_->arena().used_bytes();
  ops->persistent_by_use_["cuBLASLt workspace"] = co.cublas_workspace_bytes;
  return ops;
}

CudaOps::~CudaOps() {
  for (StepGraph& g : graphs_) cudaGraphExecDestroy(g.exec);
  for (const auto* spans : {&open_spans_, &closed_spans_})
    for (const EventSpan& e : *spans)
      for (cudaEvent_t ev : {e.start, e.stop})
        if (ev) free_events_.push_back(ev);
  for (cudaEvent_t ev : free_events_) cudaEventDestroy(ev);
  for (cudaEvent_t ev : fence_events_)
    if (ev) cudaEventDestroy(ev);
  // Plans and the workspace borrow the context: release them first.
  moe_.reset();
  gemms_.reset();
}

// ---- profiling

cudaEvent_t CudaOps::take_event() {
  if (!free_events_.empty()) {
    cudaEvent_t e = free_events_.back();
    free_events_.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  return cudaEventCreate(&e) == cudaSuccess ? e : nullptr;  // a span without events is just not counted
}

void CudaOps::profile_begin(std::string_view span) {
  if (!profiling_) return;
  EventSpan s{std::string(span), take_event(), nullptr};
  if (s.start) cudaEventRecord(s.start, ctx_->stream());
  open_spans_.push_back(std::move(s));
}

void CudaOps::profile_end() {
  if (!profiling_ || open_spans_.empty()) return;
  EventSpan s = std::move(open_spans_.back());
  open_spans_.pop_back();
  s.stop = take_event();
  if (s.stop) cudaEventRecord(s.stop, ctx_->stream());
  closed_spans_.push_back(std::move(s));
}

// Closed spans into totals; call after the stream has passed them (synchronize does).
void CudaOps::resolve_spans() {
  for (EventSpan& s : closed_spans_) {
    float ms = 0;
    if (s.start && s.stop && cudaEventElapsedTime(&ms, s.start, s.stop) == cudaSuccess)
      device_totals_.add(s.span, ms * 1e-3);
    for (cudaEvent_t ev : {s.start, s.stop})
      if (ev) free_events_.push_back(ev);
  }
  closed_spans_.clear();
}

Result<std::vector<ProfileEntry>> CudaOps::profile_report() {
  D0_RETURN_IF_ERROR(ctx_->synchronize());
  resolve_spans();
  return device_totals_.entries();
}

// ---- step graphs

Result<int> CudaOps::capture_graph(const std::function<Status()>& body) {
  if (ctx_->arena().used_bytes() != persistent_end_)
    return make_error("cuda graph capture: scratch is live (capture a whole step, from no scratch)");
  cudaStream_t s = ctx_->stream();
  D0_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  const Status st = body();
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(s, &graph);
  (void)cudaGetLastError();  // a refused call inside the capture leaves a sticky launch error: clear it
  if (!st.ok() || end != cudaSuccess) {
    if (graph) cudaGraphDestroy(graph);
    return make_error("cuda graph capture: " + (st.ok() ? std::string(cudaGetErrorString(end)) : st.error().message));
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  D0_CUDA_RETURN_IF_ERROR(inst);
  graphs_.push_back({exec, persistent_end_});
  return static_cast<int>(graphs_.size() - 1);
}

Status CudaOps::replay_graph(int graph) {
  if (graph < 0 || graph >= static_cast<int>(graphs_.size()))
    return make_error("cuda graph replay: no graph " + std::to_string(graph));
  if (ctx_->arena().used_bytes() != persistent_end_ || graphs_[graph].scratch_base != persistent_end_)
    return make_error("cuda graph replay: scratch is live or persistent memory moved since the capture");
  D0_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(graphs_[graph].exec, ctx_->stream()));
  return Status::success();
}

// ---- ops

Result<Tensor> CudaOps::to_bf16(const Tensor& x, const char* what) {
  D0_ASSIGN_OR_RETURN(Tensor t, scratch(x.shape(), DType::bf16, what));
  D0_RETURN_IF_ERROR(convert_f32_to_bf16_cuda(x, t, ctx_->stream()));
  return t;
}

Status CudaOps::embedding(const Tensor& table, const Tensor& ids, Tensor& out) {
  return embedding_cuda(table, ids, out, error_flag_, ctx_->stream());
}

Status CudaOps::rms_norm(const Tensor& x, const Tensor& w, float eps, bool plus_one, Tensor& out) {
  Tensor in = x;  // not written: no residual
  return rms_norm_residual_cuda(in, Tensor(), w, eps, plus_one, out, ctx_->stream());
}

Status CudaOps::add_rms_norm(Tensor& x, const Tensor& y, const Tensor& w, float eps, bool plus_one, Tensor& out) {
  return rms_norm_residual_cuda(x, y, w, eps, plus_one, out, ctx_->stream());
}

Status CudaOps::linear(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& out) {
  return linears(x, {{w, bias, out}});
}

// The most rows linears sends to the small-M kernel: every count in batch-invariant mode (one kernel for every
// row count, 16 rows a slice), else decode sizes (linear_small_max_rows).
std::int64_t CudaOps::small_m_max_rows(const std::vector<LinearTarget>& targets) const {
  return options_.batch_invariant ? std::numeric_limits<std::int64_t>::max() : linear_small_max_rows(targets);
}

Status CudaOps::linears(const Tensor& x, const std::vector<LinearTarget>& targets) {
  return linears_from(x, nullptr, targets);
}

// Past kLinearSmallTinyMaxRows rows no target takes the small-M kernel (linear_small_max_rows is at most that for
// any weight): every one is a GEMM on bf16 rows.
bool CudaOps::linear_inputs_bf16(std::int64_t rows) const {
  return !options_.batch_invariant && rows > kLinearSmallTinyMaxRows;
}

// gemm_takes without x (its width, checked per call, aside): 20b's q/k/v from 17 rows.
bool CudaOps::linear_reads_bf16(std::int64_t rows, const Tensor& w) const {
  return !options_.batch_invariant && w.dtype() == DType::bf16 && rows > small_m_max_rows({{w, Tensor(), Tensor()}});
}

// Decode sizes: one small-M kernel for every target; else the targets small enough for this row count alone
// (q/k/v at batch 64: k and v) in one small-M kernel, and x in bf16 (x_bf16, or converted once) and a GEMM per
// other target.
Status CudaOps::linears_from(const Tensor& x, const Tensor* x_bf16, const std::vector<LinearTarget>& targets) {
  for (const LinearTarget& t : targets)
    if (t.w.dtype() != DType::bf16)
      return make_error("cuda linear: weight must be bf16 (place_weights converts), got " +
                        std::string(dtype_name(t.w.dtype())));
  if (linear_small_fits(x, targets, small_m_max_rows(targets)))
    return linear_small_cuda(x, targets, ctx_->sm_count(), ctx_->stream());
  if (options_.batch_invariant)
    return make_error("cuda linear: batch-invariant mode needs K a multiple of 8 and at most " +
                      std::to_string(kLinearSmallMaxTargets) + " outputs per call, got x " +
                      shape_to_string(x.shape()));
  std::vector<LinearTarget> small, gemm_targets;
  for (const LinearTarget& t : targets) {
    const bool fits =
        small.size() < static_cast<size_t>(kLinearSmallMaxTargets) && linear_small_fits(x, {t}, small_m_max_rows({t}));
    (fits ? small : gemm_targets).push_back(t);
  }
  if (!small.empty()) D0_RETURN_IF_ERROR(linear_small_cuda(x, small, ctx_->sm_count(), ctx_->stream()));
  return gemm_linears(x, x_bf16, gemm_targets);
}

// Whether linears would send target t over rows x to cuBLASLt (a bf16 weight the small-M kernel does not take).
bool CudaOps::gemm_takes(const Tensor& x, const LinearTarget& t) const {
  return !options_.batch_invariant && x.dim() == 2 && t.w.dtype() == DType::bf16 &&
         !linear_small_fits(x, {t}, small_m_max_rows({t}));
}

Status CudaOps::gemm_linears(const Tensor& x, const Tensor* x_bf16, const std::vector<LinearTarget>& targets) {
  if (targets.empty()) return Status::success();
  // Profiled runs time the GEMM path's parts too (nested spans: their time is also in the caller's span).
  Tensor xb = x_bf16 ? *x_bf16 : Tensor();
  if (!x_bf16) {
    if (profiling_) profile_begin("  (GEMM path) x to bf16");
    Result<Tensor> converted = to_bf16(x, "linear input");
    if (profiling_) profile_end();
    if (!converted.ok()) return converted.error();
    xb = *converted;
  }
  for (const LinearTarget& t : targets) {
    Tensor out = t.out;  // a handle: the GEMM writes the target's storage
    if (profiling_)
      profile_begin("  (GEMM path) cuBLASLt + bias, N " + std::to_string(t.w.size(0)) + " K " +
                    std::to_string(t.w.size(1)));
    const Status st = gemms_->bf16.run(xb, t.w, t.bias, out);
    if (profiling_) profile_end();
    D0_RETURN_IF_ERROR(st);
  }
  return Status::success();
}

Status CudaOps::lm_head(const Tensor& x, const Tensor& w, Tensor& out) { return linear(x, w, Tensor(), out); }

Status CudaOps::greedy_tokens(const Tensor& logits, Tensor& out, Tensor* tokens) {
  return greedy_tokens_cuda(logits, out, tokens, ctx_->stream());
}

Status CudaOps::edit_logits(Tensor& logits, const LogitEdits& edits, const Tensor* tokens) {
  return edit_logits_cuda(logits, edits, tokens, ctx_->stream());
}

Status CudaOps::draw_tokens(const Tensor& logits, const std::vector<TokenDraw>& draws, Tensor& out, Tensor* tokens) {
  return draws.empty() ? Status::success() : draw_tokens_cuda(logits, draws, out, tokens, ctx_->stream());
}

Status CudaOps::row_logprobs(const Tensor& logits, const std::vector<LogprobRequest>& requests, const Tensor& out,
                             Tensor& records) {
  return requests.empty() ? Status::success() : row_logprobs_cuda(logits, requests, out, records, ctx_->stream());
}

Status CudaOps::rope(Tensor& x, int n_heads, int head_dim, const Tensor& positions, const Tensor& inv_freq,
                     float attention_factor) {
  return rope_cuda(x, n_heads, head_dim, positions, inv_freq, attention_factor, ctx_->stream());
}

// Split-K over the keys when the step has few (query, head) pairs (decode): partials from step scratch.
// Tensor cores for prefill-shaped steps only: a 64-row tile walks every sequence among its rows, so a decode batch
// (one row per sequence) stays on the per-query kernel (measured: 64 decode rows 3.4x slower through the tiles).
Result<AttentionSplit> CudaOps::attention_split(std::int64_t S, std::int64_t sequences, const AttentionParams& p,
                                                std::int64_t max_keys) {
  AttentionSplit split;
  if (options_.batch_invariant) {  // splits of a fixed length, always merged: a query's sums ignore the batch
    split.keys_per_split = kAttentionInvariantKeysPerSplit;
    split.splits = attention_invariant_splits(p, max_keys);
  } else {
    split.splits = attention_splits(S, p, max_keys, ctx_->sm_count());
    split.tensor_cores = options_.attention_tensor_cores && S >= kAttentionTcMinRowsPerSequence * sequences;
    split.bf16_operands = options_.attention_bf16_operands;
  }
  if (split.splits > 1) {
    D0_ASSIGN_OR_RETURN(split.partials, scratch({attention_partials_floats(S, p, split.splits)}, DType::f32,
                                                "attention split partials"));
  }
  return split;
}

Status CudaOps::attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_pos, const Tensor& sinks,
                          const AttentionParams& p, Tensor& out) {
  D0_ASSIGN_OR_RETURN(AttentionSplit split,
                      attention_split(q.dim() == 2 ? q.size(0) : 0, 1, p, k.dim() == 2 ? k.size(0) : 0));
  return attention_cuda(q, k, v, q_pos, sinks, p, out, ctx_->stream(), split);
}

Status CudaOps::kv_write(const Tensor& k, const Tensor& v, const Tensor& slots, Tensor& k_pool, Tensor& v_pool) {
  return kv_write_cuda(k, v, slots, k_pool, v_pool, error_flag_, ctx_->stream());
}

Status CudaOps::rope_kv_write(Tensor& q, int n_heads, Tensor& k, int n_kv_heads, const Tensor& v, int head_dim,
                              const Tensor& positions, const Tensor& inv_freq, float attention_factor,
                              const Tensor& slots, Tensor& k_pool, Tensor& v_pool) {
  return rope_kv_write_cuda(q, n_heads, k, n_kv_heads, v, head_dim, positions, inv_freq, attention_factor, slots,
                            k_pool, v_pool, error_flag_, ctx_->stream());
}

// Steps whose q/k/v the small-M kernel takes (decode): the rope and the KV write in its epilogue, one launch
// instead of two, the same bits (linear_small_rope_kv_cuda). Others: the GEMMs on x_bf16 where given.
Status CudaOps::linears_rope_kv_write(const Tensor& x, const std::vector<LinearTarget>& qkv, const RopeKvArgs& r,
                                      const Tensor* x_bf16) {
  if (linear_small_rope_kv_fits(x, qkv, r, small_m_max_rows(qkv)))
    return linear_small_rope_kv_cuda(x, qkv, r, error_flag_, ctx_->sm_count(), ctx_->stream());
  if (qkv.size() != 3) return make_error("linears_rope_kv_write: takes the three targets q, k and v");
  D0_ASSIGN_OR_RETURN(const bool fused, qkv_gemm_rope_kv_write(x, x_bf16, qkv, r));
  if (fused) return Status::success();
  D0_RETURN_IF_ERROR(linears_from(x, x_bf16, qkv));
  Tensor q = qkv[0].out, k = qkv[1].out, k_pool = r.k_pool, v_pool = r.v_pool;  // handles: their storage
  return rope_kv_write(q, r.n_heads, k, r.n_kv_heads, qkv[2].out, r.head_dim, r.positions, r.inv_freq,
                       r.attention_factor, r.slots, k_pool, v_pool);
}

// Decode batches past the small-M kernel's rows for q (17-128 rows): q alone on cuBLASLt and k, v on the small-M
// kernel read 29.5 MB a 20b layer at ~1.5 TB/s (H100, batch 64); one GEMM over the three weights placed back to
// back (WeightRoles::adjacent) reads them at q's rate, and the RoPE kernel takes q, k and v from its rows. Longer
// steps keep their own path (the attention may rotate q as it loads it).
Result<bool> CudaOps::qkv_gemm_rope_kv_write(const Tensor& x, const Tensor* x_bf16,
                                             const std::vector<LinearTarget>& qkv, const RopeKvArgs& r) {
  if (x.dim() != 2 || x.size(0) > kLinearSmallTinyMaxRows || !gemm_takes(x, qkv[0])) return false;
  const Tensor w = Tensor::adjacent_rows({qkv[0].w, qkv[1].w, qkv[2].w});
  const bool no_bias = !qkv[0].bias.defined() && !qkv[1].bias.defined() && !qkv[2].bias.defined();
  const Tensor bias = no_bias ? Tensor() : Tensor::adjacent_rows({qkv[0].bias, qkv[1].bias, qkv[2].bias});
  if (!w.defined() || w.dim() != 2 || (!no_bias && !bias.defined()) ||
      !rope_kv_write_from_qkv_fits(r.n_heads, r.n_kv_heads, r.head_dim, r.inv_freq, qkv[0].out, qkv[1].out, qkv[2].out,
                                   r.k_pool, r.v_pool))
    return false;
  const ScratchMark mark = scratch_mark();
  D0_ASSIGN_OR_RETURN(Tensor rows, scratch({x.size(0), w.size(0)}, DType::f32, "q/k/v rows"));
  D0_RETURN_IF_ERROR(gemm_linears(x, x_bf16, {{w, bias, rows}}));
  Tensor q = qkv[0].out, k = qkv[1].out, v = qkv[2].out, k_pool = r.k_pool, v_pool = r.v_pool;  // handles
  D0_RETURN_IF_ERROR(rope_kv_write_from_qkv_cuda(rows, q, r.n_heads, k, r.n_kv_heads, v, r.head_dim, r.positions,
                                                 r.inv_freq, r.attention_factor, r.slots, k_pool, v_pool, error_flag_,
                                                 ctx_->stream()));
  D0_RETURN_IF_ERROR(scratch_release(mark));  // stream-ordered: later kernels may reuse the rows
  return true;
}

Result<AttentionSplit> CudaOps::paged_attention_split(const Tensor& q, const PagedKv& kv, const AttentionParams& p) {
  const std::int64_t max_keys = kv.block_tables.dim() == 2 ? kv.block_tables.size(1) * kv.block_size : 0;
  const std::int64_t sequences = kv.block_tables.dim() == 2 ? kv.block_tables.size(0) : 1;
  return attention_split(q.dim() == 2 ? q.size(0) : 0, sequences, p, max_keys);
}

Status CudaOps::paged_attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool, const Tensor& q_pos,
                                const PagedKv& kv, const Tensor& sinks, const AttentionParams& p, Tensor& out) {
  D0_ASSIGN_OR_RETURN(AttentionSplit split, paged_attention_split(q, kv, p));
  return paged_attention_cuda(q, k_pool, v_pool, q_pos, kv, sinks, p, out, ctx_->stream(), split);
}

// Where cuBLASLt serves the projection, the attention kernel that writes the rows (tensor-core, group or merge)
// writes the projection's bf16 input instead of its f32 output: no conversion between (the same bits; 25 us a 120b
// layer at 4,096 tokens on the H200, a launch a layer in decode), and `mixed` (scratch) left unwritten.
Status CudaOps::paged_attention_linear(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool, const Tensor& q_pos,
                                       const PagedKv& kv, const Tensor& sinks, const AttentionParams& p, Tensor& mixed,
                                       const LinearTarget& o) {
  D0_ASSIGN_OR_RETURN(AttentionSplit split, paged_attention_split(q, kv, p));
  return paged_attention_linear_split(q, k_pool, v_pool, q_pos, kv, sinks, p, std::move(split), mixed, o);
}

Status CudaOps::paged_attention_linear_split(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool,
                                             const Tensor& q_pos, const PagedKv& kv, const Tensor& sinks,
                                             const AttentionParams& p, AttentionSplit split, Tensor& mixed,
                                             const LinearTarget& o) {
  if (gemm_takes(mixed, o)) {
    D0_ASSIGN_OR_RETURN(split.out_bf16, scratch(mixed.shape(), DType::bf16, "attention out bf16"));
    split.bf16_only = true;
  }
  D0_RETURN_IF_ERROR(paged_attention_cuda(q, k_pool, v_pool, q_pos, kv, sinks, p, mixed, ctx_->stream(), split));
  if (split.out_bf16.defined()) return gemm_linears(mixed, &split.out_bf16, {o});
  Tensor out = o.out;  // a handle: linear writes the target's storage
  return linear(mixed, o.w, o.bias, out);
}

// Prefill steps whose attention the tensor-core kernel takes with bf16 operands: q is not rotated by the rope kernel
// (67 MB read and 67 MB written in f32 a 120b layer at 4,096 tokens) but by the attention kernel as it loads q, from
// the table of cos and sin the rope kernel writes instead; the same bits. Decode (the small-M kernel's rope
// epilogue) and every other step: the two ops as they are.
Status CudaOps::linears_rope_attention_linear(const Tensor& x, const std::vector<LinearTarget>& qkv,
                                              const RopeKvArgs& r, const Tensor* x_bf16, const PagedKv& kv,
                                              const Tensor& sinks, const AttentionParams& p, Tensor& mixed,
                                              const LinearTarget& o) {
  if (qkv.size() != 3) return make_error("linears_rope_attention_linear: takes the three targets q, k and v");
  // Decode (the small-M kernel's rope epilogue) decides before any split is planned: its steps never defer.
  if (linear_small_rope_kv_fits(x, qkv, r, small_m_max_rows(qkv)))
    return Ops::linears_rope_attention_linear(x, qkv, r, x_bf16, kv, sinks, p, mixed, o);
  const ScratchMark mark = scratch_mark();
  D0_ASSIGN_OR_RETURN(AttentionSplit split, paged_attention_split(qkv[0].out, kv, p));
  const std::int64_t half = r.inv_freq.dim() == 1 ? r.inv_freq.size(0) : 0;
  if (!attention_rotates_q(qkv[0].out, r.k_pool, r.v_pool, p, split, half)) {
    D0_RETURN_IF_ERROR(scratch_release(mark));  // the split's partials: paged_attention_linear takes its own
    return Ops::linears_rope_attention_linear(x, qkv, r, x_bf16, kv, sinks, p, mixed, o);
  }
  D0_RETURN_IF_ERROR(linears_from(x, x_bf16, qkv));
  D0_ASSIGN_OR_RETURN(split.q_cos_sin, scratch({qkv[0].out.size(0), 2 * half}, DType::f32, "q rope cos/sin"));
  Tensor q = qkv[0].out, k = qkv[1].out, k_pool = r.k_pool, v_pool = r.v_pool;  // handles: their storage
  D0_RETURN_IF_ERROR(rope_kv_write_cuda(q, r.n_heads, k, r.n_kv_heads, qkv[2].out, r.head_dim, r.positions, r.inv_freq,
                                        r.attention_factor, r.slots, k_pool, v_pool, error_flag_, ctx_->stream(),
                                        &split.q_cos_sin));
  return paged_attention_linear_split(q, k_pool, v_pool, r.positions, kv, sinks, p, std::move(split), mixed, o);
}

Status CudaOps::router_topk_softmax(const Tensor& logits, int k, Tensor& indices, Tensor& weights) {
  return router_topk_softmax_cuda(logits, k, indices, weights, ctx_->stream());
}

// Where the router's linear takes the small-M kernel (every step of up to 128 tokens), its top-k runs in the same
// launch: the same bits as the two launches, one kernel fewer a layer.
Status CudaOps::router(const Tensor& x, const Tensor& w, const Tensor& bias, int k, Tensor& logits, Tensor& indices,
                       Tensor& weights) {
  const LinearTarget target{w, bias, logits};
  // Only rows CudaOps::linears would send to the small-M kernel, so the logits are the bits it would give.
  if (linear_small_router_fits(x, target, k, small_m_max_rows({target})))
    return linear_small_router_cuda(x, target, k, indices, weights, router_counters_, ctx_->sm_count(), ctx_->stream());
  return Ops::router(x, w, bias, k, logits, indices, weights);
}

// Decode steps whose router the small-M kernel would take: the norm and router in one launch, the same bits as the
// two (norm_router_cuda.h), where its CTAs (a cluster for every two rows, each CTA normalising them itself) fit one
// wave: 20b up to 128 rows, 120b's 8-CTA clusters up to 32. Rows the router's GEMM takes (prefill): the norm writes the
// bf16 copy of its output that GEMM reads as it goes, instead of a conversion after (the same bits: 24 us a 120b layer
// at 4,096 tokens on the H200).
Status CudaOps::add_rms_norm_router(Tensor& x, const Tensor& y, const Tensor& w, float eps, bool plus_one, Tensor& out,
                                    const Tensor& router_w, const Tensor& router_bias, int k, Tensor& logits,
                                    Tensor& indices, Tensor& weights) {
  const LinearTarget target{router_w, router_bias, logits};
  if (norm_router_fits(x, y, w, out, target, k) &&
      linear_small_router_fits(out, target, k, small_m_max_rows({target})) &&
      norm_router_ctas(x.size(0), router_w.size(0)) <= ctx_->sm_count())
    return norm_router_cuda(x, y, w, eps, plus_one, out, target, k, indices, weights, ctx_->stream());
  if (!linear_small_router_fits(out, target, k, small_m_max_rows({target})) && gemm_takes(out, target)) {
    D0_ASSIGN_OR_RETURN(Tensor out_bf16, scratch(out.shape(), DType::bf16, "normed rows bf16"));
    D0_RETURN_IF_ERROR(rms_norm_residual_cuda(x, y, w, eps, plus_one, out, ctx_->stream(), &out_bf16));
    D0_RETURN_IF_ERROR(gemm_linears(out, &out_bf16, {target}));
    return router_topk_softmax(logits, k, indices, weights);
  }
  return Ops::add_rms_norm_router(x, y, w, eps, plus_one, out, router_w, router_bias, k, logits, indices, weights);
}

Status CudaOps::swiglu_clamped(const Tensor& gate_up, const SwigluParams& p, Tensor& out) {
  return swiglu_clamped_cuda(gate_up, p, out, ctx_->stream());
}

// One expert: MXFP4 decoded to bf16 into scratch, or the stored tensor's slice; bf16 experts in a bf16 GEMM, fp8
// ones in an fp8 GEMM with x quantised per token (as the MoE path computes them).
Status CudaOps::expert_matmul(const Tensor& x, const ExpertWeights& w, int expert, Tensor& out) {
  if (expert < 0 || expert >= w.n_experts)
    return make_error("cuda expert_matmul: expert " + std::to_string(expert) + " outside [0, " +
                      std::to_string(w.n_experts) + ")");
  const Tensor bias = has_values(w.bias) ? w.bias.slice_rows(expert, expert + 1).view({w.out}) : Tensor();
  if (!is_mxfp4(w.storage)) D0_RETURN_IF_ERROR(check_expert_weights(w, "cuda expert_matmul", Device::cuda));
  if (w.storage == ExpertStorage::fp8_rowwise) {
    if (x.dim() != 2) return make_error("cuda expert_matmul: x must be 2-D");
    D0_ASSIGN_OR_RETURN(Tensor xq, scratch({x.size(0), w.in}, DType::f8_e4m3, "expert input fp8"));
    D0_ASSIGN_OR_RETURN(Tensor sx, scratch({x.size(0)}, DType::f32, "expert input scales"));
    D0_RETURN_IF_ERROR(gather_quantize_fp8_cuda(x, Tensor(), xq, sx, error_flag_, ctx_->stream()));
    const Tensor wq = w.values.slice_rows(expert, expert + 1).view({w.out, w.in});
    const Tensor sw = w.row_scales.slice_rows(expert, expert + 1).view({w.out});
    return gemms_->fp8.run(xq, sx, wq, sw, bias, out);
  }
  Tensor wb;
  if (w.storage == ExpertStorage::bf16) {
    wb = w.values.slice_rows(expert, expert + 1);
  } else {
    Tensor host_id = Tensor::zeros({1}, DType::i32);
    host_id.data<std::int32_t>()[0] = expert;
    D0_ASSIGN_OR_RETURN(Tensor id, upload(host_id, "expert id"));
    D0_ASSIGN_OR_RETURN(wb, scratch({1, w.out, w.in}, DType::bf16, "expert weights"));
    D0_RETURN_IF_ERROR(mxfp4_experts_to_bf16_cuda(w, id, wb, error_flag_, ctx_->stream()));
  }
  D0_ASSIGN_OR_RETURN(Tensor xb, to_bf16(x, "expert input"));
  return gemms_->bf16.run(xb, wb.view({w.out, w.in}), bias, out);
}

Status CudaOps::moe_experts(const Tensor& x, const Tensor& indices, const Tensor& weights, const ExpertWeights& gate_up,
                            const ExpertWeights& down, const SwigluParams& p, Tensor& out) {
  if (!moe_) return make_error("cuda moe_experts: no MoE workspace (plan() was not given the model's experts)");
  return moe_experts_cuda(x, indices, weights, gate_up, down, p, *moe_, *gemms_, out, ctx_->stream());
}

// On the fused MXFP4 path the experts' weighted sum runs inside the norm's kernel (and the bf16 copy is written with
// its output); elsewhere as Ops does, the copy converted after.
Status CudaOps::moe_experts_add_rms_norm(const Tensor& h, const Tensor& indices, const Tensor& weights,
                                         const ExpertWeights& gate_up, const ExpertWeights& down,
                                         const SwigluParams& p, Tensor& x, const Tensor& w, float eps, bool plus_one,
                                         Tensor& out, Tensor* out_bf16) {
  if (!moe_ || h.dim() != 2 || !moe_takes_fused_path(*moe_, h.size(0), indices, gate_up, p)) {
    Tensor f32 = out;  // an empty out (the bf16 rows alone): f32 rows in scratch for the conversion
    if (!f32.defined()) {
      D0_ASSIGN_OR_RETURN(f32, scratch(x.shape(), DType::f32, "normed rows"));
    }
    D0_RETURN_IF_ERROR(Ops::moe_experts_add_rms_norm(h, indices, weights, gate_up, down, p, x, w, eps, plus_one, f32,
                                                     nullptr));
    return out_bf16 ? convert_f32_to_bf16_cuda(f32, *out_bf16, ctx_->stream()) : Status::success();
  }
  const MoeNormAfter norm{&x, w, eps, plus_one, &out, out_bf16};
  return moe_experts_add_rms_norm_cuda(h, indices, weights, gate_up, down, p, *moe_, *gemms_, norm, ctx_->stream());
}

Status CudaOps::add(Tensor& x, const Tensor& y) { return add_inplace_cuda(x, y, ctx_->stream()); }

}  // namespace day0
