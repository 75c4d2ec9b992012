// DeviceArena: bump allocation, 256-byte alignment, capacity errors, mark/release and the used/peak report.
// Bookkeeping runs anywhere over a host buffer (no pointer is dereferenced); the cudaMalloc path needs the GPU.
#include "ops/cuda/device_arena.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "ops/cuda/cuda_context.h"
#include "ops/op_test_util.h"
#include "quant/mxfp4.h"

namespace day0 {
namespace {

using optest::contains;

std::uintptr_t addr(const Tensor& t) { return reinterpret_cast<std::uintptr_t>(t.raw()); }

TEST(CudaArena, allocations_are_256_byte_aligned_contiguous_cuda_tensors_even_over_an_unaligned_base) {
  std::vector<char> host(64 * 1024);
  auto arena = DeviceArena::over(host.data() + 3, host.size() - 3);  // deliberately misaligned base
  for (const Shape& shape : {Shape{1}, Shape{3, 5}, Shape{7}, Shape{2, 3, 4}}) {
    auto t = arena->allocate(shape, DType::bf16, "t");
    ASSERT_TRUE(t.ok()) << t.error().message;
    EXPECT_EQ(addr(*t) % DeviceArena::kAlignment, 0u) << shape_to_string(shape);
    EXPECT_EQ(t->device(), Device::cuda);
    EXPECT_EQ(t->shape(), shape);
    EXPECT_TRUE(t->is_contiguous());
  }
}

TEST(CudaArena, consecutive_allocations_do_not_overlap_and_used_counts_padding) {
  std::vector<char> host(4096);
  auto arena = DeviceArena::over(host.data(), host.size(), Device::cpu);
  auto a = arena->allocate({10}, DType::f32, "a");  // 40 bytes
  auto b = arena->allocate({1}, DType::u8, "b");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_GE(addr(*b), addr(*a) + 40);
  EXPECT_EQ(addr(*b) - addr(*a), 256u);  // padded to the next 256-byte boundary
  EXPECT_EQ(arena->used_bytes(), (addr(*b) - reinterpret_cast<std::uintptr_t>(host.data())) + 1);
}

TEST(CudaArena, out_of_capacity_is_an_error_naming_the_request_and_what_is_left) {
  std::vector<char> host(1024 + 256);
  char* base = host.data() + (256 - reinterpret_cast<std::uintptr_t>(host.data()) % 256) % 256;
  auto arena = DeviceArena::over(base, 1024);
  ASSERT_TRUE(arena->allocate({100}, DType::f32, "first").ok());  // 400 bytes, next offset 512
  auto big = arena->allocate({200}, DType::f32, "kv cache");      // 800 bytes > 512 left
  ASSERT_FALSE(big.ok());
  const std::string& msg = big.error().message;
  EXPECT_TRUE(contains(msg, "kv cache")) << msg;
  EXPECT_TRUE(contains(msg, "800 B")) << msg;
  EXPECT_TRUE(contains(msg, "512 B left")) << msg;
  EXPECT_EQ(arena->used_bytes(), 400u);  // a failed request changes nothing
  EXPECT_TRUE(arena->allocate({128}, DType::f32, "exact fit").ok());  // 512 bytes fit exactly
  EXPECT_EQ(arena->free_bytes(), 0u);
  EXPECT_FALSE(arena->allocate({1}, DType::u8, "one more byte").ok());
}

TEST(CudaArena, a_shape_with_a_negative_dimension_is_an_error) {
  std::vector<char> host(1024);
  auto arena = DeviceArena::over(host.data(), host.size());
  EXPECT_FALSE(arena->allocate({-1, 4}, DType::f32, "bad").ok());
}

TEST(CudaArena, release_rewinds_to_the_mark_and_peak_remembers_the_high_water_mark) {
  std::vector<char> host(8192);
  auto arena = DeviceArena::over(host.data(), host.size(), Device::cpu);
  ASSERT_TRUE(arena->allocate({64}, DType::f32, "weights").ok());
  const std::size_t after_weights = arena->used_bytes();
  const DeviceArena::Mark step = arena->mark();
  auto s1 = arena->allocate({256}, DType::f32, "scratch 1");
  ASSERT_TRUE(s1.ok());
  ASSERT_TRUE(arena->allocate({256}, DType::f32, "scratch 2").ok());
  const std::size_t high = arena->used_bytes();
  ASSERT_TRUE(arena->release(step).ok());
  EXPECT_EQ(arena->used_bytes(), after_weights);
  EXPECT_EQ(arena->peak_bytes(), high);
  // The next step reuses the same addresses: no memory grows per step.
  auto again = arena->allocate({256}, DType::f32, "scratch 1 again");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->raw(), s1->raw());
  EXPECT_TRUE(contains(arena->report(), "peak")) << arena->report();
}

TEST(CudaArena, releasing_a_mark_beyond_the_current_position_is_an_error) {
  std::vector<char> host(4096);
  auto arena = DeviceArena::over(host.data(), host.size());
  const DeviceArena::Mark start = arena->mark();
  ASSERT_TRUE(arena->allocate({16}, DType::f32, "x").ok());
  const DeviceArena::Mark later = arena->mark();
  ASSERT_TRUE(arena->release(start).ok());
  const Status st = arena->release(later);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(contains(st.error().message, "out of order")) << st.error().message;
}

TEST(CudaArena, create_takes_one_device_allocation_and_reports_its_capacity) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto arena = DeviceArena::create(std::size_t(64) << 20);
  ASSERT_TRUE(arena.ok()) << arena.error().message;
  EXPECT_EQ((*arena)->capacity_bytes(), std::size_t(64) << 20);
  auto t = (*arena)->allocate({1000, 1000}, DType::f32, "t");
  ASSERT_TRUE(t.ok()) << t.error().message;
  cudaPointerAttributes attr{};
  ASSERT_EQ(cudaPointerGetAttributes(&attr, t->raw()), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeDevice);
  EXPECT_FALSE((*arena)->allocate({64, 1024, 1024}, DType::u8, "too big").ok());
}

TEST(CudaArena, an_impossible_arena_is_an_error_not_a_crash) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto arena = DeviceArena::create(std::size_t(1) << 50);  // 1 PiB
  ASSERT_FALSE(arena.ok());
  EXPECT_TRUE(contains(arena.error().message, "cudaMalloc")) << arena.error().message;
  // The failed allocation must not poison later CUDA calls.
  auto ok = DeviceArena::create(std::size_t(1) << 20);
  EXPECT_TRUE(ok.ok()) << ok.error().message;
}

TEST(CudaContext, context_summarises_the_device_and_carves_the_cublas_workspace_from_the_arena) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  CudaContextOptions options;
  options.arena_bytes = std::size_t(128) << 20;
  auto ctx = CudaContext::create(options);
  ASSERT_TRUE(ctx.ok()) << ctx.error().message;
  const std::string summary = (*ctx)->device_summary();
  EXPECT_TRUE(contains(summary, "SMs")) << summary;
  EXPECT_GE((*ctx)->arena().used_bytes(), options.cublas_workspace_bytes);
  EXPECT_NE((*ctx)->cublas(), nullptr);
  EXPECT_TRUE((*ctx)->synchronize().ok());
  std::printf("[ device ] %s\n", summary.c_str());
}

}  // namespace
}  // namespace day0
