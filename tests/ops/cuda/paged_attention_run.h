// What the CUDA paged attention tests share: their case description, and one step: a PagedScenario uploaded,
// one paged_attention_cuda call with the given split (and sinks or not), the output downloaded (poisoned first,
// so unwritten rows show as NaN).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "cuda_test_util.h"
#include "ops/cuda/attention_cuda.h"
#include "ops/paged_kv_scenario.h"

namespace day0::cudatest {

// A scenario to make: heads and window, block size, and per sequence its length and how many of its last
// positions are queries in the step.
struct PagedCase {
  AttentionParams p;
  std::int64_t block_size;
  std::vector<std::int64_t> lengths, queries;
};

inline Tensor run_paged_attention(CudaContext& ctx, const optest::PagedScenario& sc, bool sinks,
                                  const AttentionSplit& split) {
  Tensor out = poisoned(ctx, sc.want.shape(), DType::f32);
  PagedKv kv{upload(ctx, sc.tables), upload(ctx, sc.q_seq), sc.block_size};
  const Status st =
      paged_attention_cuda(upload(ctx, sc.q), upload(ctx, sc.k_pool), upload(ctx, sc.v_pool), upload(ctx, sc.q_pos), kv,
                           sinks ? upload(ctx, sc.sinks) : Tensor(), sc.p, out, ctx.stream(), split);
  EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message);
  return download(ctx, out);
}

}  // namespace day0::cudatest
