// PinnedDownloads: a pinned buffer goes out again only once nothing borrows it, so a download held by the caller
// is never overwritten by the next one; oversized requests stay pageable.
#include "ops/cuda/pinned_downloads.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "ops/cuda/cuda_context.h"
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

}  // namespace
}  // namespace day0
