#include "core/worker_pool.h"

#include "core/parallel_for.h"

namespace day0 {

WorkerPool::WorkerPool(int threads) {
  for (int p = 1; p < std::max(1, threads); ++p) workers_.emplace_back([this, p] { work(p); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  start_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void WorkerPool::run_parts(std::int64_t n, std::int64_t serial_below,
                           const std::function<void(int, std::int64_t, std::int64_t)>& fn) {
  const int t = part_count(threads(), n, serial_below);
  if (t == 1) {
    fn(0, 0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    n_ = n;
    parts_ = t;
    pending_ = t - 1;
    ++round_;
  }
  start_.notify_all();
  fn(0, 0, part_begin(n, 1, t));
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
}

void WorkerPool::work(int part) {
  std::uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    start_.wait(lock, [&] { return stopping_ || round_ != seen; });
    if (stopping_) return;
    seen = round_;
    if (part >= parts_) continue;  // this job has fewer parts than the pool has threads
    const auto* fn = job_;
    const std::int64_t n = n_;
    const int t = parts_;
    lock.unlock();
    (*fn)(part, part_begin(n, part, t), part_begin(n, part + 1, t));
    lock.lock();
    if (--pending_ == 0) done_.notify_one();
  }
}

}  // namespace day0
