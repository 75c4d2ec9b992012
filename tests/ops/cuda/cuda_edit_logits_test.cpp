// edit_logits_cuda against CpuOps::edit_logits (logit_edits.h): the same logits bit for bit on fresh random rows at
// gpt-oss's vocabulary, with more rows than a launch's 64 segments and rows of more edits than a launch's 2,048
// entries (an id's run cut between two launches), every kind, repeated ids, signed zeros, infinities and NaN among
// the edited logits, and rows left unedited. Exact: each edit is one IEEE float operation on both sides.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/op_test_util.h"

namespace day0 {
namespace {

using cudatest::download;
using cudatest::make_context;
using cudatest::upload;
using optest::random_f32;

TEST(CudaEditLogits, edits_every_row_as_the_host_does_bit_for_bit) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device on this machine: runs on the GPU machine";
  auto ctx = make_context();
  ASSERT_TRUE(ctx);
  std::mt19937 rng(4242);
  constexpr std::int64_t R = 80, V = 201088;
  Tensor x = random_f32({R, V}, rng, -8.f, 8.f);
  std::uniform_int_distribution<std::int32_t> id(0, static_cast<std::int32_t>(V) - 1);
  std::uniform_real_distribution<float> value(-3.f, 3.f), penalty(0.5f, 2.f);
  for (std::int64_t r = 0; r < R; ++r) {  // special values where the edits land too
    float* row = x.data<float>() + r * V;
    for (std::int32_t i = 0; i < 64; ++i) row[i] = std::vector<float>{0.f, -0.f, INFINITY, -INFINITY, NAN}[i % 5];
  }
  LogitEdits edits;
  for (std::int32_t r = 0; r < R; ++r) {
    if (r % 9 == 4) continue;  // unedited rows
    const int n = r % 10 == 3 ? 5000 : r % 10 == 7 ? 300 : 40;  // 5,000: past a launch's entries
    std::vector<LogitEdit> row;
    for (int i = 0; i < n; ++i) {
      const std::int32_t t = i % 4 == 0 ? i % 64 : id(rng);
      const auto kind = static_cast<LogitEditKind>(i % 3);
      row.push_back({t, kind, kind == LogitEditKind::repetition ? penalty(rng) : value(rng)});
      if (i % 6 == 0) row.push_back({t, LogitEditKind::subtract, value(rng)});  // the same id again
    }
    edits.add_row(r, std::move(row));
  }
  Tensor d = upload(*ctx, x);
  CpuOps cpu;
  ASSERT_TRUE(cpu.edit_logits(x, edits).ok());
  ASSERT_TRUE(edit_logits_cuda(d, edits, ctx->stream()).ok());
  const Tensor got = download(*ctx, d);
  int diff = 0;
  for (std::int64_t i = 0; i < R * V && diff < 10; ++i) {
    std::uint32_t a, b;
    std::memcpy(&a, x.data<float>() + i, 4);
    std::memcpy(&b, got.data<float>() + i, 4);
    if (a != b && !(std::isnan(x.data<float>()[i]) && std::isnan(got.data<float>()[i]))) {
      ++diff;
      ADD_FAILURE() << "row " << i / V << " id " << i % V << ": host " << x.data<float>()[i] << " device "
                    << got.data<float>()[i];
    }
  }
  LogitEdits bad;
  bad.add_row(0, {{static_cast<std::int32_t>(V), LogitEditKind::add, 1.f}});
  EXPECT_FALSE(edit_logits_cuda(d, bad, ctx->stream()).ok());
}

}  // namespace
}  // namespace day0
