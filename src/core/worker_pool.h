// WorkerPool: parallel_for_parts (core/parallel_for.h) on threads started once, for loops that run every engine
// step: starting and joining up to 15 threads per step cost more than the rows they sampled.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace day0 {

class WorkerPool {
 public:
  // `threads` parts at most (the caller's thread runs part 0, so threads - 1 workers are started).
  explicit WorkerPool(int threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // fn(part, begin, end) over [0, n) in at most threads() contiguous parts, part in [0, threads()), as
  // parallel_for_parts splits it; below `serial_below` items fn runs once over everything, as part 0, on this
  // thread. Returns when every part has. One caller at a time.
  void run_parts(std::int64_t n, std::int64_t serial_below,
                 const std::function<void(int, std::int64_t, std::int64_t)>& fn);

 private:
  void work(int part);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_, done_;
  const std::function<void(int, std::int64_t, std::int64_t)>* job_ = nullptr;
  std::int64_t n_ = 0;
  int parts_ = 0;            // of the current job (workers with part >= parts_ sit it out)
  int pending_ = 0;          // workers still running the current job
  std::uint64_t round_ = 0;  // bumped per job: a worker runs each round once
  bool stopping_ = false;
};

}  // namespace day0
