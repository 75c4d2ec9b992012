// Ops::copy_columns_from_host (the used part of wide tables, executor_graphs.cpp): the first columns of each row
// copied, the rest of the destination as it was; bad shapes are errors that name them. CpuOps takes the default.
#include <gtest/gtest.h>

#include <vector>

#include "ops/cpu/cpu_ops.h"
#include "ops/op_test_util.h"

namespace day0 {
namespace {

TEST(CopyColumns, copies_the_first_columns_of_each_row_and_leaves_the_rest) {
  CpuOps cpu;
  Tensor host = Tensor::zeros({3, 5}, DType::i32), dst = Tensor::zeros({3, 5}, DType::i32);
  for (int i = 0; i < 15; ++i) host.data<std::int32_t>()[i] = i, dst.data<std::int32_t>()[i] = -7;
  ASSERT_TRUE(cpu.copy_columns_from_host(host, dst, 2).ok());
  const std::vector<std::int32_t> want = {0, 1, -7, -7, -7, 5, 6, -7, -7, -7, 10, 11, -7, -7, -7};
  EXPECT_EQ(std::vector<std::int32_t>(dst.data<std::int32_t>(), dst.data<std::int32_t>() + 15), want);
  ASSERT_TRUE(cpu.copy_columns_from_host(host, dst, 0).ok());  // nothing
  ASSERT_TRUE(cpu.copy_columns_from_host(host, dst, 5).ok());  // whole rows
  EXPECT_EQ(std::vector<std::int32_t>(dst.data<std::int32_t>(), dst.data<std::int32_t>() + 15),
            std::vector<std::int32_t>(host.data<std::int32_t>(), host.data<std::int32_t>() + 15));
  Tensor other = Tensor::zeros({3, 4}, DType::i32);
  const Status s = cpu.copy_columns_from_host(host, other, 2);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(optest::contains(s.error().message, "[3, 5], [3, 4] and 2 columns")) << s.error().message;
  EXPECT_FALSE(cpu.copy_columns_from_host(host, dst, 6).ok());
}

}  // namespace
}  // namespace day0
