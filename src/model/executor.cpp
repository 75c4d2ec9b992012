// Executor: creation, the blocks of the graph (attention over the paged pool, MoE), solo forward.
#include "model/executor.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <string>

#include "model/executor_util.h"
#include "model/op_plan.h"

namespace day0 {
namespace {

// An optional weight: the manifest name, or an undefined tensor when the spec names none.
const Tensor& optional_weight(const ModelWeights& w, const std::string& name) {
  static const Tensor kNone;
  return name.empty() ? kNone : w.get(name);
}

// The ops' view of an expert matrix: its storage tensors by the format's names (arch/expert_format.h), in the
// storage the ops placed them in.
ExpertWeights expert_weights(const ModelWeights& w, const ExpertMatrix& m, int n_experts, const Ops& ops) {
  ExpertWeights e;
  e.storage = ops.placed_expert_storage(expert_storage_of(m.format));
  const std::vector<ExpertTensor> tensors = expert_tensors(m, n_experts);
  const Tensor first = w.get(tensors[0].name);
  const Tensor second = tensors.size() > 1 ? w.get(tensors[1].name) : Tensor();
  if (is_mxfp4(e.storage)) {
    e.blocks = first;
    e.scales = second;
  } else {
    e.values = first;
    e.row_scales = second;
  }
  e.bias = optional_weight(w, m.bias);
  e.n_experts = n_experts;
  e.out = m.out;
  e.in = m.in;
  return e;
}

}  // namespace

KvLayout kv_layout(const ModelSpec& spec, std::int64_t block_size, DType dtype) {
  KvLayout layout{{}, block_size, dtype};
  for (const auto& L : spec.layers)
    layout.row_widths.push_back(std::int64_t(L.mixer.attention.n_kv_heads) * L.mixer.attention.head_dim);
  return layout;
}

Result<std::unique_ptr<Executor>> Executor::create(const ModelSpec& spec, ModelWeights weights, Ops& ops,
                                                   const ExecutorOptions& options) {
  const std::int64_t max_tokens = options.max_tokens;
  if (max_tokens <= 0 || max_tokens > spec.max_position)
    return make_error("max tokens " + std::to_string(max_tokens) + " must be in [1, " +
                      std::to_string(spec.max_position) + "] (max_position_embeddings)");
  if (options.max_step_tokens <= 0) return make_error("max step tokens must be positive");
  if (options.block_size <= 0 || options.block_size > 4096)
    return make_error("KV block size " + std::to_string(options.block_size) + " must be in [1, 4096]");
  std::unique_ptr<Executor> ex(new Executor(spec, std::move(weights), ops));
  ex->max_step_tokens_ = options.max_step_tokens;
  ex->block_size_ = options.block_size;
  D0_RETURN_IF_ERROR(ops.plan(ops_plan(spec, options.max_step_tokens)));  // workspaces first: the pool fits after
  const KvLayout layout = kv_layout(spec, options.block_size, ops.kv_cache_dtype());
  const std::vector<std::int64_t>& widths = layout.row_widths;
  // Step graphs pad their batches with rows that write one KV block of their own, past the callers' blocks.
  const bool graphs = options.graph_max_batch > 0 && ops.device() != Device::cpu;
  KvPoolRequest request;
  request.max_tokens = max_tokens;
  request.pool_tokens = options.kv_pool_tokens;
  request.pad_blocks = graphs ? 1 : 0;
  request.fit = options.kv_pool_fit;
  request.reserve_bytes = options.kv_pool_reserve_bytes;
  request.fit_max_tokens = options.fit_max_tokens;
  // One clear error here where the pool cannot fit, not the arena's on the first layer that does not.
  D0_ASSIGN_OR_RETURN(const KvPoolSize pool, size_kv_pool(layout, request, ops.free_memory_bytes()));
  if (pool.blocks > std::numeric_limits<BlockId>::max() / options.block_size)
    return make_error("KV pool of " + std::to_string(pool.blocks) + " blocks has too many slots for i32 indices");
  ex->max_tokens_ = pool.max_tokens;
  ex->n_blocks_ = static_cast<std::int32_t>(pool.blocks);
  if (graphs) ex->pad_block_ = static_cast<BlockId>(pool.blocks);
  const std::int64_t pool_blocks = pool.blocks + request.pad_blocks;
  for (size_t i = 0; i < widths.size(); ++i) {
    const Shape shape{widths[i] > 0 ? pool_blocks * options.block_size : 0, widths[i]};
    const DType kv = ops.kv_cache_dtype();
    D0_ASSIGN_OR_RETURN(Tensor k, ops.allocate(shape, kv, "kv cache: " + layer_tap(int(i), "keys")));
    D0_ASSIGN_OR_RETURN(Tensor v, ops.allocate(shape, kv, "kv cache: " + layer_tap(int(i), "values")));
    ex->k_pool_.push_back(std::move(k));
    ex->v_pool_.push_back(std::move(v));
  }
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const std::vector<float> table = rope_inv_freq(spec.layers[i].mixer.attention.rope);
    Tensor host = Tensor::zeros({static_cast<std::int64_t>(table.size())}, DType::f32);
    std::copy(table.begin(), table.end(), host.data<float>());
    D0_ASSIGN_OR_RETURN(Tensor t,
                        ops.allocate(host.shape(), DType::f32, "rope tables: " + layer_tap(int(i), "inv_freq")));
    D0_RETURN_IF_ERROR(ops.copy_from_host(host, t));
    ex->inv_freq_.push_back(std::move(t));
  }
  for (std::int64_t b = 0; b * options.block_size < ex->max_tokens_; ++b)
    ex->solo_table_.push_back(static_cast<BlockId>(b));
  D0_RETURN_IF_ERROR(ex->capture_graphs(options.graph_max_batch));
  return ex;
}

std::size_t Executor::kv_cache_bytes() const {
  std::size_t b = 0;
  for (size_t i = 0; i < k_pool_.size(); ++i) b += k_pool_[i].nbytes() + v_pool_[i].nbytes();
  return b;
}

Status Executor::copy_blocks(std::span<const BlockCopy> copies) {
  for (const BlockCopy& c : copies) {
    if (c.src < 0 || c.src >= n_blocks_ || c.dst < 0 || c.dst >= n_blocks_ || c.n_rows < 0 || c.n_rows > block_size_)
      return make_error("copy blocks: block " + std::to_string(c.src) + " -> " + std::to_string(c.dst) + " (" +
                        std::to_string(c.n_rows) + " rows) is outside the pool of " + std::to_string(n_blocks_));
    for (size_t l = 0; l < k_pool_.size(); ++l) {
      if (k_pool_[l].numel() == 0) continue;
      for (auto* pool : {&k_pool_[l], &v_pool_[l]}) {
        const Tensor src = pool->slice_rows(c.src * block_size_, c.src * block_size_ + c.n_rows);
        Tensor dst = pool->slice_rows(c.dst * block_size_, c.dst * block_size_ + c.n_rows);
        D0_RETURN_IF_ERROR(ops_.copy(src, dst));
      }
    }
  }
  return Status::success();
}

Status Executor::copy_block_range(BlockId src, BlockId dst, std::int32_t n_blocks) {
  const auto outside = [&](BlockId b) { return b < 0 || n_blocks < 0 || std::int64_t(b) + n_blocks > n_blocks_; };
  if (outside(src) || outside(dst) || (src < dst + n_blocks && dst < src + n_blocks))
    return make_error("copy block range: " + std::to_string(n_blocks) + " blocks " + std::to_string(src) + " -> " +
                      std::to_string(dst) + " overlap or fall outside the pool of " + std::to_string(n_blocks_));
  for (size_t l = 0; l < k_pool_.size(); ++l) {
    if (k_pool_[l].numel() == 0) continue;
    for (auto* pool : {&k_pool_[l], &v_pool_[l]}) {
      const Tensor from = pool->slice_rows(std::int64_t(src) * block_size_, std::int64_t(src + n_blocks) * block_size_);
      Tensor to = pool->slice_rows(std::int64_t(dst) * block_size_, std::int64_t(dst + n_blocks) * block_size_);
      D0_RETURN_IF_ERROR(ops_.copy(from, to));
    }
  }
  return Status::success();
}

Status Executor::emit(const TapFn& tap, std::string_view name, const Tensor& value) {
  if (!tap) return Status::success();
  if (value.device() == Device::cpu) {
    tap(name, value);
    return Status::success();
  }
  D0_ASSIGN_OR_RETURN(Tensor host, ops_.download(value));
  tap(name, host);
  return Status::success();
}

Status Executor::token_mixer(int layer, const Tensor& h, const Tensor* h_bf16, const Tensor& positions,
                             const Tensor& slots, const PagedKv& kv, Tensor& out) {
  switch (spec_.layers[layer].mixer.kind) {
    case TokenMixerKind::gqa_attention: return attention_block(layer, h, h_bf16, positions, slots, kv, out);
  }
  return make_error("layer " + std::to_string(layer) + ": token mixer kind not implemented");
}

bool Executor::q_reads_bf16(std::int64_t rows) const {
  for (const LayerSpec& L : spec_.layers)
    if (L.mixer.kind == TokenMixerKind::gqa_attention)
      return ops_.linear_reads_bf16(rows, weights_.get(L.mixer.attention.q_weight));
  return false;
}

std::tuple<const Tensor&, float, bool> Executor::norm_args(const NormSpec& n) const {
  return {weights_.get(n.weight), n.eps, n.kind == NormKind::rms_plus_one};
}

Status Executor::channel_norm(int layer, Tensor& x, const Tensor& y, Tensor& h, Routing& routing) {
  const LayerSpec& L = spec_.layers[layer];
  const auto [w, eps, plus_one] = norm_args(L.channel_norm);
  if (L.channel.kind != ChannelMixerKind::moe) {
    ProfileSpan span(ops_, "norms (with the residual adds)");
    return ops_.add_rms_norm(x, y, w, eps, plus_one, h);
  }
  const MoESpec& m = L.channel.moe;
  const std::int64_t S = h.size(0);
  D0_ASSIGN_OR_RETURN(routing.logits, ops_.scratch({S, m.n_experts}, DType::f32, "router logits"));
  D0_ASSIGN_OR_RETURN(routing.indices, ops_.scratch({S, m.top_k}, DType::i32, "router indices"));
  D0_ASSIGN_OR_RETURN(routing.weights, ops_.scratch({S, m.top_k}, DType::f32, "router weights"));
  ProfileSpan span(ops_, "moe: norm, router and top-k");
  return ops_.add_rms_norm_router(x, y, w, eps, plus_one, h, weights_.get(m.router_weight),
                                  optional_weight(weights_, m.router_bias), m.top_k, routing.logits, routing.indices,
                                  routing.weights);
}

Status Executor::channel_mixer(int layer, const Tensor& h, const Routing& routing, Tensor& out, const TapFn& tap) {
  switch (spec_.layers[layer].channel.kind) {
    case ChannelMixerKind::moe:
      return moe_block(layer, h, routing, out, tap);
  }
  return make_error("layer " + std::to_string(layer) + ": channel mixer kind not implemented");
}

Status Executor::attention_block(int layer, const Tensor& h, const Tensor* h_bf16, const Tensor& positions,
                                 const Tensor& slots, const PagedKv& kv, Tensor& out) {
  const AttentionSpec& a = spec_.layers[layer].mixer.attention;
  const std::int64_t S = h.size(0), q_width = std::int64_t(a.n_heads) * a.head_dim;
  const std::int64_t kv_width = std::int64_t(a.n_kv_heads) * a.head_dim;
  D0_ASSIGN_OR_RETURN(Tensor q, ops_.scratch({S, q_width}, DType::f32, "q"));
  D0_ASSIGN_OR_RETURN(Tensor k, ops_.scratch({S, kv_width}, DType::f32, "k"));
  D0_ASSIGN_OR_RETURN(Tensor v, ops_.scratch({S, kv_width}, DType::f32, "v"));
  const std::vector<LinearTarget> qkv{{weights_.get(a.q_weight), optional_weight(weights_, a.q_bias), q},
                                      {weights_.get(a.k_weight), optional_weight(weights_, a.k_bias), k},
                                      {weights_.get(a.v_weight), optional_weight(weights_, a.v_bias), v}};
  const AttentionParams params{a.n_heads, a.n_kv_heads, a.head_dim, a.sliding_window, a.scale};
  D0_ASSIGN_OR_RETURN(Tensor mixed, ops_.scratch({S, q_width}, DType::f32, "attention out"));
  const Tensor sinks = a.sinks ? weights_.get(a.sinks_weight) : Tensor();
  const LinearTarget o{weights_.get(a.o_weight), optional_weight(weights_, a.o_bias), out};
  if (a.rope.kind != RopeKind::none) {
    const RopeKvArgs rope{a.n_heads, a.n_kv_heads,     a.head_dim,
                          positions, inv_freq_[layer], static_cast<float>(a.rope.attention_factor),
                          slots,     k_pool_[layer],   v_pool_[layer]};
    // Unprofiled, the whole block in one op: the backend may rotate q inside the attention kernel.
    if (!ops_.profiling())
      return ops_.linears_rope_attention_linear(h, qkv, rope, h_bf16, kv, sinks, params, mixed, o);
    ProfileSpan span(ops_, "attention: q/k/v, rope and kv write");
    D0_RETURN_IF_ERROR(ops_.linears_rope_kv_write(h, qkv, rope, h_bf16));
  } else {
    {
      ProfileSpan span(ops_, "attention: q/k/v projections");
      D0_RETURN_IF_ERROR(ops_.linears(h, qkv));
    }
    ProfileSpan span(ops_, "attention: kv write");
    D0_RETURN_IF_ERROR(ops_.kv_write(k, v, slots, k_pool_[layer], v_pool_[layer]));
  }
  if (!ops_.profiling())  // the backend may hand the output to the projection without a conversion between
    return ops_.paged_attention_linear(q, k_pool_[layer], v_pool_[layer], positions, kv, sinks, params, mixed, o);
  {  // profiled: each part timed alone
    ProfileSpan span(ops_, a.sliding_window > 0 ? "attention: kernel (sliding window)" : "attention: kernel (full)");
    D0_RETURN_IF_ERROR(ops_.paged_attention(q, k_pool_[layer], v_pool_[layer], positions, kv, sinks, params, mixed));
  }
  ProfileSpan span(ops_, "attention: o projection");
  return ops_.linear(mixed, o.w, o.bias, out);
}

Status Executor::moe_block(int layer, const Tensor& h, const Routing& routing, Tensor& out, const TapFn& tap,
                           const NormAfter* after) {
  const MoESpec& m = spec_.layers[layer].channel.moe;
  const Tensor &indices = routing.indices, &route = routing.weights;
  D0_RETURN_IF_ERROR(emit(tap, layer_tap(layer, "router_indices"), indices));
  D0_RETURN_IF_ERROR(emit(tap, layer_tap(layer, "router_weights"), route));
  const SwigluParams swiglu{m.swiglu_alpha, m.swiglu_limit, m.gate_up_interleaved};
  ProfileSpan span(ops_, "moe: experts");  // with `after`, the residual add and next norm too
  const ExpertWeights gate_up = expert_weights(weights_, m.gate_up, m.n_experts, ops_);
  const ExpertWeights down = expert_weights(weights_, m.down, m.n_experts, ops_);
  if (after)
    return ops_.moe_experts_add_rms_norm(h, indices, route, gate_up, down, swiglu, *after->x, *after->w, after->eps,
                                         after->plus_one, *after->normed, after->normed_bf16);
  return ops_.moe_experts(h, indices, route, gate_up, down, swiglu, out);
}

Result<Tensor> Executor::forward(std::span<const std::int32_t> tokens, bool all_logits, const TapFn& tap,
                                 StepOutput output) {
  const std::int64_t S = static_cast<std::int64_t>(tokens.size());
  if (S == 0) return make_error("forward: no tokens");
  if (solo_length_ + S > max_tokens_)
    return make_error("forward: " + std::to_string(solo_length_ + S) + " tokens exceed the sequence limit of " +
                      std::to_string(max_tokens_));
  // Chunked prefill: each chunk attends to the K/V the previous ones wrote.
  std::vector<Tensor> parts;
  const std::int64_t start = solo_length_;
  for (std::int64_t begin = 0; begin < S; begin += max_step_tokens_) {
    const std::int64_t n = std::min(max_step_tokens_, S - begin);
    const bool last = begin + n == S;
    SequenceStep seq{tokens.subspan(begin, n), start + begin, solo_table_,
                     all_logits ? SequenceStep::Logits::all
                                : last ? SequenceStep::Logits::last : SequenceStep::Logits::none};
    auto logits = step(std::span(&seq, 1), tap, output);
    if (!logits.ok()) return logits.error();  // solo_length_ untouched: the failed tokens are not part of the sequence
    if (seq.logits != SequenceStep::Logits::none) parts.push_back(std::move(*logits));
  }
  solo_length_ = start + S;
  if (parts.size() == 1) return parts.front();
  const Tensor& first = parts.front();  // logits [n, V] f32 or picks [n, 2] i32
  Tensor joined = Tensor::zeros({S, first.size(1)}, first.dtype());
  std::size_t at = 0;
  for (const Tensor& p : parts) {
    std::memcpy(static_cast<char*>(joined.raw()) + at, p.raw(), p.nbytes());
    at += p.nbytes();
  }
  return joined;
}

}  // namespace day0
