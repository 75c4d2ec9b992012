// Executor: the block graph of a ModelSpec, one sequence at a time.
#include "model/executor.h"

#include <string>

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

}  // namespace

Executor::Executor(const ModelSpec& spec, ModelWeights weights, Ops& ops, std::int64_t max_tokens)
    : spec_(spec), weights_(std::move(weights)), ops_(ops), cache_(kv_row_widths(spec), max_tokens) {
  for (const auto& L : spec_.layers) inv_freq_.push_back(rope_inv_freq(L.mixer.attention.rope));
}

Result<std::unique_ptr<Executor>> Executor::create(const ModelSpec& spec, ModelWeights weights, Ops& ops,
                                                   std::int64_t max_tokens) {
  if (max_tokens <= 0 || max_tokens > spec.max_position)
    return make_error("max tokens " + std::to_string(max_tokens) + " must be in [1, " +
                      std::to_string(spec.max_position) + "] (max_position_embeddings)");
  return std::unique_ptr<Executor>(new Executor(spec, std::move(weights), ops, max_tokens));
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
  Tensor q = Tensor::zeros({S, q_width}, DType::f32);
  Tensor k = Tensor::zeros({S, kv_width}, DType::f32);
  Tensor v = Tensor::zeros({S, kv_width}, DType::f32);
  D0_RETURN_IF_ERROR(ops_.linear(h, weights_.get(a.q_weight), optional_weight(weights_, a.q_bias), q));
  D0_RETURN_IF_ERROR(ops_.linear(h, weights_.get(a.k_weight), optional_weight(weights_, a.k_bias), k));
  D0_RETURN_IF_ERROR(ops_.linear(h, weights_.get(a.v_weight), optional_weight(weights_, a.v_bias), v));
  if (a.rope.kind != RopeKind::none) {
    const float factor = static_cast<float>(a.rope.attention_factor);
    D0_RETURN_IF_ERROR(ops_.rope(q, a.n_heads, a.head_dim, positions, inv_freq_[layer], factor));
    D0_RETURN_IF_ERROR(ops_.rope(k, a.n_kv_heads, a.head_dim, positions, inv_freq_[layer], factor));
  }
  D0_RETURN_IF_ERROR(cache_.write(layer, k, v));
  const std::int64_t T = cache_.length() + S;
  const AttentionParams params{a.n_heads, a.n_kv_heads, a.head_dim, a.sliding_window, a.scale};
  Tensor mixed = Tensor::zeros({S, q_width}, DType::f32);
  D0_RETURN_IF_ERROR(ops_.attention(q, cache_.keys(layer, T), cache_.values(layer, T), positions,
                                    a.sinks ? weights_.get(a.sinks_weight) : Tensor(), params, mixed));
  return ops_.linear(mixed, weights_.get(a.o_weight), optional_weight(weights_, a.o_bias), out);
}

Status Executor::moe_block(int layer, const Tensor& h, Tensor& out, const TapFn& tap) {
  const MoESpec& m = spec_.layers[layer].channel.moe;
  const std::int64_t S = h.size(0);
  Tensor router_logits = Tensor::zeros({S, m.n_experts}, DType::f32);
  D0_RETURN_IF_ERROR(ops_.linear(h, weights_.get(m.router_weight), optional_weight(weights_, m.router_bias),
                                 router_logits));
  Tensor indices = Tensor::zeros({S, m.top_k}, DType::i32);
  Tensor route = Tensor::zeros({S, m.top_k}, DType::f32);
  D0_RETURN_IF_ERROR(ops_.router_topk_softmax(router_logits, m.top_k, indices, route));
  if (tap) {
    tap(layer_tap(layer, "router_indices"), indices);
    tap(layer_tap(layer, "router_weights"), route);
  }
  const SwigluParams swiglu{m.swiglu_alpha, m.swiglu_limit, m.gate_up_interleaved};
  return ops_.moe_experts(h, indices, route, mxfp4_experts(weights_, m.gate_up, m.n_experts),
                          mxfp4_experts(weights_, m.down, m.n_experts), swiglu, out);
}

Result<Tensor> Executor::forward(std::span<const std::int32_t> tokens, bool all_logits, const TapFn& tap) {
  const std::int64_t S = static_cast<std::int64_t>(tokens.size()), H = spec_.hidden_size;
  if (S == 0) return make_error("forward: no tokens");
  if (cache_.length() + S > cache_.max_tokens())
    return make_error("forward: " + std::to_string(cache_.length() + S) + " tokens exceed the sequence limit of " +
                      std::to_string(cache_.max_tokens()));
  Tensor ids = Tensor::zeros({S}, DType::i32);
  Tensor positions = Tensor::zeros({S}, DType::i32);
  for (std::int64_t s = 0; s < S; ++s) {
    ids.data<std::int32_t>()[s] = tokens[s];
    positions.data<std::int32_t>()[s] = static_cast<std::int32_t>(cache_.length() + s);
  }
  Tensor x = Tensor::zeros({S, H}, DType::f32);
  D0_RETURN_IF_ERROR(ops_.embedding(weights_.get(spec_.embedding), ids, x));
  if (tap) tap("embed", x);

  Tensor h = Tensor::zeros({S, H}, DType::f32), y = Tensor::zeros({S, H}, DType::f32);
  for (int i = 0; i < static_cast<int>(spec_.layers.size()); ++i) {
    const LayerSpec& L = spec_.layers[i];
    D0_RETURN_IF_ERROR(ops_.rms_norm(x, weights_.get(L.mixer_norm.weight), L.mixer_norm.eps,
                                     L.mixer_norm.kind == NormKind::rms_plus_one, h));
    D0_RETURN_IF_ERROR(token_mixer(i, h, positions, y));
    if (tap) tap(layer_tap(i, "attn"), y);
    D0_RETURN_IF_ERROR(ops_.add(x, y));
    D0_RETURN_IF_ERROR(ops_.rms_norm(x, weights_.get(L.channel_norm.weight), L.channel_norm.eps,
                                     L.channel_norm.kind == NormKind::rms_plus_one, h));
    D0_RETURN_IF_ERROR(channel_mixer(i, h, y, tap));
    if (tap) tap(layer_tap(i, "moe"), y);
    D0_RETURN_IF_ERROR(ops_.add(x, y));
    if (tap) tap(layer_tap(i, "out"), x);
  }
  D0_RETURN_IF_ERROR(ops_.rms_norm(x, weights_.get(spec_.final_norm.weight), spec_.final_norm.eps,
                                   spec_.final_norm.kind == NormKind::rms_plus_one, h));
  if (tap) tap("final_norm", h);
  const Tensor head_in = all_logits ? h : h.slice_rows(S - 1, S);
  Tensor logits = Tensor::zeros({head_in.size(0), spec_.vocab_size}, DType::f32);
  D0_RETURN_IF_ERROR(ops_.lm_head(head_in, weights_.get(spec_.lm_head), logits));
  if (tap) tap("logits", logits);
  cache_.commit(S);
  return logits;
}

}  // namespace day0
