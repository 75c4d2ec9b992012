// CudaOps::queue_fence / wait_fence: a fence waits for the work queued before it and reports that work's faults
// alone (a bad token id queued after it surfaces at the next fence, not this one); a fault clears once reported;
// fences older than the slots kept, and ones never queued, are errors that say so.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "ops/cuda/cuda_ops.h"

namespace day0 {
namespace {

Tensor host_ids(const std::vector<std::int32_t>& ids) {
  Tensor t = Tensor::zeros({static_cast<std::int64_t>(ids.size())}, DType::i32);
  for (size_t i = 0; i < ids.size(); ++i) t.data<std::int32_t>()[i] = ids[i];
  return t;
}

TEST(CudaFences, a_fence_reports_the_faults_of_the_work_before_it_alone) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  const std::unique_ptr<CudaOps> ops = cudatest::make_cuda_ops();
  ASSERT_TRUE(ops);
  auto table = ops->allocate({16, 8}, DType::f32, "table");
  auto out = ops->allocate({2, 8}, DType::f32, "rows");
  ASSERT_TRUE(table.ok() && out.ok());
  auto good = ops->upload(host_ids({1, 15}), "good ids");
  auto bad = ops->upload(host_ids({3, 16}), "an id past the table");
  ASSERT_TRUE(good.ok() && bad.ok());

  D0_ASSERT_OK(ops->embedding(*table, *good, *out));
  auto before = ops->queue_fence();
  ASSERT_TRUE(before.ok()) << before.error().message;
  D0_ASSERT_OK(ops->embedding(*table, *bad, *out));
  auto after = ops->queue_fence();
  ASSERT_TRUE(after.ok()) << after.error().message;
  EXPECT_GT(after->serial, before->serial);

  D0_EXPECT_OK(ops->wait_fence(*before));
  const Status fault = ops->wait_fence(*after);
  ASSERT_FALSE(fault.ok());
  EXPECT_NE(fault.error().message.find("token id outside the vocabulary"), std::string::npos) << fault.error().message;
  // Reported once: the flags are clear for what follows.
  D0_ASSERT_OK(ops->embedding(*table, *good, *out));
  auto clean = ops->queue_fence();
  ASSERT_TRUE(clean.ok());
  D0_EXPECT_OK(ops->wait_fence(*clean));
  D0_EXPECT_OK(ops->synchronize());

  // Four fences are kept: the fifth queued since retires the oldest.
  std::vector<QueuedFence> fences;
  for (int i = 0; i < 5; ++i) {
    auto f = ops->queue_fence();
    ASSERT_TRUE(f.ok());
    fences.push_back(*f);
  }
  const Status stale = ops->wait_fence(fences[0]);
  ASSERT_FALSE(stale.ok());
  EXPECT_NE(stale.error().message.find("is not one of the last 4 queued"), std::string::npos) << stale.error().message;
  for (int i = 1; i < 5; ++i) D0_EXPECT_OK(ops->wait_fence(fences[i]));
  EXPECT_FALSE(ops->wait_fence(QueuedFence{}).ok());
  EXPECT_FALSE(ops->wait_fence(QueuedFence{fences.back().serial + 1}).ok());
}

}  // namespace
}  // namespace day0
