// parallel_for: a loop over [0, n) split into contiguous parts, one thread each (the caller runs part 0).
#pragma once

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

namespace day0 {

// Runs fn(part, begin, end) over [0, n) split into at most `threads` contiguous parts, part in [0, threads).
// Below `serial_below` items a thread is not worth starting: fn runs once over everything, as part 0.
template <class Fn>
void parallel_for_parts(int threads, std::int64_t n, std::int64_t serial_below, const Fn& fn) {
  const int t = n < serial_below ? 1 : static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(threads, n)));
  std::vector<std::thread> pool;
  pool.reserve(t - 1);
  for (int p = 1; p < t; ++p) pool.emplace_back([&, p] { fn(p, n * p / t, n * (p + 1) / t); });
  fn(0, std::int64_t{0}, n / t);
  for (auto& th : pool) th.join();
}

// The same for a body that does not care which part it runs.
template <class Fn>
void parallel_for(int threads, std::int64_t n, std::int64_t serial_below, const Fn& fn) {
  parallel_for_parts(threads, n, serial_below, [&](int, std::int64_t b, std::int64_t e) { fn(b, e); });
}

}  // namespace day0
