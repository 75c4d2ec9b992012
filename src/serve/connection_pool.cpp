// The bounded connection pool.
#include "serve/connection_pool.h"

namespace day0 {

ConnectionPool::ConnectionPool(int threads, int max_pending)
    : max_pending_(static_cast<std::size_t>(max_pending < 1 ? 1 : max_pending)) {
  threads_.reserve(static_cast<std::size_t>(threads));
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { work(); });
}

ConnectionPool::~ConnectionPool() {
  if (!threads_.empty()) shutdown();
}

void ConnectionPool::enqueue(std::function<void()> fn) {
  std::unique_lock<std::mutex> lock(mutex_);
  // The job owns an accepted socket: it must run (and close it) even when we are shutting down.
  has_room_.wait(lock, [&] { return jobs_.size() < max_pending_ || shutdown_; });
  jobs_.push_back(std::move(fn));
  has_job_.notify_one();
}

void ConnectionPool::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    shutdown_ = true;
  }
  has_job_.notify_all();
  has_room_.notify_all();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

int ConnectionPool::busy() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return busy_;
}

void ConnectionPool::work() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      has_job_.wait(lock, [&] { return !jobs_.empty() || shutdown_; });
      if (jobs_.empty()) return;  // shutting down with nothing left
      job = std::move(jobs_.front());
      jobs_.pop_front();
      ++busy_;
      has_room_.notify_one();
    }
    job();
    std::lock_guard<std::mutex> lock(mutex_);
    --busy_;
  }
}

}  // namespace day0
