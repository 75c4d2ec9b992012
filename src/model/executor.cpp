// Executor: the block graph of a ModelSpec, one sequence at a time, on backend-allocated memory.
#include "model/executor.h"

#include "model/op_plan.h"

#include <algorithm>
#include <string>
#include <tuple>

namespace day0 {
namespace {

std::vector<std::int64_t> kv_row_widths(const ModelSpec& spec) {
  std::vector<std::int64_t> widths;
  for (const auto& L : spec.layers)
    widths.push_back(std::int64_t(L.mixer.attention.n_kv_heads) * L.mixer.attention.head_dim);
  return widths;
}

std::string layer_tap(int layer, const char* what) { return "layers." + std::to_string(layer) + "." + what; }

// An optional weight: the manifest name, or an undefined tensor when the spec names none.
const Tensor& optional_weight(const ModelWeights& w, const std::string& name) {
  static const Tensor kNone;
  return name.empty() ? kNone : w.get(name);
}

Mxfp4Experts mxfp4_experts(const ModelWeights& w, const ExpertMatrix& m, int n_experts) {
  return Mxfp4Experts{w.get(m.name + "_blocks"), w.get(m.name + "_scales"), optional_weight(w, m.bias), n_experts,
                      m.out, m.in};
}

// Rewinds the backend's per-step scratch however the step ends.
class ScratchScope {
 public:
  explicit ScratchScope(Ops& ops) : ops_(ops), mark_(ops.scratch_mark()) {}
  ~ScratchScope() { (void)ops_.scratch_release(mark_); }
  ScratchScope(const ScratchScope&) = delete;
  ScratchScope& operator=(const ScratchScope&) = delete;

 private:
  Ops& ops_;
  ScratchMark mark_;
};

}  // namespace

Executor::Executor(const ModelSpec& spec, ModelWeights weights, Ops& ops, ContiguousKvCache cache,
                   std::vector<Tensor> inv_freq, std::int64_t max_step)
    : spec_(spec),
      weights_(std::move(weights)),
      ops_(ops),
      cache_(std::move(cache)),
      max_step_tokens_(max_step),
      inv_freq_(std::move(inv_freq)) {}

Result<std::unique_ptr<Executor>> Executor::create(const ModelSpec& spec, ModelWeights weights, Ops& ops,
                                                   const ExecutorOptions& options) {
  const std::int64_t max_tokens = options.max_tokens;
  if (max_tokens <= 0 || max_tokens > spec.max_position)
    return make_error("max tokens " + std::to_string(max_tokens) + " must be in [1, " +
                      std::to_string(spec.max_position) + "] (max_position_embeddings)");
  if (options.max_step_tokens <= 0) return make_error("max step tokens must be positive");
  const std::int64_t max_step = std::min(options.max_step_tokens, max_tokens);
  D0_RETURN_IF_ERROR(ops.plan(ops_plan(spec, max_step)));
  std::vector<Tensor> keys, values;
  const std::vector<std::int64_t> widths = kv_row_widths(spec);
  for (size_t i = 0; i < widths.size(); ++i) {
    const Shape shape{widths[i] > 0 ? max_tokens : 0, widths[i]};
    D0_ASSIGN_OR_RETURN(Tensor k, ops.allocate(shape, DType::f32, "kv cache: " + layer_tap(int(i), "keys")));
    D0_ASSIGN_OR_RETURN(Tensor v, ops.allocate(shape, DType::f32, "kv cache: " + layer_tap(int(i), "values")));
    keys.push_back(std::move(k));
    values.push_back(std::move(v));
  }
  ContiguousKvCache cache(std::move(keys), std::move(values), max_tokens);
  std::vector<Tensor> inv_freq;
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const std::vector<float> table = rope_inv_freq(spec.layers[i].mixer.attention.rope);
    Tensor host = Tensor::zeros({static_cast<std::int64_t>(table.size())}, DType::f32);
    std::copy(table.begin(), table.end(), host.data<float>());
    D0_ASSIGN_OR_RETURN(Tensor t, ops.allocate(host.shape(), DType::f32, "rope tables: " + layer_tap(int(i), "inv_freq")));
    D0_RETURN_IF_ERROR(ops.copy_from_host(host, t));
    inv_freq.push_back(std::move(t));
  }
  return std::unique_ptr<Executor>(
      new Executor(spec, std::move(weights), ops, std::move(cache), std::move(inv_freq), max_step));
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

Status Executor::token_mixer(int layer, const Tensor& h, const Tensor& positions, Tensor& out) {
  switch (spec_.layers[layer].mixer.kind) {
    case TokenMixerKind::gqa_attention: return attention_block(layer, h, positions, out);
  }
  return make_error("layer " + std::to_string(layer) + ": token mixer kind not implemented");
}

Status Executor::channel_mixer(int layer, const Tensor& h, Tensor& out, const TapFn& tap) {
  switch (spec_.layers[layer].channel.kind) {
    case ChannelMixerKind::moe: return moe_block(layer, h, out, tap);
  }
  return make_error("layer " + std::to_string(layer) + ": channel mixer kind not implemented");
}

Status Executor::attention_block(int layer, const Tensor& h, const Tensor& positions, Tensor& out) {
  const AttentionSpec& a = spec_.layers[layer].mixer.attention;
  const std::int64_t S = h.size(0), q_width = std::int64_t(a.n_heads) * a.head_dim;
  const std::int64_t kv_width = std::int64_t(a.n_kv_heads) * a.head_dim;
  D0_ASSIGN_OR_RETURN(Tensor q, ops_.scratch({S, q_width}, DType::f32, "q"));
  D0_ASSIGN_OR_RETURN(Tensor k, ops_.scratch({S, kv_width}, DType::f32, "k"));
  D0_ASSIGN_OR_RETURN(Tensor v, ops_.scratch({S, kv_width}, DType::f32, "v"));
  D0_RETURN_IF_ERROR(ops_.linear(h, weights_.get(a.q_weight), optional_weight(weights_, a.q_bias), q));
  D0_RETURN_IF_ERROR(ops_.linear(h, weights_.get(a.k_weight), optional_weight(weights_, a.k_bias), k));
  D0_RETURN_IF_ERROR(ops_.linear(h, weights_.get(a.v_weight), optional_weight(weights_, a.v_bias), v));
  if (a.rope.kind != RopeKind::none) {
    const float factor = static_cast<float>(a.rope.attention_factor);
    D0_RETURN_IF_ERROR(ops_.rope(q, a.n_heads, a.head_dim, positions, inv_freq_[layer], factor));
    D0_RETURN_IF_ERROR(ops_.rope(k, a.n_kv_heads, a.head_dim, positions, inv_freq_[layer], factor));
  }
  D0_ASSIGN_OR_RETURN(auto slots, cache_.slots(layer, S));
  D0_RETURN_IF_ERROR(ops_.copy(k, slots.first));
  D0_RETURN_IF_ERROR(ops_.copy(v, slots.second));
  const std::int64_t T = cache_.length() + S;
  const AttentionParams params{a.n_heads, a.n_kv_heads, a.head_dim, a.sliding_window, a.scale};
  D0_ASSIGN_OR_RETURN(Tensor mixed, ops_.scratch({S, q_width}, DType::f32, "attention out"));
  D0_RETURN_IF_ERROR(ops_.attention(q, cache_.keys(layer, T), cache_.values(layer, T), positions,
                                    a.sinks ? weights_.get(a.sinks_weight) : Tensor(), params, mixed));
  return ops_.linear(mixed, weights_.get(a.o_weight), optional_weight(weights_, a.o_bias), out);
}

Status Executor::moe_block(int layer, const Tensor& h, Tensor& out, const TapFn& tap) {
  const MoESpec& m = spec_.layers[layer].channel.moe;
  const std::int64_t S = h.size(0);
  D0_ASSIGN_OR_RETURN(Tensor router_logits, ops_.scratch({S, m.n_experts}, DType::f32, "router logits"));
  D0_RETURN_IF_ERROR(ops_.linear(h, weights_.get(m.router_weight), optional_weight(weights_, m.router_bias),
                                 router_logits));
  D0_ASSIGN_OR_RETURN(Tensor indices, ops_.scratch({S, m.top_k}, DType::i32, "router indices"));
  D0_ASSIGN_OR_RETURN(Tensor route, ops_.scratch({S, m.top_k}, DType::f32, "router weights"));
  D0_RETURN_IF_ERROR(ops_.router_topk_softmax(router_logits, m.top_k, indices, route));
  D0_RETURN_IF_ERROR(emit(tap, layer_tap(layer, "router_indices"), indices));
  D0_RETURN_IF_ERROR(emit(tap, layer_tap(layer, "router_weights"), route));
  const SwigluParams swiglu{m.swiglu_alpha, m.swiglu_limit, m.gate_up_interleaved};
  return ops_.moe_experts(h, indices, route, mxfp4_experts(weights_, m.gate_up, m.n_experts),
                          mxfp4_experts(weights_, m.down, m.n_experts), swiglu, out);
}

Result<Tensor> Executor::forward(std::span<const std::int32_t> tokens, bool all_logits, const TapFn& tap) {
  const std::int64_t S = static_cast<std::int64_t>(tokens.size());
  if (S == 0) return make_error("forward: no tokens");
  if (cache_.length() + S > cache_.max_tokens())
    return make_error("forward: " + std::to_string(cache_.length() + S) + " tokens exceed the sequence limit of " +
                      std::to_string(cache_.max_tokens()));
  for (std::int64_t s = 0; s < S; ++s)
    if (tokens[s] < 0 || tokens[s] >= spec_.vocab_size)
      return make_error("forward: token id " + std::to_string(tokens[s]) + " at position " + std::to_string(s) +
                        " is outside the vocabulary [0, " + std::to_string(spec_.vocab_size) + ")");
  if (S <= max_step_tokens_) return step(tokens, all_logits, tap);
  // Chunked prefill: each chunk attends to the cache the previous ones filled.
  std::vector<Tensor> parts;
  for (std::int64_t begin = 0; begin < S; begin += max_step_tokens_) {
    const std::int64_t n = std::min(max_step_tokens_, S - begin);
    D0_ASSIGN_OR_RETURN(Tensor logits, step(tokens.subspan(begin, n), all_logits || begin + n == S, tap));
    if (all_logits || begin + n == S) parts.push_back(std::move(logits));
  }
  if (!all_logits) return parts.back();
  Tensor joined = Tensor::zeros({S, spec_.vocab_size}, DType::f32);
  std::int64_t row = 0;
  for (const Tensor& p : parts) {
    std::copy_n(p.data<float>(), p.numel(), joined.data<float>() + row * spec_.vocab_size);
    row += p.size(0);
  }
  return joined;
}

Result<Tensor> Executor::step(std::span<const std::int32_t> tokens, bool all_logits, const TapFn& tap) {
  const std::int64_t S = static_cast<std::int64_t>(tokens.size()), H = spec_.hidden_size;
  ScratchScope scope(ops_);
  Tensor host_ids = Tensor::zeros({S}, DType::i32), host_positions = Tensor::zeros({S}, DType::i32);
  for (std::int64_t s = 0; s < S; ++s) {
    host_ids.data<std::int32_t>()[s] = tokens[s];
    host_positions.data<std::int32_t>()[s] = static_cast<std::int32_t>(cache_.length() + s);
  }
  D0_ASSIGN_OR_RETURN(Tensor ids, ops_.upload(host_ids, "token ids"));
  D0_ASSIGN_OR_RETURN(Tensor positions, ops_.upload(host_positions, "positions"));
  D0_ASSIGN_OR_RETURN(Tensor x, ops_.scratch({S, H}, DType::f32, "residual stream"));
  D0_ASSIGN_OR_RETURN(Tensor h, ops_.scratch({S, H}, DType::f32, "normed"));
  D0_ASSIGN_OR_RETURN(Tensor y, ops_.scratch({S, H}, DType::f32, "block out"));
  D0_RETURN_IF_ERROR(ops_.embedding(weights_.get(spec_.embedding), ids, x));
  D0_RETURN_IF_ERROR(emit(tap, "embed", x));

  auto norm_args = [&](const NormSpec& n) {
    return std::tuple<const Tensor&, float, bool>(weights_.get(n.weight), n.eps, n.kind == NormKind::rms_plus_one);
  };
  if (!spec_.layers.empty()) {
    auto [w, eps, plus_one] = norm_args(spec_.layers[0].mixer_norm);
    D0_RETURN_IF_ERROR(ops_.rms_norm(x, w, eps, plus_one, h));
  }
  const int n_layers = static_cast<int>(spec_.layers.size());
  for (int i = 0; i < n_layers; ++i) {
    const LayerSpec& L = spec_.layers[i];
    D0_RETURN_IF_ERROR(token_mixer(i, h, positions, y));
    D0_RETURN_IF_ERROR(emit(tap, layer_tap(i, "attn"), y));
    {
      auto [w, eps, plus_one] = norm_args(L.channel_norm);
      D0_RETURN_IF_ERROR(ops_.add_rms_norm(x, y, w, eps, plus_one, h));
    }
    D0_RETURN_IF_ERROR(channel_mixer(i, h, y, tap));
    D0_RETURN_IF_ERROR(emit(tap, layer_tap(i, "moe"), y));
    // The residual add fused with the next norm: the next layer's, or the final one.
    auto [w, eps, plus_one] = norm_args(i + 1 < n_layers ? spec_.layers[i + 1].mixer_norm : spec_.final_norm);
    D0_RETURN_IF_ERROR(ops_.add_rms_norm(x, y, w, eps, plus_one, h));
    D0_RETURN_IF_ERROR(emit(tap, layer_tap(i, "out"), x));
  }
  if (spec_.layers.empty()) {
    auto [w, eps, plus_one] = norm_args(spec_.final_norm);
    D0_RETURN_IF_ERROR(ops_.rms_norm(x, w, eps, plus_one, h));
  }
  D0_RETURN_IF_ERROR(emit(tap, "final_norm", h));
  const Tensor head_in = all_logits ? h : h.slice_rows(S - 1, S);
  D0_ASSIGN_OR_RETURN(Tensor logits, ops_.scratch({head_in.size(0), spec_.vocab_size}, DType::f32, "logits"));
  D0_RETURN_IF_ERROR(ops_.lm_head(head_in, weights_.get(spec_.lm_head), logits));
  D0_ASSIGN_OR_RETURN(Tensor host_logits, ops_.download(logits));
  D0_RETURN_IF_ERROR(ops_.synchronize());
  D0_RETURN_IF_ERROR(emit(tap, "logits", host_logits));
  cache_.commit(S);
  return host_logits;
}

}  // namespace day0
