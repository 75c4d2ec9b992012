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
#include "quant/mxfp4_tiles.h"

namespace day0 {
namespace {

TEST(CudaPlaceWeights, dense_biases_become_f32_exactly_and_the_rest_keeps_its_dtype) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  const std::unique_ptr<CudaOps> ops = cudatest::make_cuda_ops();
  ASSERT_TRUE(ops);
  CudaOps& cuda = *ops;
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
  auto placed = cuda.place_weights(host, WeightRoles{{"layers.0.mlp.experts.gate_up_proj_blocks"}, {}}, nullptr);
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

// Groups named adjacent are placed back to back in the group's order, whatever the names' order (here k, o, q, v),
// so one GEMM reads q, k and v as one matrix and their biases as one vector; a group with a member missing is
// placed as usual. Each tensor keeps its bits.
TEST(CudaPlaceWeights, adjacent_groups_are_placed_back_to_back_in_their_order) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  const std::unique_ptr<CudaOps> ops = cudatest::make_cuda_ops();
  ASSERT_TRUE(ops);
  CudaOps& cuda = *ops;
  std::mt19937 rng(7103);
  NamedTensors host;
  for (const char* p : {"q", "k", "v", "o"}) {
    const std::int64_t rows = p[0] == 'q' || p[0] == 'o' ? 256 : 64;
    host.emplace(std::string("a.") + p + "_proj.weight", optest::to_bf16(optest::random_f32({rows, 96}, rng)));
    host.emplace(std::string("a.") + p + "_proj.bias", optest::random_f32({rows}, rng));
  }
  const WeightRoles roles{{},
                          {{"a.q_proj.weight", "a.k_proj.weight", "a.v_proj.weight"},
                           {"a.q_proj.bias", "a.k_proj.bias", "a.v_proj.bias"},
                           {"a.o_proj.weight", "a.missing.weight"}}};
  auto placed = cuda.place_weights(host, roles, nullptr);
  ASSERT_TRUE(placed.ok()) << placed.error().message;
  auto at = [&](const char* name) { return placed->at(name); };
  const Tensor qkv = Tensor::adjacent_rows({at("a.q_proj.weight"), at("a.k_proj.weight"), at("a.v_proj.weight")});
  ASSERT_TRUE(qkv.defined());
  EXPECT_EQ(qkv.shape(), (Shape{384, 96}));
  const Tensor biases = Tensor::adjacent_rows({at("a.q_proj.bias"), at("a.k_proj.bias"), at("a.v_proj.bias")});
  ASSERT_TRUE(biases.defined());
  EXPECT_EQ(biases.shape(), (Shape{384}));
  EXPECT_EQ(biases.dtype(), DType::f32);
  for (const auto& [name, t] : host) {
    auto got = cuda.download(placed->at(name));
    ASSERT_TRUE(got.ok()) << got.error().message;
    D0_ASSERT_OK(cuda.synchronize());
    EXPECT_TRUE(cudatest::same_bits(*got, t)) << name;
  }
}

// MXFP4 expert blocks take the tiled order by default where every expert's rows are a multiple of 16 (the bytes as
// the host repack gives them), the published order where one is not; asking for tiles then is an error that names
// the tensor, and asking for rows keeps the published order.
TEST(CudaPlaceWeights, mxfp4_blocks_are_tiled_where_every_expert_fits_the_tiles) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  std::mt19937 rng(7102);
  auto blocks_of = [&](std::int64_t rows, std::int64_t groups) {
    Tensor t = Tensor::zeros({2, rows, groups, 16}, DType::u8);
    auto* p = static_cast<std::uint8_t*>(t.raw());
    for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<std::uint8_t>(rng());
    return t;
  };
  const std::string gate_up = "layers.0.mlp.experts.gate_up_proj_blocks", down = "layers.0.mlp.experts.down_proj_blocks";
  struct Case {
    Mxfp4Order order;
    std::int64_t down_rows;
    bool tiled, fails;
  };
  for (const Case c : {Case{Mxfp4Order::automatic, 48, true, false}, Case{Mxfp4Order::automatic, 40, false, false},
                       Case{Mxfp4Order::rows, 48, false, false}, Case{Mxfp4Order::tiles, 40, false, true}}) {
    SCOPED_TRACE(std::string(mxfp4_order_name(c.order)) + ", down rows " + std::to_string(c.down_rows));
    BackendOptions bo;
    bo.mxfp4_order = c.order;
    const std::unique_ptr<CudaOps> ops = cudatest::make_cuda_ops(bo);
    ASSERT_TRUE(ops);
    CudaOps& cuda = *ops;
    const NamedTensors host{{gate_up, blocks_of(64, 5)}, {down, blocks_of(c.down_rows, 3)}};
    auto placed = cuda.place_weights(host, WeightRoles{{gate_up, down}, {}}, nullptr);
    if (c.fails) {
      ASSERT_FALSE(placed.ok());
      EXPECT_TRUE(optest::contains(placed.error().message, down)) << placed.error().message;
      EXPECT_TRUE(optest::contains(placed.error().message, "--mxfp4-order rows")) << placed.error().message;
      continue;
    }
    ASSERT_TRUE(placed.ok()) << placed.error().message;
    EXPECT_EQ(cuda.placed_expert_storage(ExpertStorage::mxfp4),
              c.tiled ? ExpertStorage::mxfp4_tiled : ExpertStorage::mxfp4);
    for (const auto& [name, t] : host) {
      const std::int64_t rows = t.size(0) * t.size(1), groups = t.size(2);
      Tensor want = t;
      if (c.tiled) {
        want = Tensor::zeros({t.size(0), t.size(1), mxfp4_tiled_groups(groups), 16}, DType::u8);
        D0_ASSERT_OK(mxfp4_to_tiles(static_cast<const std::uint8_t*>(t.raw()), rows, groups,
                                    static_cast<std::uint8_t*>(want.raw())));
      }
      auto got = cuda.download(placed->at(name));
      ASSERT_TRUE(got.ok()) << got.error().message;
      D0_ASSERT_OK(cuda.synchronize());
      ASSERT_EQ(got->shape(), want.shape()) << name;
      EXPECT_EQ(std::memcmp(got->raw(), want.raw(), want.nbytes()), 0) << name;
    }
  }
}

}  // namespace
}  // namespace day0
