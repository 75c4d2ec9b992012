// edit_logits_cuda against CpuOps::edit_logits (logit_edits.h): the same logits bit for bit on fresh random rows at
// gpt-oss's vocabulary, with more rows than a launch's 64 segments and rows of more edits than a launch's 2,048
// entries (an id's run cut between two launches), every kind, repeated ids, signed zeros, infinities and NaN among
// the edited logits, rows left unedited, and rows with a pending token (the step's tokens: an edited id, an unedited
// one, outside the vocabulary; rows of none to 4,500 edits, cut between ids over launches and segments). Exact: each
// edit is one IEEE float operation on both sides.
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
  Tensor tokens = Tensor::zeros({R}, DType::i32);
  for (std::int32_t r = 0; r < R; ++r) {
    if (r % 9 == 4) continue;  // unedited rows
    // 5,000 and 4,500: past a launch's entries. Rows r % 5 == 1 have a pending token.
    const bool pending = r % 5 == 1;
    const int n = r % 10 == 3 ? 5000 : r % 10 == 7 ? 300 : r % 15 == 1 ? 4500 : r % 15 == 6 ? 0 : 40;
    std::vector<LogitEdit> row;
    for (int i = 0; i < n; ++i) {
      const std::int32_t t = i % 4 == 0 ? i % 64 : id(rng);
      const auto kind = static_cast<LogitEditKind>(i % 3);
      row.push_back({t, kind, kind == LogitEditKind::repetition ? penalty(rng) : value(rng), value(rng)});
      if (i % 6 == 0) row.push_back({t, LogitEditKind::subtract, value(rng), value(rng)});  // the same id again
    }
    PendingToken p;
    if (pending) {
      p = {1, r % 4 == 1 ? 1.f : penalty(rng), r % 3 == 0 ? 0 : 1, value(rng)};
      // Its token: an edited id (a run to replace), an unedited one, a special value, or outside the vocabulary.
      const int which = (r / 5) % 4;
      tokens.data<std::int32_t>()[r] = which == 0 && !row.empty() ? row[row.size() / 2].id
                                       : which == 1               ? id(rng)
                                       : which == 2               ? r % 5
                                                                  : -1;
    }
    edits.add_row(r, std::move(row), p);
  }
  ASSERT_TRUE(edits.has_pending());
  Tensor d = upload(*ctx, x), d_tokens = upload(*ctx, tokens);
  CpuOps cpu;
  ASSERT_TRUE(cpu.edit_logits(x, edits, &tokens).ok());
  ASSERT_TRUE(edit_logits_cuda(d, edits, &d_tokens, ctx->stream()).ok());
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
  EXPECT_FALSE(edit_logits_cuda(d, bad, nullptr, ctx->stream()).ok());
  EXPECT_FALSE(edit_logits_cuda(d, edits, nullptr, ctx->stream()).ok()) << "pending tokens without tokens";
}

}  // namespace
}  // namespace day0
