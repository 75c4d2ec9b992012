// KernelTrace (CUPTI) on known launches: the fill kernel run three times shows up once, three calls, with device
// time; a second trace cannot start while one runs, and one started after the first sees only its own launches.
// Skipped visibly without a GPU.
#include <gtest/gtest.h>

#include "cuda_test_util.h"
#include "ops/cuda/kernel_trace.h"
#include "ops/cuda/random_fill_cuda.h"

namespace day0 {
namespace {

TEST(CudaKernelTrace, counts_each_kernel_launch_and_its_device_time_by_name) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = cudatest::make_context();
  ASSERT_TRUE(ctx);
  Tensor t = cudatest::poisoned(*ctx, {1 << 20}, DType::f32);
  D0_ASSERT_OK(fill_uniform_cuda(t, 1, 1.f, ctx->stream()));  // loaded before the trace: no first-launch cost
  ASSERT_EQ(cudaStreamSynchronize(ctx->stream()), cudaSuccess);
  auto trace = KernelTrace::start();
  ASSERT_TRUE(trace.ok()) << trace.error().message;
  auto second = KernelTrace::start();
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.error().message.find("already running"), std::string::npos) << second.error().message;
  for (std::uint64_t seed : {2, 3, 4}) D0_ASSERT_OK(fill_uniform_cuda(t, seed, 1.f, ctx->stream()));
  ASSERT_EQ(cudaStreamSynchronize(ctx->stream()), cudaSuccess);
  auto kernels = (*trace)->finish();
  ASSERT_TRUE(kernels.ok()) << kernels.error().message;
  int found = 0;
  for (const KernelTime& k : *kernels) {
    if (k.name.find("fill_uniform_kernel") == std::string::npos) continue;
    ++found;
    EXPECT_EQ(k.calls, 3) << k.name;  // one grid for the three launches: one row
    EXPECT_NE(k.grid.find('x'), std::string::npos) << k.grid;
    EXPECT_GT(k.seconds, 0.0) << k.name;
    EXPECT_EQ(k.name.find('('), std::string::npos) << "parameter list not cut: " << k.name;
  }
  EXPECT_EQ(found, 1);
  // A second trace after the first (bench --kernels traces each decode point): only its own launches.
  auto again = KernelTrace::start();
  ASSERT_TRUE(again.ok()) << again.error().message;
  for (std::uint64_t seed : {5, 6}) D0_ASSERT_OK(fill_uniform_cuda(t, seed, 1.f, ctx->stream()));
  ASSERT_EQ(cudaStreamSynchronize(ctx->stream()), cudaSuccess);
  auto second_kernels = (*again)->finish();
  ASSERT_TRUE(second_kernels.ok()) << second_kernels.error().message;
  std::int64_t calls = 0;
  for (const KernelTime& k : *second_kernels)
    if (k.name.find("fill_uniform_kernel") != std::string::npos) calls += k.calls;
  EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace day0
