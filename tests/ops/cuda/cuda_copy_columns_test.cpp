// CudaOps::copy_columns_from_host: one strided transfer of each row's first columns; the rest of the device rows as
// they were. Skipped visibly without a GPU.
#include <gtest/gtest.h>

#include <vector>

#include "cuda_test_util.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/op_test_util.h"

namespace day0 {
namespace {

TEST(CudaCopyColumns, copies_the_first_columns_of_each_row_and_leaves_the_rest) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  const std::unique_ptr<CudaOps> ops = cudatest::make_cuda_ops();
  ASSERT_TRUE(ops);
  CudaOps& cuda = *ops;
  const std::int64_t rows = 64, W = 258, cols = 66;  // a batch-64 step's tables at 1,024 tokens of 4,128
  Tensor host = Tensor::zeros({rows, W}, DType::i32), before = Tensor::zeros({rows, W}, DType::i32);
  for (std::int64_t i = 0; i < rows * W; ++i) {
    host.data<std::int32_t>()[i] = static_cast<std::int32_t>(i);
    before.data<std::int32_t>()[i] = -static_cast<std::int32_t>(i) - 1;
  }
  auto dst = cuda.upload(before, "tables");
  ASSERT_TRUE(dst.ok()) << dst.error().message;
  D0_ASSERT_OK(cuda.copy_columns_from_host(host, *dst, cols));
  auto got = cuda.download(*dst);
  ASSERT_TRUE(got.ok()) << got.error().message;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < W; ++c) {
      const std::int32_t want = (c < cols ? host : before).data<std::int32_t>()[r * W + c];
      ASSERT_EQ(got->data<std::int32_t>()[r * W + c], want) << "row " << r << " column " << c;
    }
  EXPECT_FALSE(cuda.copy_columns_from_host(host, *dst, W + 1).ok());
}

}  // namespace
}  // namespace day0
