// config.json -> ModelSpec for gpt_oss: every field that changes the math, and clear errors.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "arch/registry.h"

namespace day0 {
namespace {

nlohmann::json read_config(const std::string& name) {
  std::ifstream in(std::string(D0_TEST_DATA) + "/configs/" + name + "/config.json");
  return nlohmann::json::parse(in);
}

std::int64_t total_params(const ModelSpec& spec) {
  std::int64_t n = 0;
  for (const auto& w : spec.weights) n += w.logical_params;
  return n;
}

TEST(GptOssConfig, published_20b_config_gives_the_published_architecture_and_parameter_count) {
  auto spec = model_spec_from_config(read_config("gpt-oss-20b"));
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_EQ(spec->layers.size(), 24u);
  EXPECT_EQ(spec->layers[0].mixer.attention.sliding_window, 128);  // even layers slide
  EXPECT_EQ(spec->layers[1].mixer.attention.sliding_window, 0);
  EXPECT_TRUE(spec->layers[0].mixer.attention.sinks);
  const auto& rope = spec->layers[0].mixer.attention.rope;
  EXPECT_EQ(rope.kind, RopeKind::yarn);
  EXPECT_FALSE(rope.truncate);
  EXPECT_DOUBLE_EQ(rope.factor, 32.0);
  EXPECT_NEAR(rope.attention_factor, 0.1 * std::log(32.0) + 1.0, 1e-12);
  const auto& moe = spec->layers[3].channel.moe;
  EXPECT_EQ(moe.n_experts, 32);
  EXPECT_EQ(moe.top_k, 4);  // hub key "experts_per_token" and num_experts_per_tok agree
  EXPECT_FLOAT_EQ(moe.swiglu_limit, 7.0f);
  EXPECT_FLOAT_EQ(moe.swiglu_alpha, 1.702f);
  EXPECT_TRUE(moe.gate_up_interleaved);
  EXPECT_FALSE(spec->tie_embeddings);
  EXPECT_EQ(spec->lm_head, "lm_head.weight");
  // Published: 20.91 B parameters (model card).
  EXPECT_NEAR(total_params(*spec) / 1e9, 20.91, 0.01);
}

TEST(GptOssConfig, published_120b_config_gives_the_published_parameter_count) {
  auto spec = model_spec_from_config(read_config("gpt-oss-120b"));
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_EQ(spec->layers.size(), 36u);
  EXPECT_EQ(spec->layers[0].channel.moe.n_experts, 128);
  EXPECT_NEAR(total_params(*spec) / 1e9, 116.83, 0.01);
}

TEST(GptOssConfig, transformers5_rope_parameters_and_hub_rope_scaling_read_the_same) {
  nlohmann::json hub = read_config("gpt-oss-20b");
  nlohmann::json tf5 = hub;
  tf5.erase("rope_scaling");
  tf5.erase("rope_theta");
  tf5["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 150000.0}, {"factor", 32.0}, {"beta_fast", 32.0},
                            {"beta_slow", 1.0}, {"truncate", false}, {"original_max_position_embeddings", 4096}};
  auto a = model_spec_from_config(hub), b = model_spec_from_config(tf5);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(rope_inv_freq(a->layers[0].mixer.attention.rope), rope_inv_freq(b->layers[0].mixer.attention.rope));
}

TEST(GptOssConfig, explicit_layer_types_and_tied_embeddings_are_honoured) {
  nlohmann::json c = read_config("gpt-oss-20b");
  c["num_hidden_layers"] = 3;
  c["layer_types"] = {"full_attention", "full_attention", "sliding_attention"};
  c["tie_word_embeddings"] = true;
  c["attention_bias"] = false;
  auto spec = model_spec_from_config(c);
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_EQ(spec->layers[0].mixer.attention.sliding_window, 0);
  EXPECT_EQ(spec->layers[2].mixer.attention.sliding_window, 128);
  EXPECT_EQ(spec->lm_head, spec->embedding);
  EXPECT_TRUE(spec->layers[0].mixer.attention.q_bias.empty());
  for (const auto& w : spec->weights) EXPECT_NE(w.name, "lm_head.weight");
}

TEST(GptOssConfig, unknown_model_type_lists_the_supported_families) {
  auto spec = model_spec_from_config({{"model_type", "llama_next"}});
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.error().message.find("unknown model_type \"llama_next\""), std::string::npos);
  EXPECT_NE(spec.error().message.find("supported: gpt_oss"), std::string::npos);
}

TEST(GptOssConfig, missing_keys_are_all_listed_in_one_error) {
  nlohmann::json c = read_config("gpt-oss-20b");
  c.erase("hidden_size");
  c.erase("num_local_experts");
  c.erase("experts_per_token");
  c.erase("num_experts_per_tok");
  auto spec = model_spec_from_config(c);
  ASSERT_FALSE(spec.ok());
  const std::string& m = spec.error().message;
  EXPECT_NE(m.find("hidden_size"), std::string::npos) << m;
  EXPECT_NE(m.find("num_local_experts|num_experts"), std::string::npos) << m;
  EXPECT_NE(m.find("num_experts_per_tok|experts_per_token"), std::string::npos) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << "one line";
}

TEST(GptOssConfig, wrong_types_and_inconsistent_values_are_rejected_with_the_key_named) {
  nlohmann::json c = read_config("gpt-oss-20b");
  c["num_attention_heads"] = "64";
  auto spec = model_spec_from_config(c);
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.error().message.find("num_attention_heads must be a non-negative integer"), std::string::npos);

  c = read_config("gpt-oss-20b");
  c["layer_types"] = {"full_attention"};
  spec = model_spec_from_config(c);
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.error().message.find("layer_types has 1 entries"), std::string::npos) << spec.error().message;

  c = read_config("gpt-oss-20b");
  c["hidden_size"] = 2881;  // MXFP4 groups need multiples of 32
  spec = model_spec_from_config(c);
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.error().message.find("multiples of 32"), std::string::npos);

  c = read_config("gpt-oss-20b");
  c.erase("quantization_config");
  spec = model_spec_from_config(c);
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.error().message.find("mxfp4"), std::string::npos);

  c = read_config("gpt-oss-20b");
  c["rope_scaling"]["rope_type"] = "longrope";
  spec = model_spec_from_config(c);
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.error().message.find("longrope"), std::string::npos);
}

TEST(GptOssConfig, manifest_declares_mxfp4_experts_in_the_published_layout) {
  auto spec = model_spec_from_config(read_config("gpt-oss-20b"));
  ASSERT_TRUE(spec.ok());
  bool blocks = false, scales = false;
  for (const auto& w : spec->weights) {
    if (w.name == "model.layers.0.mlp.experts.gate_up_proj_blocks") {
      blocks = true;
      EXPECT_EQ(w.shape, (Shape{32, 5760, 90, 16}));
      EXPECT_EQ(w.dtypes, std::vector<DType>{DType::u8});
    }
    if (w.name == "model.layers.0.mlp.experts.down_proj_scales") {
      scales = true;
      EXPECT_EQ(w.shape, (Shape{32, 2880, 90}));
    }
  }
  EXPECT_TRUE(blocks && scales);
}

const WeightDecl* find_weight(const ModelSpec& spec, const std::string& name) {
  for (const auto& w : spec.weights)
    if (w.name == name) return &w;
  return nullptr;
}

TEST(GptOssConfig, day0_experts_configs_declare_the_converted_expert_tensors_and_keep_the_parameter_count) {
  const nlohmann::json published = read_config("gpt-oss-20b");
  const auto mxfp4 = model_spec_from_config(published);
  ASSERT_TRUE(mxfp4.ok());
  nlohmann::json c = published;
  c["quantization_config"] = {{"quant_method", "day0_experts"}, {"experts", "bf16"}, {"converted_from", "mxfp4"}};
  auto bf16 = model_spec_from_config(c);
  ASSERT_TRUE(bf16.ok()) << bf16.error().message;
  EXPECT_EQ(bf16->layers[5].channel.moe.gate_up.format, ExpertFormat::bf16_fused);
  EXPECT_EQ(bf16->quantization, "day0_experts");
  const WeightDecl* v = find_weight(*bf16, "model.layers.0.mlp.experts.gate_up_proj_bf16");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->shape, (Shape{32, 5760, 2880}));
  EXPECT_EQ(v->dtypes, std::vector<DType>{DType::bf16});
  EXPECT_EQ(find_weight(*bf16, "model.layers.0.mlp.experts.gate_up_proj_blocks"), nullptr);
  EXPECT_EQ(total_params(*bf16), total_params(*mxfp4));

  c["quantization_config"]["experts"] = "fp8_e4m3_rowwise";
  auto fp8 = model_spec_from_config(c);
  ASSERT_TRUE(fp8.ok()) << fp8.error().message;
  EXPECT_EQ(fp8->layers[0].channel.moe.down.format, ExpertFormat::fp8_rowwise_fused);
  v = find_weight(*fp8, "model.layers.0.mlp.experts.down_proj_fp8");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->shape, (Shape{32, 2880, 2880}));
  EXPECT_EQ(v->dtypes, std::vector<DType>{DType::f8_e4m3});
  v = find_weight(*fp8, "model.layers.0.mlp.experts.down_proj_fp8_scales");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->shape, (Shape{32, 2880}));
  EXPECT_EQ(v->dtypes, std::vector<DType>{DType::f32});
  EXPECT_EQ(total_params(*fp8), total_params(*mxfp4));

  for (const char* bad : {"mxfp4", "int4", ""}) {
    c["quantization_config"]["experts"] = bad;
    auto r = model_spec_from_config(c);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().message.find("quantization_config.experts"), std::string::npos) << r.error().message;
  }
  c["quantization_config"] = {{"quant_method", "fp8"}};
  auto other = model_spec_from_config(c);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.error().message.find("\"mxfp4\" (the published layout) or \"day0_experts\""), std::string::npos)
      << other.error().message;
}

}  // namespace
}  // namespace day0
