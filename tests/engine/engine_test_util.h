// Test helpers for the engine: a collector of every request's updates, and a greedy request.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <vector>

#include "engine/engine.h"

namespace day0::enginetest {

// Collects every request's updates; wait() blocks until all submitted requests finished.
class Collector {
 public:
  UpdateFn sink(int key) {
    return [this, key](const RequestUpdate& u) {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& t : u.tokens) {
        tokens_[key].push_back(t.token);
        generated_[key].push_back(t);
      }
      if (u.finished) {
        final_[key] = u;
        cv_.notify_all();
      }
    };
  }
  void wait(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return final_.size() >= n; });
  }
  std::map<int, std::vector<std::int32_t>> tokens_;
  std::map<int, std::vector<GeneratedToken>> generated_;  // with their logprobs
  std::map<int, RequestUpdate> final_;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
};

inline GenerateRequest greedy_request(std::vector<std::int32_t> p, int max_tokens) {
  GenerateRequest r;
  r.prompt = std::move(p);
  r.sampling.temperature = 0;
  r.sampling.max_tokens = max_tokens;
  return r;
}

}  // namespace day0::enginetest
