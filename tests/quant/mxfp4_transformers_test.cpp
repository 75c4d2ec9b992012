// MXFP4 decode is bit-exact to transformers' own dequantisation: the fixture's reference/mxfp4_dequant
// holds the bf16 expert weights transformers 5.17 produced when loading the same blocks and scales.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "quant/mxfp4.h"

namespace day0 {
namespace {

const std::string kModel = std::string(D0_TEST_DATA) + "/gpt_oss_tiny";

TEST(Mxfp4Transformers, decode_of_every_expert_matrix_is_bit_identical_to_transformers_bf16) {
  auto ckpt = Checkpoint::open_dir(kModel);
  ASSERT_TRUE(ckpt.ok()) << ckpt.error().message;
  auto ref = SafetensorsFile::open(kModel + "/reference/mxfp4_dequant.safetensors");
  ASSERT_TRUE(ref.ok()) << ref.error().message;
  int checked = 0;
  for (int layer = 0; layer < 2; ++layer) {
    for (const char* which : {"gate_up_proj", "down_proj"}) {
      const std::string name = "model.layers." + std::to_string(layer) + ".mlp.experts." + which;
      auto blocks = ckpt->tensor(name + "_blocks");
      auto scales = ckpt->tensor(name + "_scales");
      ASSERT_TRUE(blocks.ok() && scales.ok()) << name;
      const TensorInfo* info = (*ref)->find(name);
      ASSERT_NE(info, nullptr) << name;
      // transformers keeps [E, in, out]; the checkpoint stores rows of [E, out, in].
      const Tensor expected = (*ref)->tensor(*info).clone();
      ASSERT_EQ(expected.dtype(), DType::bf16);
      const std::int64_t E = blocks->size(0), out = blocks->size(1), in = blocks->size(2) * kMxfp4GroupSize;
      ASSERT_EQ(expected.shape(), (Shape{E, in, out})) << name;
      std::vector<std::uint16_t> row(in);
      for (std::int64_t e = 0; e < E; ++e)
        for (std::int64_t r = 0; r < out; ++r) {
          const std::int64_t row_index = e * out + r;
          mxfp4_decode_row_bf16(blocks->data<std::uint8_t>() + row_index * in / 2,
                                scales->data<std::uint8_t>() + row_index * in / kMxfp4GroupSize, in, row.data());
          for (std::int64_t i = 0; i < in; ++i)
            ASSERT_EQ(row[i], expected.data<std::uint16_t>()[(e * in + i) * out + r])
                << name << " expert " << e << " row " << r << " input " << i;
          ++checked;
        }
    }
  }
  EXPECT_EQ(checked, 2 * 4 * (192 + 64));
}

}  // namespace
}  // namespace day0
