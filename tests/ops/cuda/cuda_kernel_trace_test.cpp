// KernelTrace (CUPTI) on known launches: the fill kernel run three times shows up once, three calls, with device
// time; a second trace cannot start while one runs, and one started after the first sees only its own launches;
// copies and fills are rows of their own; the host's runtime calls are totalled by name, with the gaps between them.
// kernel_totals' exposed times on made-up launches run everywhere; the rest is skipped visibly without a GPU.
#include <gtest/gtest.h>

#include <vector>

#include "cuda_test_util.h"
#include "ops/cuda/kernel_trace.h"
#include "ops/cuda/random_fill_cuda.h"

namespace day0 {
namespace {

TEST(CudaKernelTrace, exposed_time_is_each_launchs_part_of_the_timeline_past_every_earlier_end) {
  // a [0, 10); b [4, 16) overlaps it (a dependent launch waiting); a again [20, 25) after an idle gap; c [24, 30)
  // launched before that one ends. Listed out of order, as CUPTI's buffers may be. Times in ns, as CUPTI's clock.
  const std::vector<KernelLaunch> launches{{"c", "1x1x1", 24000, 30000},
                                           {"a", "1x1x1", 0, 10000},
                                           {"a", "1x1x1", 20000, 25000},
                                           {"b", "2x1x1", 4000, 16000}};
  const std::vector<KernelTime> totals = kernel_totals(launches);
  ASSERT_EQ(totals.size(), 3u);
  auto row = [&](const char* name) {
    for (const KernelTime& k : totals)
      if (k.name == name) return k;
    ADD_FAILURE() << "no row for " << name;
    return KernelTime{};
  };
  EXPECT_EQ(totals[0].name, "a");  // longest total first: a 15 us, b 12, c 6
  EXPECT_EQ(row("a").calls, 2);
  EXPECT_NEAR(row("a").seconds, 15e-6, 1e-12);
  EXPECT_NEAR(row("a").exposed_seconds, 15e-6, 1e-12);  // 10 + 5: its second run started after the gap
  EXPECT_NEAR(row("b").seconds, 12e-6, 1e-12);
  EXPECT_NEAR(row("b").exposed_seconds, 6e-6, 1e-12);  // only [10, 16) lies past a's end
  EXPECT_NEAR(row("c").exposed_seconds, 5e-6, 1e-12);  // [25, 30)
  double exposed = 0;
  for (const KernelTime& k : totals) exposed += k.exposed_seconds;
  EXPECT_NEAR(exposed, 26e-6, 1e-12);  // the 30 us span less the idle [16, 20)
  // That idle gap is charged to the launch that ended it (a's second run); no other launch started past every
  // earlier one's end.
  EXPECT_NEAR(row("a").idle_before_seconds, 4e-6, 1e-12);
  EXPECT_EQ(row("b").idle_before_seconds, 0.0);
  EXPECT_EQ(row("c").idle_before_seconds, 0.0);
}

TEST(CudaKernelTrace, idle_before_counts_only_gaps_no_earlier_started_kernel_covers) {
  // x [0, 100) runs long; y [50, 60) ends first but x still runs; z [120, 130) after a 20 us gap; w [125, 140).
  const std::vector<KernelLaunch> launches{{"y", "1x1x1", 50000, 60000},
                                           {"z", "1x1x1", 120000, 130000},
                                           {"x", "1x1x1", 0, 100000},
                                           {"w", "1x1x1", 125000, 140000}};
  double idle = 0;
  for (const KernelTime& k : kernel_totals(launches)) {
    idle += k.idle_before_seconds;
    if (k.name == "z") {
      EXPECT_NEAR(k.idle_before_seconds, 20e-6, 1e-12);
    }
  }
  EXPECT_NEAR(idle, 20e-6, 1e-12);  // y's start lies inside x: no gap there
}

TEST(CudaKernelTrace, names_each_kernels_largest_idle_gap_and_the_kernel_it_followed) {
  // z runs twice: after a 5 us gap behind x [0, 100) (y [50, 60) ended earlier, inside x), then a 30 us gap behind w.
  const std::vector<KernelLaunch> launches{{"y", "1x1x1", 50000, 60000},
                                           {"z", "1x1x1", 105000, 110000},
                                           {"x", "2x1x1", 0, 100000},
                                           {"w", "1x1x1", 110000, 120000},
                                           {"z", "1x1x1", 150000, 160000}};
  for (const KernelTime& k : kernel_totals(launches)) {
    if (k.name == "z") {
      EXPECT_NEAR(k.idle_before_seconds, 35e-6, 1e-12);
      EXPECT_NEAR(k.largest_idle_before_seconds, 30e-6, 1e-12);
      EXPECT_EQ(k.largest_idle_after, "w 1x1x1");
    } else {
      EXPECT_EQ(k.largest_idle_before_seconds, 0.0) << k.name;
      EXPECT_EQ(k.largest_idle_after, "") << k.name;
    }
  }
}

TEST(CudaKernelTrace, host_calls_total_by_name_and_gaps_are_per_thread) {
  // Thread 1: copy [0, 10), copy [12, 20), launch [920, 925) after 900 us of host work; thread 2: launch [5, 30),
  // launch [40, 45) (a 10 us gap; its [5, 30) overlaps thread 1's gap, which is not thread 2's).
  const std::vector<HostCall> calls{{"cudaLaunchKernel", 2, 40000, 45000},
                                    {"cudaMemcpyAsync", 1, 0, 10000},
                                    {"cudaLaunchKernel", 1, 920000, 925000},
                                    {"cudaMemcpyAsync", 1, 12000, 20000},
                                    {"cudaLaunchKernel", 2, 5000, 30000}};
  const HostSummary h = host_summary(calls);
  ASSERT_EQ(h.calls.size(), 2u);
  EXPECT_EQ(h.calls[0].name, "cudaLaunchKernel");  // 35 us against 18
  EXPECT_EQ(h.calls[0].calls, 3);
  EXPECT_NEAR(h.calls[0].seconds, 35e-6, 1e-12);
  EXPECT_NEAR(h.calls[0].largest_seconds, 25e-6, 1e-12);
  EXPECT_NEAR(h.calls[1].seconds, 18e-6, 1e-12);
  ASSERT_EQ(h.gaps.size(), 3u);  // 900, 10 and 2 us
  EXPECT_NEAR(h.gaps[0].seconds, 900e-6, 1e-12);
  EXPECT_EQ(h.gaps[0].after, "cudaMemcpyAsync");
  EXPECT_EQ(h.gaps[0].before, "cudaLaunchKernel");
  EXPECT_NEAR(h.gaps[1].seconds, 10e-6, 1e-12);
  EXPECT_NEAR(h.gaps[2].seconds, 2e-6, 1e-12);
}

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

TEST(CudaKernelTrace, copies_and_fills_are_rows_of_their_own) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = cudatest::make_context();
  ASSERT_TRUE(ctx);
  Tensor a = cudatest::poisoned(*ctx, {1 << 20}, DType::f32), b = cudatest::poisoned(*ctx, {1 << 20}, DType::f32);
  ASSERT_EQ(cudaStreamSynchronize(ctx->stream()), cudaSuccess);
  auto trace = KernelTrace::start();
  ASSERT_TRUE(trace.ok()) << trace.error().message;
  ASSERT_EQ(cudaMemsetAsync(a.raw(), 0, a.nbytes(), ctx->stream()), cudaSuccess);
  for (int i = 0; i < 2; ++i)
    ASSERT_EQ(cudaMemcpyAsync(b.raw(), a.raw(), a.nbytes(), cudaMemcpyDeviceToDevice, ctx->stream()), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(ctx->stream()), cudaSuccess);
  auto rows = (*trace)->finish();
  ASSERT_TRUE(rows.ok()) << rows.error().message;
  std::int64_t memsets = 0, copies = 0;
  for (const KernelTime& k : *rows) {
    if (k.name == "[memset]") memsets += k.calls;
    if (k.name == "[memcpy DtoD]") copies += k.calls;
  }
  EXPECT_EQ(memsets, 1);
  EXPECT_EQ(copies, 2);
  // The host's calls: the fill and the two copies among them, by their runtime names.
  std::int64_t host_copies = 0;
  for (const HostCallTime& c : (*trace)->host().calls)
    if (c.name.find("cudaMemcpyAsync") == 0) host_copies += c.calls;
  EXPECT_EQ(host_copies, 2);
}

}  // namespace
}  // namespace day0
