// WorkerPool: every item runs once, in the parts parallel_for_parts would give, on distinct threads, round after
// round, with fewer parts than threads, serially below the threshold.
#include "core/worker_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include "core/parallel_for.h"

namespace day0 {
namespace {

TEST(WorkerPool, runs_every_item_once_in_parallel_for_parts_parts_round_after_round) {
  WorkerPool pool(4);
  EXPECT_EQ(pool.threads(), 4);
  for (std::int64_t n : {0, 1, 3, 4, 7, 64, 1001}) {
    for (int round = 0; round < 3; ++round) {
      SCOPED_TRACE(::testing::Message() << "n " << n << " round " << round);
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::mutex mu;
      std::set<std::tuple<int, std::int64_t, std::int64_t>> got, want;
      std::set<std::thread::id> ids;
      pool.run_parts(n, 4, [&](int part, std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) ++hits[static_cast<size_t>(i)];
        std::lock_guard<std::mutex> lock(mu);
        got.insert({part, b, e});
        ids.insert(std::this_thread::get_id());
      });
      parallel_for_parts(4, n, 4, [&](int part, std::int64_t b, std::int64_t e) {
        std::lock_guard<std::mutex> lock(mu);
        want.insert({part, b, e});
      });
      EXPECT_EQ(got, want);
      for (const auto& h : hits) EXPECT_EQ(h.load(), 1);
      EXPECT_EQ(ids.size(), got.size());  // each part on its own thread
    }
  }
}

TEST(WorkerPool, a_pool_of_one_runs_on_the_caller_and_destruction_joins_idle_workers) {
  WorkerPool one(1);
  std::thread::id where;
  one.run_parts(100, 1, [&](int, std::int64_t, std::int64_t) { where = std::this_thread::get_id(); });
  EXPECT_EQ(where, std::this_thread::get_id());
  { WorkerPool idle(8); }  // never used: must not hang
}

}  // namespace
}  // namespace day0
