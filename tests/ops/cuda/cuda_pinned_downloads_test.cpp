// PinnedDownloads: a pinned buffer goes out again only once nothing borrows it, so a download held by the caller
// is never overwritten by the next one; oversized requests stay pageable. And CudaOps::start_download, which lands
// in them without waiting: each download holds the bytes its tensor had where it was queued.
#include "ops/cuda/pinned_downloads.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "ops/cuda/cuda_context.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/op_test_util.h"
#include "quant/mxfp4.h"

namespace day0 {
namespace {

TEST(CudaPinnedDownloads, a_borrowed_buffer_is_not_handed_out_again_and_a_returned_one_is) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  PinnedDownloads pool;
  auto a = pool.take(1000);
  ASSERT_TRUE(a.ok()) << a.error().message;
  ASSERT_NE(*a, nullptr);
  cudaPointerAttributes attr{};
  ASSERT_EQ(cudaPointerGetAttributes(&attr, a->get()), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeHost);  // page-locked, not pageable ("unregistered")
  std::memset(a->get(), 7, 1000);
  auto b = pool.take(1000);
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_NE(b->get(), a->get());
  EXPECT_EQ(static_cast<unsigned char*>(a->get())[999], 7);
  void* const first = a->get();
  a->reset();
  auto c = pool.take(4000);  // fits the first buffer (1 MiB at least), which is free again
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->get(), first);
}

TEST(CudaPinnedDownloads, more_borrowers_than_pooled_buffers_each_get_their_own_and_oversized_stays_pageable) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  PinnedDownloads pool;
  std::vector<std::shared_ptr<void>> held;
  for (std::size_t i = 0; i < PinnedDownloads::kMaxBuffers + 2; ++i) {
    auto t = pool.take(std::size_t(3) << 20);
    ASSERT_TRUE(t.ok()) << t.error().message;
    for (const auto& h : held) EXPECT_NE(h.get(), t->get());
    held.push_back(*t);
  }
  auto big = pool.take(PinnedDownloads::kMaxPooledBytes + 1);
  ASSERT_TRUE(big.ok()) << big.error().message;
  EXPECT_EQ(*big, nullptr);
}

TEST(CudaPinnedDownloads, started_downloads_hold_what_their_tensor_held_when_queued_once_synchronized) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  const std::unique_ptr<CudaOps> ops = cudatest::make_cuda_ops();
  ASSERT_TRUE(ops);
  CudaOps& cuda = *ops;
  std::mt19937 rng(8117);
  // 64 x 4,096 f32 (1 MiB, a pooled buffer's size) and 600 x 60,000 (137 MiB: past the pool, pageable).
  for (const Shape& shape : {Shape{64, 4096}, Shape{600, 60000}}) {
    const Tensor first = optest::random_f32(shape, rng), second = optest::random_f32(shape, rng);
    auto a = cuda.upload(first, "first"), b = cuda.upload(second, "second");
    auto t = cuda.scratch(shape, DType::f32, "rewritten");
    ASSERT_TRUE(a.ok() && b.ok() && t.ok());
    // Each download queued behind the copy that fills t, and before the next copy rewrites it.
    ASSERT_TRUE(cuda.copy(*a, *t).ok());
    auto got_first = cuda.start_download(*t);
    ASSERT_TRUE(got_first.ok()) << got_first.error().message;
    ASSERT_TRUE(cuda.copy(*b, *t).ok());
    auto got_second = cuda.start_download(*t);
    ASSERT_TRUE(got_second.ok()) << got_second.error().message;
    ASSERT_TRUE(cuda.synchronize().ok());
    EXPECT_NE(got_first->raw(), got_second->raw());
    EXPECT_TRUE(cudatest::same_bits(*got_first, first)) << shape_to_string(shape);
    EXPECT_TRUE(cudatest::same_bits(*got_second, second)) << shape_to_string(shape);
  }
}

}  // namespace
}  // namespace day0
