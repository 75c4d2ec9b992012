// CudaOps::place_weights: what each kind of checkpoint tensor becomes on the device. Dense matrices are bf16 (the
// GEMMs' operand), the dense layers' bias vectors f32 (the GEMMs' output dtype, so cuBLASLt adds them in its
// epilogue), and expert storage, the experts' biases and other vectors keep their stored dtype and bits.
// Skipped visibly without a GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "cuda_test_util.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/op_test_util.h"

namespace day0 {
namespace {

TEST(CudaPlaceWeights, dense_biases_become_f32_exactly_and_the_rest_keeps_its_dtype) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  BackendOptions bo;
  bo.memory_fraction = 0.05;
  auto ops = CudaOps::create(bo);
  ASSERT_TRUE(ops.ok()) << ops.error().message;
  CudaOps& cuda = **ops;
  std::mt19937 rng(7101);
  const Tensor bias_bf16 = optest::to_bf16(optest::random_f32({40}, rng));
  const Tensor norm_bf16 = optest::to_bf16(optest::random_f32({40}, rng));
  const Tensor expert_bias = optest::to_bf16(optest::random_f32({4, 40}, rng));
  const Tensor matrix = optest::random_f32({40, 24}, rng);
  const Tensor blocks = Tensor::zeros({4, 40, 1, 16}, DType::u8);
  NamedTensors host{{"layers.0.attn.q_proj.bias", bias_bf16},
                    {"layers.0.input_layernorm.weight", norm_bf16},
                    {"layers.0.mlp.experts.gate_up_proj_bias", expert_bias},
                    {"layers.0.attn.q_proj.weight", matrix},
                    {"layers.0.mlp.experts.gate_up_proj_blocks", blocks}};
  auto placed = cuda.place_weights(host, {"layers.0.mlp.experts.gate_up_proj_blocks"}, nullptr);
  ASSERT_TRUE(placed.ok()) << placed.error().message;
  auto dtype_of = [&](const char* name) { return placed->at(name).dtype(); };
  EXPECT_EQ(dtype_of("layers.0.attn.q_proj.bias"), DType::f32);
  EXPECT_EQ(dtype_of("layers.0.input_layernorm.weight"), DType::bf16);
  EXPECT_EQ(dtype_of("layers.0.mlp.experts.gate_up_proj_bias"), DType::bf16);
  EXPECT_EQ(dtype_of("layers.0.attn.q_proj.weight"), DType::bf16);
  EXPECT_EQ(dtype_of("layers.0.mlp.experts.gate_up_proj_blocks"), DType::u8);
  auto bias = cuda.download(placed->at("layers.0.attn.q_proj.bias"));
  auto norm = cuda.download(placed->at("layers.0.input_layernorm.weight"));
  ASSERT_TRUE(bias.ok() && norm.ok());
  D0_ASSERT_OK(cuda.synchronize());
  EXPECT_TRUE(cudatest::same_bits(*bias, bias_bf16.to_f32()));  // bf16 -> f32 widens without rounding
  EXPECT_EQ(std::memcmp(norm->raw(), norm_bf16.raw(), norm_bf16.nbytes()), 0);
}

}  // namespace
}  // namespace day0
