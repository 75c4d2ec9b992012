// The operator set the executor calls, one virtual interface per backend.
// Activations are f32 [tokens, features] row-major; weights may be bf16/f16/f32 (ops upcast on read).
// Every op validates shapes and returns a Status; none allocates its output (the caller owns it).
// Memory is the backend's too: weights, caches and activations are placed and allocated through it, so the
// executor never knows which device it runs on.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "ops/expert_weights.h"
#include "ops/logit_edits.h"
#include "ops/logprob_record.h"
#include "ops/op_kind.h"
#include "ops/op_profile.h"
#include "ops/rope.h"
#include "ops/token_draw.h"

namespace day0 {

struct AttentionParams {
  int n_heads = 0, n_kv_heads = 0, head_dim = 0;
  int sliding_window = 0;  // 0 = full causal
  float scale = 1.f;
};

struct SwigluParams {
  float alpha = 1.702f;
  float limit = 7.0f;
  bool interleaved = true;  // gate_up column 2j gate_j, 2j+1 up_j; else [gate | up]
};

// How a GPU backend computes routed experts. MXFP4 experts are converted online (only the routed ones of the
// current layer, into one reused workspace); experts stored as bf16 / fp8 by `day0 convert` are used in place and
// must match (bf16 storage with bf16 compute, fp8_rowwise with fp8; a mismatch is an error at plan()).
// bf16: weights decoded exactly to bf16, x and the SwiGLU output rounded to bf16. fp8: weights converted to E4M3
// with a power-of-two scale per output row (exact unless a row's block exponents span more than 14 binades,
// counted in MoeWorkspace::fp8_inexact), x and the SwiGLU output quantised to E4M3 per token (relative rounding
// up to 2^-4 per element).
enum class ExpertCompute { bf16, fp8 };

// Paged KV: per layer one K and one V pool [n_slots, kv_heads * head_dim]. Position t of sequence b lives in
// slot block_tables[b, t / block_size] * block_size + t % block_size (a negative block id: no slot).
struct PagedKv {
  Tensor block_tables;  // i32 [B, max_blocks]
  Tensor q_seq;         // i32 [S]: the sequence (row of block_tables) each query row belongs to
  std::int64_t block_size = 0;
};

// What Ops::place_weights needs to know of the checkpoint's tensors besides their names.
struct WeightRoles {
  // The routed experts' storage (MXFP4 blocks and scales, bf16 / fp8 values and row scales): kept in their stored
  // dtype everywhere and reported as experts.
  std::set<std::string> experts;
  // Groups of tensors a backend places back to back in the order given (an attention block's q, k and v weights;
  // their biases), so that one matmul may read a group as one matrix (Tensor::adjacent_rows).
  std::vector<std::vector<std::string>> adjacent;
};

// One output of Ops::linears: out = x W^T + bias (bias optional: an undefined Tensor).
struct LinearTarget {
  Tensor w, bias, out;
};

// Ops::rope_kv_write's operands besides q, k and v (Ops::linears_rope_kv_write).
struct RopeKvArgs {
  int n_heads = 0, n_kv_heads = 0, head_dim = 0;
  Tensor positions, inv_freq;
  float attention_factor = 1.f;
  Tensor slots, k_pool, v_pool;
};

// What a backend reserves at start-up: the largest forward step and the largest MoE layer it will run.
struct OpsPlan {
  std::int64_t max_step_tokens = 0;
  int n_experts = 0, top_k = 0;
  std::int64_t hidden = 0, intermediate = 0;  // 0 experts: no MoE layer
  ExpertStorage expert_storage = ExpertStorage::mxfp4;  // as the checkpoint holds them (every layer alike)
};

// One line of the memory report: "weights", "moe workspace", "kv cache", "activations (peak)", ...
struct MemoryUse {
  std::string what;
  std::uint64_t bytes = 0;
  std::string note;
};

// A point in a backend's queued work (Ops::queue_fence).
struct QueuedFence {
  std::uint64_t serial = 0;
};

// A position in the per-step scratch memory; release rewinds to it.
struct ScratchMark {
  std::size_t offset = 0;
};

using NamedTensors = std::map<std::string, Tensor>;
// (bytes done, bytes total); called from one thread at a time, not necessarily the caller's.
using ProgressFn = std::function<void(std::uint64_t done, std::uint64_t total)>;

class Ops {
 public:
  virtual ~Ops() = default;
  virtual std::string_view backend() const = 0;
  virtual OpEntry entry(OpKind kind) const = 0;

  // ---- memory
  virtual Device device() const = 0;
  // The element type of the KV pools the executor allocates (kv_write, rope_kv_write and paged_attention take it).
  virtual DType kv_cache_dtype() const { return DType::f32; }
  // Reserves what `plan` needs (workspaces) once; call before the first op.
  virtual Status plan(const OpsPlan& plan) = 0;
  // The checkpoint's tensors (host, usually mmap views) made usable by this backend's ops: the CPU uses them
  // in place; CUDA uploads them, converting dense matrices to the dtype its matmuls take, as `roles` says.
  virtual Result<NamedTensors> place_weights(const NamedTensors& host, const WeightRoles& roles,
                                             const ProgressFn& progress) = 0;
  // The storage place_weights gave experts stored as `stored`: the same, or MXFP4 blocks reordered
  // (ExpertStorage::mxfp4_tiled: BackendOptions::mxfp4_order).
  virtual ExpertStorage placed_expert_storage(ExpertStorage stored) const { return stored; }
  // Backend memory that lives until the Ops does (caches, tables). Contents undefined.
  virtual Result<Tensor> allocate(const Shape& shape, DType dtype, const std::string& what) = 0;
  // Per-step memory, valid until scratch_release of an earlier mark. Contents undefined.
  virtual Result<Tensor> scratch(const Shape& shape, DType dtype, const std::string& what) = 0;
  virtual ScratchMark scratch_mark() const = 0;
  virtual Status scratch_release(ScratchMark mark) = 0;
  // A scratch copy of a host tensor in backend memory (the host tensor itself on the CPU).
  virtual Result<Tensor> upload(const Tensor& host, const std::string& what) = 0;
  // dst (backend memory) = host, same shape and dtype; for tables allocated once.
  virtual Status copy_from_host(const Tensor& host, Tensor& dst) = 0;
  // copy_from_host of the first `cols` columns of each row of 2-D tensors of one shape (the rest of dst as it was):
  // the used part of wide tables. Row by row here; a backend may do it in one transfer.
  virtual Status copy_columns_from_host(const Tensor& host, Tensor& dst, std::int64_t cols) {
    if (host.dim() != 2 || host.shape() != dst.shape() || cols < 0 || cols > host.size(1))
      return make_error("copy_columns_from_host: 2-D tensors of one shape and at most their columns, got " +
                        shape_to_string(host.shape()) + ", " + shape_to_string(dst.shape()) + " and " +
                        std::to_string(cols) + " columns");
    const std::int64_t W = host.size(1);
    for (std::int64_t r = 0; r < host.size(0); ++r) {
      Tensor to = dst.slice_rows(r, r + 1).view({W}).slice_rows(0, cols);
      D0_RETURN_IF_ERROR(copy_from_host(host.slice_rows(r, r + 1).view({W}).slice_rows(0, cols), to));
    }
    return Status::success();
  }
  // A host copy of a backend tensor; waits for the work that produces it.
  virtual Result<Tensor> download(const Tensor& t) = 0;
  // The host tensor a copy of `t` lands in, the copy queued behind the work queued so far and not waited for:
  // read it only after the next synchronize(), so that a step's downloads and its fault check share one wait.
  virtual Result<Tensor> start_download(const Tensor& t) = 0;
  // dst = src, same shape and dtype, both in backend memory (dst may be a row slice).
  virtual Status copy(const Tensor& src, Tensor& dst) = 0;
  // Waits for queued work; asynchronous faults and device-side input errors surface here.
  virtual Status synchronize() = 0;
  // A fence behind the work queued so far. wait_fence waits for that work alone, not what was queued after it, and
  // reports its faults as synchronize() does, so a caller can queue the next step before it waits for this one. The
  // default waits for everything: right for backends whose ops finish before they return (the CPU).
  virtual Result<QueuedFence> queue_fence() { return QueuedFence{}; }
  virtual Status wait_fence(QueuedFence fence) {
    (void)fence;
    return synchronize();
  }
  // What this backend holds, by use, for the memory report.
  virtual std::vector<MemoryUse> memory_report() const = 0;
  // Bytes `allocate` can still hand out (the CUDA arena's free bytes); nullopt: bounded by the host only.
  virtual std::optional<std::size_t> free_memory_bytes() const { return std::nullopt; }

  // ---- profiling (ops/op_profile.h): while enabled, each begin/end pair times the work enqueued between them
  // under `span` (spans may nest); profile_report waits for the device and returns the totals so far. The
  // default times on the host clock, right for backends whose ops finish before they return (the CPU).
  void enable_profiling(bool on) { profiling_ = on; }
  bool profiling() const { return profiling_; }
  virtual void profile_begin(std::string_view span);
  virtual void profile_end();
  virtual Result<std::vector<ProfileEntry>> profile_report();

  // ---- step graphs
  // capture_graph records the work `body` enqueues (without running it) and returns a handle; replay_graph runs
  // that work again, on the same memory, with no scratch live and persistent memory as it was at capture. A
  // backend without graphs (the CPU) refuses, and capture fails where the body waits for the device (a host
  // round trip): callers then run the body directly.
  virtual Result<int> capture_graph(const std::function<Status()>& body) {
    (void)body;
    return make_error(std::string(backend()) + ": no step graphs on this backend");
  }
  virtual Status replay_graph(int graph) {
    (void)graph;
    return make_error(std::string(backend()) + ": no step graphs on this backend");
  }

  // out[s] = table[ids[s]]; ids i32 [S]; an id outside the table is an error.
  virtual Status embedding(const Tensor& table, const Tensor& ids, Tensor& out) = 0;
  // out = w * x * rsqrt(mean(x^2) + eps)   (plus_one: (1 + w) * ...)
  virtual Status rms_norm(const Tensor& x, const Tensor& w, float eps, bool plus_one, Tensor& out) = 0;
  // out = x W^T + b; W [out, in]; bias optional (undefined Tensor).
  virtual Status linear(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& out) = 0;
  // linear for each target, all of one input (q, k and v): a backend may run them as one kernel.
  virtual Status linears(const Tensor& x, const std::vector<LinearTarget>& targets) {
    for (const LinearTarget& t : targets) {
      Tensor out = t.out;
      D0_RETURN_IF_ERROR(linear(x, t.w, t.bias, out));
    }
    return Status::success();
  }
  // In place on x [S, n_heads * head_dim]: half-split rotation of the first rotary_dim lanes per head;
  // inv_freq f32 [rotary_dim / 2] in backend memory (see rope_inv_freq).
  virtual Status rope(Tensor& x, int n_heads, int head_dim, const Tensor& positions, const Tensor& inv_freq,
                      float attention_factor) = 0;
  // q [S, nH*d] at absolute positions q_pos [S] over keys/values [T, kvH*d] at positions 0..T-1;
  // causal, optional sliding window, optional per-head sink logits [nH]. out [S, nH*d].
  virtual Status attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_pos,
                           const Tensor& sinks, const AttentionParams& p, Tensor& out) = 0;
  // Rows k, v [S, w] into slots (i32 [S]) of the pools k_pool, v_pool [n_slots, w] (vLLM's reshape_and_cache).
  virtual Status kv_write(const Tensor& k, const Tensor& v, const Tensor& slots, Tensor& k_pool, Tensor& v_pool) = 0;
  // rope on q and on k, then kv_write of k and v: a backend may run them as one kernel (decode).
  virtual Status rope_kv_write(Tensor& q, int n_heads, Tensor& k, int n_kv_heads, const Tensor& v, int head_dim,
                               const Tensor& positions, const Tensor& inv_freq, float attention_factor,
                               const Tensor& slots, Tensor& k_pool, Tensor& v_pool) {
    D0_RETURN_IF_ERROR(rope(q, n_heads, head_dim, positions, inv_freq, attention_factor));
    D0_RETURN_IF_ERROR(rope(k, n_kv_heads, head_dim, positions, inv_freq, attention_factor));
    return kv_write(k, v, slots, k_pool, v_pool);
  }
  // Whether linears over `rows` rows take their input as bf16 on every target (GEMMs): then the op that makes the
  // input may hand over a bf16 copy of it too (moe_experts_add_rms_norm's out_bf16 to linears_rope_kv_write's
  // x_bf16), and no conversion runs between. The CPU backend: never.
  virtual bool linear_inputs_bf16(std::int64_t /*rows*/) const { return false; }
  // Whether linears over `rows` rows send weight w to a GEMM on bf16 rows: then a bf16 copy of the input handed over
  // (x_bf16) saves that GEMM its conversion, though other targets may still read the f32 rows. CPU: never.
  virtual bool linear_reads_bf16(std::int64_t /*rows*/, const Tensor& /*w*/) const { return false; }
  // linears(x, qkv) on the three targets q, k, v, then rope_kv_write of their outputs: a backend may run them as
  // one kernel (decode). x_bf16 (or null): x rounded to bf16, given where linear_reads_bf16 says so.
  virtual Status linears_rope_kv_write(const Tensor& x, const std::vector<LinearTarget>& qkv, const RopeKvArgs& r,
                                       const Tensor* /*x_bf16*/) {
    if (qkv.size() != 3) return make_error("linears_rope_kv_write: takes the three targets q, k and v");
    D0_RETURN_IF_ERROR(linears(x, qkv));
    Tensor q = qkv[0].out, k = qkv[1].out, k_pool = r.k_pool, v_pool = r.v_pool;  // handles: their storage
    return rope_kv_write(q, r.n_heads, k, r.n_kv_heads, qkv[2].out, r.head_dim, r.positions, r.inv_freq,
                         r.attention_factor, r.slots, k_pool, v_pool);
  }
  // As attention, over paged keys: query s sees positions [0, q_pos[s]] (window and sinks as above) of its
  // sequence kv.q_seq[s]; queries of many sequences of different lengths in one call.
  virtual Status paged_attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool, const Tensor& q_pos,
                                 const PagedKv& kv, const Tensor& sinks, const AttentionParams& p, Tensor& out) = 0;
  // paged_attention into `mixed`, then linear(mixed, o.w, o.bias, o.out): a backend may hand the attention output
  // to the projection in its GEMM's input precision, and then leave `mixed` (scratch) unwritten.
  virtual Status paged_attention_linear(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool,
                                        const Tensor& q_pos, const PagedKv& kv, const Tensor& sinks,
                                        const AttentionParams& p, Tensor& mixed, const LinearTarget& o) {
    D0_RETURN_IF_ERROR(paged_attention(q, k_pool, v_pool, q_pos, kv, sinks, p, mixed));
    Tensor out = o.out;  // a handle: linear writes the target's storage
    return linear(mixed, o.w, o.bias, out);
  }
  // An attention block from its input to its output: linears_rope_kv_write(x, qkv, r, x_bf16), then
  // paged_attention_linear of q (qkv[0].out) at r.positions over r's pools. A backend may leave q (scratch, read by
  // nothing after) unrotated and rotate it in the attention kernel as it loads it, the same bits.
  virtual Status linears_rope_attention_linear(const Tensor& x, const std::vector<LinearTarget>& qkv,
                                               const RopeKvArgs& r, const Tensor* x_bf16, const PagedKv& kv,
                                               const Tensor& sinks, const AttentionParams& p, Tensor& mixed,
                                               const LinearTarget& o) {
    D0_RETURN_IF_ERROR(linears_rope_kv_write(x, qkv, r, x_bf16));
    return paged_attention_linear(qkv[0].out, r.k_pool, r.v_pool, r.positions, kv, sinks, p, mixed, o);
  }
  // Top-k over logits [S, E] (descending, lower index first on ties), softmax over the k selected.
  virtual Status router_topk_softmax(const Tensor& logits, int k, Tensor& indices, Tensor& weights) = 0;
  // The MoE router: logits = linear(x, w, bias), then router_topk_softmax(logits, k, indices, weights); a backend
  // may run both in one kernel (logits are written either way).
  virtual Status router(const Tensor& x, const Tensor& w, const Tensor& bias, int k, Tensor& logits, Tensor& indices,
                        Tensor& weights) {
    D0_RETURN_IF_ERROR(linear(x, w, bias, logits));
    return router_topk_softmax(logits, k, indices, weights);
  }
  // out [n, E.out] = x [n, in] W_e^T + b_e for one expert e, in the precision its storage gives the backend.
  virtual Status expert_matmul(const Tensor& x, const ExpertWeights& w, int expert, Tensor& out) = 0;
  // h [n, I] from gate_up [n, 2I]: (up + 1) * g * sigmoid(alpha g), g = min(gate, limit), up clamped.
  virtual Status swiglu_clamped(const Tensor& gate_up, const SwigluParams& p, Tensor& out) = 0;
  // Routed experts: out[s] = sum_j weights[s,j] * down_e(swiglu(gate_up_e(x[s]))), e = indices[s,j].
  virtual Status moe_experts(const Tensor& x, const Tensor& indices, const Tensor& weights,
                             const ExpertWeights& gate_up, const ExpertWeights& down, const SwigluParams& p,
                             Tensor& out) = 0;
  // moe_experts on h, then add_rms_norm(x, its output, w, eps, plus_one, out): the MoE block's residual add and the
  // next norm, which a backend may run with the experts' weighted sum inside the norm's kernel. out may be h.
  // out_bf16 (or null; bf16 [S, H]): out rounded to bf16 as well, asked for only where linear_reads_bf16 says so;
  // with it, out may be an empty Tensor where nothing will read the f32 rows (linear_inputs_bf16: the next layer's
  // GEMMs read the copy).
  virtual Status moe_experts_add_rms_norm(const Tensor& h, const Tensor& indices, const Tensor& weights,
                                          const ExpertWeights& gate_up, const ExpertWeights& down,
                                          const SwigluParams& p, Tensor& x, const Tensor& w, float eps, bool plus_one,
                                          Tensor& out, Tensor* out_bf16) {
    if (out_bf16 || !out.defined())
      return make_error("moe_experts_add_rms_norm: this backend hands over no bf16 copies and needs out");
    D0_ASSIGN_OR_RETURN(Tensor y, scratch(x.shape(), DType::f32, "moe out"));
    D0_RETURN_IF_ERROR(moe_experts(h, indices, weights, gate_up, down, p, y));
    return add_rms_norm(x, y, w, eps, plus_one, out);
  }
  // add_rms_norm(x, y, w, eps, plus_one, out), then router(out, router_w, router_bias, k, logits, indices, weights):
  // a MoE block's norm and router, which a backend may run in one kernel.
  virtual Status add_rms_norm_router(Tensor& x, const Tensor& y, const Tensor& w, float eps, bool plus_one, Tensor& out,
                                     const Tensor& router_w, const Tensor& router_bias, int k, Tensor& logits,
                                     Tensor& indices, Tensor& weights) {
    D0_RETURN_IF_ERROR(add_rms_norm(x, y, w, eps, plus_one, out));
    return router(out, router_w, router_bias, k, logits, indices, weights);
  }
  // x += y
  virtual Status add(Tensor& x, const Tensor& y) = 0;
  // x += y, then out = rms_norm(x): the residual stream update fused with the next block's norm.
  virtual Status add_rms_norm(Tensor& x, const Tensor& y, const Tensor& w, float eps, bool plus_one, Tensor& out) = 0;
  // logits [S, V] = x [S, H] W^T
  virtual Status lm_head(const Tensor& x, const Tensor& w, Tensor& out) = 0;
  // Greedy decoding's pick from each row of logits f32 [R, V], with the host sampler's checks (engine/sampler.cpp),
  // so that a greedy step moves R x 2 ids instead of R x V logits: out i32 [R, 2], out[r][0] the lowest id of the
  // row's largest logit, out[r][1] -1 where the row is usable, else the lowest id of a NaN or +inf logit, or -2 when
  // every logit is -inf (out[r][0] is then meaningless, but a valid id). tokens (or null): i32 [R], out[r][0] again
  // and contiguous, for the next step's token ids on the device.
  virtual Status greedy_tokens(const Tensor& logits, Tensor& out, Tensor* tokens) = 0;
  // Before greedy_tokens: each edited row of logits f32 [R, V] takes its edits (logit_edits.h: a sequence's
  // logit_bias and penalties, the host sampler's arithmetic bit for bit), so that a penalised row's pick (its argmax,
  // or draw_tokens' draw) is made on the device too. tokens (i32 [R], or null where no row has a pending token):
  // each pending row's token, as greedy_tokens' tokens output left it in the step before.
  virtual Status edit_logits(Tensor& logits, const LogitEdits& edits, const Tensor* tokens) = 0;
  // After greedy_tokens on the same logits, out and tokens: each draw's row takes the token drawn from
  // softmax(logits * inv_t) with its uniform number (token_draw.h: the host sampler's draw, bit for bit) in place of
  // the argmax, where greedy_tokens found the row usable (out[row][1] == -1). A temperature-only sampled row then
  // moves 2 ids, not V logits, and its next token can stay on the device.
  virtual Status draw_tokens(const Tensor& logits, const std::vector<TokenDraw>& draws, Tensor& out,
                             Tensor* tokens) = 0;
  // After greedy_tokens and draw_tokens on the same logits and out (the picks), before any edit of a requested row:
  // each request's record of its row's raw logprobs (logprob_record.h), records i32 [requests, kLogprobRecordWords]
  // in the requests' order, so a row that reports logprobs moves a record, not V logits. A row greedy_tokens found
  // unusable keeps its record as it was (its pick fails on the host).
  virtual Status row_logprobs(const Tensor& logits, const std::vector<LogprobRequest>& requests, const Tensor& out,
                              Tensor& records) = 0;

 protected:
  bool profiling_ = false;

 private:
  struct OpenSpan {
    std::string span;
    std::chrono::steady_clock::time_point start;
  };
  std::vector<OpenSpan> host_open_;
  ProfileTotals host_totals_;
};

}  // namespace day0
