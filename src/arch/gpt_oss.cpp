// gpt_oss (gpt-oss-20b / -120b): config.json -> ModelSpec. REFERENCE.md §4.
// GQA with per-head sinks, sliding/full layer alternation, YaRN, MoE with clamped SwiGLU over MXFP4 experts
// (or experts `day0 convert` wrote as bf16 / fp8, arch/expert_format.h).
#include <cmath>
#include <string>

#include "arch/config_reader.h"
#include "arch/registry.h"

namespace day0 {
namespace {

constexpr int kMxfp4Group = 32;
// transformers hard-codes these; the hub key swiglu_limit is ignored (REFERENCE.md §4.a).
constexpr float kSwigluAlpha = 1.702f;
constexpr float kSwigluLimit = 7.0f;
const std::vector<DType> kFloatDtypes = {DType::bf16, DType::f32, DType::f16};

// Reads rope_parameters (transformers 5) or rope_theta + rope_scaling (published hub configs).
RopeSpec read_rope(int head_dim, int max_position, ConfigReader& top) {
  RopeSpec rope;
  rope.kind = RopeKind::default_;
  rope.rotary_dim = head_dim;
  const nlohmann::json* params = top.object("rope_parameters");
  if (!params) params = top.object("rope_scaling");
  static const nlohmann::json kEmpty = nlohmann::json::object();
  ConfigReader r(params ? *params : kEmpty, "gpt_oss rope_parameters");
  if (params && params->contains("rope_theta")) {
    rope.theta = r.number({"rope_theta"});
  } else {
    rope.theta = top.number({"rope_theta"});
  }
  std::string type = "default";
  if (params) {
    auto it = params->find("rope_type");
    if (it == params->end()) it = params->find("type");
    if (it != params->end() && it->is_string()) type = it->get<std::string>();
  }
  if (type == "yarn") {
    rope.kind = RopeKind::yarn;
    rope.original_max_position = r.number({"original_max_position_embeddings"});
    rope.factor = r.number_or("factor", rope.original_max_position > 0 ? max_position / rope.original_max_position : 1.0);
    rope.beta_fast = r.number_or("beta_fast", 32.0);
    rope.beta_slow = r.number_or("beta_slow", 1.0);
    rope.truncate = r.boolean_or("truncate", true);
    const double mscale = r.number_or("mscale", 0.0), mscale_all = r.number_or("mscale_all_dim", 0.0);
    if (params->contains("attention_factor")) {
      rope.attention_factor = r.number({"attention_factor"});
    } else if (mscale != 0.0 && mscale_all != 0.0) {
      rope.attention_factor = yarn_get_mscale(rope.factor, mscale) / yarn_get_mscale(rope.factor, mscale_all);
    } else {
      rope.attention_factor = yarn_get_mscale(rope.factor);
    }
  } else if (type != "default") {
    top.require(false, "rope type \"" + type + "\" (gpt_oss supports \"yarn\" and \"default\")");
  }
  auto st = r.finish();
  if (!st.ok()) top.require(false, st.error().message);
  return rope;
}

WeightDecl dense(std::string name, Shape shape, std::string group) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return WeightDecl{std::move(name), std::move(shape), kFloatDtypes, n, false, std::move(group)};
}

// Expert matrix [E, out, in] in its storage format (arch/expert_format.h); the first tensor stands for the
// parameters, the scales count none. Then the bias.
void add_expert_matrix(std::vector<WeightDecl>& w, const ExpertMatrix& m, int n_experts) {
  const std::int64_t params = std::int64_t(n_experts) * m.out * m.in;
  bool first = true;
  for (ExpertTensor& t : expert_tensors(m, n_experts)) {
    w.push_back({std::move(t.name), std::move(t.shape), {t.dtype}, first ? params : 0, true, "experts"});
    first = false;
  }
  w.push_back({m.bias, {n_experts, m.out}, kFloatDtypes, std::int64_t(n_experts) * m.out, true, "experts"});
}

// quantization_config: the published MXFP4 ("quant_method": "mxfp4"), or what `day0 convert` wrote
// ("quant_method": "day0_experts", "experts": "bf16" | "fp8_e4m3_rowwise").
ExpertFormat read_expert_format(ConfigReader& c, std::string& quant) {
  const nlohmann::json* q = c.object("quantization_config");
  auto string_at = [&](const char* key) -> std::string {
    if (!q) return "";
    auto it = q->find(key);
    return (it != q->end() && it->is_string()) ? it->get<std::string>() : "";
  };
  quant = string_at("quant_method");
  if (quant == "mxfp4") return ExpertFormat::mxfp4_fused;
  if (quant == kConvertedQuantMethod) {
    const std::string experts = string_at("experts");
    const auto format = expert_format_from_name(experts);
    c.require(format && *format != ExpertFormat::mxfp4_fused,
              "quantization_config.experts \"" + experts + "\" (day0_experts checkpoints hold \"bf16\" or "
              "\"fp8_e4m3_rowwise\" experts)");
    return format ? *format : ExpertFormat::mxfp4_fused;
  }
  c.require(false, "quantization_config.quant_method must be \"mxfp4\" (the published layout) or \"" +
                       std::string(kConvertedQuantMethod) + "\" (written by day0 convert), got \"" + quant + "\"");
  return ExpertFormat::mxfp4_fused;
}

}  // namespace

Result<ModelSpec> parse_gpt_oss(const nlohmann::json& config) {
  ConfigReader c(config, "gpt_oss");
  ModelSpec spec;
  spec.family = "gpt_oss";
  spec.architecture = "GptOssForCausalLM";
  spec.vocab_size = c.integer({"vocab_size"});
  spec.hidden_size = c.integer({"hidden_size"});
  const int intermediate = c.integer({"intermediate_size"});
  const int n_layers = c.integer({"num_hidden_layers"});
  const int n_heads = c.integer({"num_attention_heads"});
  const int n_kv_heads = c.integer({"num_key_value_heads"});
  const int head_dim = c.integer({"head_dim"});
  const int n_experts = c.integer({"num_local_experts", "num_experts"});
  const int top_k = c.integer({"num_experts_per_tok", "experts_per_token"});
  const float eps = static_cast<float>(c.number({"rms_norm_eps"}));
  spec.max_position = c.integer_or("max_position_embeddings", 131072);
  const int window = c.integer_or("sliding_window", 128);
  const bool bias = c.boolean_or("attention_bias", true);
  spec.tie_embeddings = c.boolean_or("tie_word_embeddings", false);
  const RopeSpec rope = read_rope(head_dim, spec.max_position, c);

  constexpr int kMaxLayers = 4096;  // the manifest lists every layer: no hang on a hostile config
  c.require(n_layers <= kMaxLayers, "num_hidden_layers must be at most " + std::to_string(kMaxLayers));
  std::vector<std::string> layer_types;
  if (auto lt = c.strings("layer_types")) {
    layer_types = *lt;
    c.require(static_cast<int>(layer_types.size()) == n_layers,
              "layer_types has " + std::to_string(layer_types.size()) + " entries, num_hidden_layers is " +
                  std::to_string(n_layers));
  } else if (n_layers <= kMaxLayers) {
    for (int i = 0; i < n_layers; ++i) layer_types.push_back(i % 2 == 0 ? "sliding_attention" : "full_attention");
  }
  for (const auto& t : layer_types)
    c.require(t == "sliding_attention" || t == "full_attention",
              "layer type \"" + t + "\" (gpt_oss has sliding_attention and full_attention)");

  std::string quant;
  const ExpertFormat expert_format = read_expert_format(c, quant);
  spec.quantization = quant;
  if (config.contains("swiglu_limit") && config["swiglu_limit"].is_number() &&
      config["swiglu_limit"].get<double>() != kSwigluLimit)
    c.require(false, "swiglu_limit " + config["swiglu_limit"].dump() +
                         " (transformers hard-codes 7.0 and ignores this key; refusing to guess)");
  D0_RETURN_IF_ERROR(c.finish());

  ConfigReader shape_check(config, "gpt_oss");
  shape_check.require(spec.hidden_size % kMxfp4Group == 0 && intermediate % kMxfp4Group == 0,
                      "hidden_size and intermediate_size must be multiples of 32 for MXFP4 experts");
  shape_check.require(n_heads > 0 && n_kv_heads > 0 && n_heads % n_kv_heads == 0,
                      "num_attention_heads must be a positive multiple of num_key_value_heads");
  shape_check.require(top_k >= 1 && top_k <= n_experts, "num_experts_per_tok must be in [1, num_local_experts]");
  shape_check.require(head_dim > 0 && head_dim % 2 == 0, "head_dim must be positive and even for RoPE");
  shape_check.require(spec.vocab_size > 0 && spec.hidden_size > 0 && n_layers > 0, "sizes must be positive");
  // The shapes below are products of ints: bound the factors so none overflows.
  shape_check.require(std::int64_t(n_heads) * head_dim <= (1 << 24) && std::int64_t(intermediate) <= (1 << 23),
                      "num_attention_heads x head_dim must be at most 2^24 and intermediate_size at most 2^23");
  D0_RETURN_IF_ERROR(shape_check.finish());

  const int H = spec.hidden_size, V = spec.vocab_size;
  auto& w = spec.weights;
  spec.embedding = "model.embed_tokens.weight";
  w.push_back(dense(spec.embedding, {V, H}, "embedding"));
  for (int i = 0; i < n_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    LayerSpec L;
    L.layer_type = layer_types[i];
    L.mixer_norm = {NormKind::rms, eps, p + "input_layernorm.weight"};
    L.channel_norm = {NormKind::rms, eps, p + "post_attention_layernorm.weight"};
    AttentionSpec& a = L.mixer.attention;
    a.n_heads = n_heads;
    a.n_kv_heads = n_kv_heads;
    a.head_dim = head_dim;
    a.sliding_window = L.layer_type == "sliding_attention" ? window : 0;
    a.sinks = true;
    a.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    a.rope = rope;
    const std::string s = p + "self_attn.";
    a.q_weight = s + "q_proj.weight";
    a.k_weight = s + "k_proj.weight";
    a.v_weight = s + "v_proj.weight";
    a.o_weight = s + "o_proj.weight";
    if (bias) {
      a.q_bias = s + "q_proj.bias";
      a.k_bias = s + "k_proj.bias";
      a.v_bias = s + "v_proj.bias";
      a.o_bias = s + "o_proj.bias";
    }
    a.sinks_weight = s + "sinks";
    w.push_back(dense(L.mixer_norm.weight, {H}, "norm"));
    w.push_back(dense(a.q_weight, {n_heads * head_dim, H}, "attention"));
    w.push_back(dense(a.k_weight, {n_kv_heads * head_dim, H}, "attention"));
    w.push_back(dense(a.v_weight, {n_kv_heads * head_dim, H}, "attention"));
    w.push_back(dense(a.o_weight, {H, n_heads * head_dim}, "attention"));
    if (bias) {
      w.push_back(dense(a.q_bias, {n_heads * head_dim}, "attention"));
      w.push_back(dense(a.k_bias, {n_kv_heads * head_dim}, "attention"));
      w.push_back(dense(a.v_bias, {n_kv_heads * head_dim}, "attention"));
      w.push_back(dense(a.o_bias, {H}, "attention"));
    }
    w.push_back(dense(a.sinks_weight, {n_heads}, "attention"));

    MoESpec& m = L.channel.moe;
    m.n_experts = n_experts;
    m.top_k = top_k;
    m.intermediate = intermediate;
    m.router = RouterKind::topk_then_softmax;
    m.router_weight = p + "mlp.router.weight";
    m.router_bias = p + "mlp.router.bias";
    m.activation = ExpertActivation::swiglu_clamped;
    m.swiglu_alpha = kSwigluAlpha;
    m.swiglu_limit = kSwigluLimit;
    m.gate_up_interleaved = true;
    m.gate_up = {expert_format, p + "mlp.experts.gate_up_proj", p + "mlp.experts.gate_up_proj_bias",
                 2 * intermediate, H};
    m.down = {expert_format, p + "mlp.experts.down_proj", p + "mlp.experts.down_proj_bias", H,
              intermediate};
    w.push_back(dense(L.channel_norm.weight, {H}, "norm"));
    w.push_back(dense(m.router_weight, {n_experts, H}, "router"));
    w.push_back(dense(m.router_bias, {n_experts}, "router"));
    add_expert_matrix(w, m.gate_up, n_experts);
    add_expert_matrix(w, m.down, n_experts);
    spec.layers.push_back(std::move(L));
  }
  spec.final_norm = {NormKind::rms, eps, "model.norm.weight"};
  w.push_back(dense(spec.final_norm.weight, {H}, "norm"));
  spec.lm_head = spec.tie_embeddings ? spec.embedding : "lm_head.weight";
  if (!spec.tie_embeddings) w.push_back(dense(spec.lm_head, {V, H}, "lm_head"));
  return spec;
}

}  // namespace day0
