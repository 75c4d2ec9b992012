// weight_roles: what the loader tells Ops::place_weights of a spec's tensors. The experts' storage, and each
// attention block's q, k and v weights and biases as groups to place back to back (one GEMM over the three), every
// name one the spec declares.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "arch/registry.h"
#include "model/weights.h"

namespace day0 {
namespace {

TEST(WeightRoles, group_each_attention_blocks_q_k_v_weights_and_biases_in_that_order) {
  auto spec = model_spec_from_dir(std::string(D0_TEST_DATA) + "/gpt_oss_tiny");
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  const WeightRoles roles = weight_roles(*spec);
  EXPECT_EQ(roles.experts, expert_tensor_names(*spec));
  std::set<std::string> declared;
  for (const auto& w : spec->weights) declared.insert(w.name);
  ASSERT_EQ(roles.adjacent.size(), 2 * spec->layers.size());  // gpt-oss: q, k and v all have biases
  for (size_t l = 0; l < spec->layers.size(); ++l) {
    const AttentionSpec& a = spec->layers[l].mixer.attention;
    EXPECT_EQ(roles.adjacent[2 * l], (std::vector<std::string>{a.q_weight, a.k_weight, a.v_weight}));
    EXPECT_EQ(roles.adjacent[2 * l + 1], (std::vector<std::string>{a.q_bias, a.k_bias, a.v_bias}));
  }
  for (const auto& group : roles.adjacent)
    for (const std::string& name : group) EXPECT_TRUE(declared.count(name)) << name;
}

}  // namespace
}  // namespace day0
