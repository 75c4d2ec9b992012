// ModelSpec: an architecture as data. Family files in arch/ read config.json and emit one;
// model/ executes it knowing blocks (token mixers, channel mixers, norms), never families.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "arch/expert_format.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "ops/rope.h"

namespace day0 {

enum class NormKind {
  rms,            // y = w * x * rsqrt(mean(x^2) + eps) (Llama and gpt-oss agree in fp32)
  rms_plus_one,   // y = (1 + w) * x * rsqrt(...) (zero-centred, Qwen3-Next)
};

struct NormSpec {
  NormKind kind = NormKind::rms;
  float eps = 1e-6f;
  std::string weight;  // tensor name
};

// Grouped-query attention, optionally with a sliding window and per-head sink logits.
struct AttentionSpec {
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int sliding_window = 0;  // 0 = full causal; else keys with q_pos - k_pos < window
  bool sinks = false;
  float scale = 0.f;       // softmax scale (head_dim^-1/2 unless the family says otherwise)
  RopeSpec rope;
  std::string q_weight, q_bias, k_weight, k_bias, v_weight, v_bias, o_weight, o_bias, sinks_weight;
};

enum class TokenMixerKind { gqa_attention };

struct TokenMixer {
  TokenMixerKind kind = TokenMixerKind::gqa_attention;
  AttentionSpec attention;
};

enum class RouterKind {
  topk_then_softmax,  // top-k over logits, softmax over the k selected (gpt-oss)
};

enum class ExpertActivation {
  swiglu_clamped,  // gate = min(gate, limit); up = clamp(up, -limit, limit); (up + 1) * gate * sigmoid(alpha * gate)
};

struct MoESpec {
  int n_experts = 0;
  int top_k = 0;
  int intermediate = 0;
  RouterKind router = RouterKind::topk_then_softmax;
  std::string router_weight, router_bias;
  ExpertActivation activation = ExpertActivation::swiglu_clamped;
  float swiglu_alpha = 1.702f;
  float swiglu_limit = 7.0f;
  bool gate_up_interleaved = true;  // column 2j is gate_j, 2j+1 is up_j (else gate rows then up rows)
  ExpertMatrix gate_up;             // out = 2 * intermediate
  ExpertMatrix down;                // out = hidden
};

enum class ChannelMixerKind { moe };

struct ChannelMixer {
  ChannelMixerKind kind = ChannelMixerKind::moe;
  MoESpec moe;
};

struct LayerSpec {
  std::string layer_type;  // as config.json names it ("sliding_attention", "full_attention", ...)
  NormSpec mixer_norm;
  TokenMixer mixer;
  NormSpec channel_norm;
  ChannelMixer channel;
};

enum class ResidualScheme { plain };  // x += block(norm(x)); cross-layer streams come later

// One tensor the checkpoint must hold.
struct WeightDecl {
  std::string name;
  Shape shape;
  std::vector<DType> dtypes;      // accepted on disk
  std::int64_t logical_params = 0;  // parameters it stands for (an MXFP4 byte holds two)
  bool expert = false;            // part of routed experts (active share = top_k / n_experts)
  std::string group;              // "embedding", "attention", "experts", "router", "norm", "lm_head"
};

struct ModelSpec {
  std::string family;      // transformers model_type
  std::string architecture;
  int vocab_size = 0;
  int hidden_size = 0;
  int max_position = 0;
  bool tie_embeddings = false;
  ResidualScheme residual = ResidualScheme::plain;
  std::string embedding;   // [vocab, hidden]
  std::vector<LayerSpec> layers;
  NormSpec final_norm;
  std::string lm_head;     // equals `embedding` when tied
  std::vector<WeightDecl> weights;
  std::string quantization;  // config quant_method: "mxfp4", "day0_experts" (converted) or "" (informational)
};

}  // namespace day0
