// ConnectionPool: the threads that serve HTTP connections, one connection per thread for its whole life
// (a streamed response holds its thread until [DONE]). Bounded twice (RELIABILITY.md anti-pattern 3): at most
// `threads` connections are served at once and at most `max_pending` accepted ones wait for a thread; past that
// the accepting thread blocks, so further clients wait in the kernel's listen backlog instead of in our memory.
#pragma once

#include <httplib.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace day0 {

class ConnectionPool : public httplib::TaskQueue {
 public:
  ConnectionPool(int threads, int max_pending);
  ~ConnectionPool() override;

  void enqueue(std::function<void()> fn) override;
  // Runs every connection already accepted to its end, then joins the threads.
  void shutdown() override;

  int busy() const;

 private:
  void work();

  mutable std::mutex mutex_;
  std::condition_variable has_job_, has_room_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  std::size_t max_pending_;
  int busy_ = 0;
  bool shutdown_ = false;
};

}  // namespace day0
