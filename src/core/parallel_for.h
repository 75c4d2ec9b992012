// parallel_for: a loop over [0, n) split into contiguous parts, one thread each (the caller runs part 0).
#pragma once

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

namespace day0 {

// How [0, n) is split over at most `threads` threads: below `serial_below` items a thread is not worth starting
// (one part), else one part a thread, no part empty; part p is [part_begin(n, p, parts), part_begin(n, p + 1, parts)).
inline int part_count(int threads, std::int64_t n, std::int64_t serial_below) {
  return n < serial_below ? 1 : static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(threads, n)));
}
inline std::int64_t part_begin(std::int64_t n, int part, int parts) { return n * part / parts; }

// Runs fn(part, begin, end) over [0, n) split into part_count(threads, n, serial_below) contiguous parts, part 0 on
// the calling thread.
template <class Fn>
void parallel_for_parts(int threads, std::int64_t n, std::int64_t serial_below, const Fn& fn) {
  const int t = part_count(threads, n, serial_below);
  std::vector<std::thread> pool;
  pool.reserve(t - 1);
  for (int p = 1; p < t; ++p) pool.emplace_back([&, p] { fn(p, part_begin(n, p, t), part_begin(n, p + 1, t)); });
  fn(0, std::int64_t{0}, part_begin(n, 1, t));
  for (auto& th : pool) th.join();
}

// The same for a body that does not care which part it runs.
template <class Fn>
void parallel_for(int threads, std::int64_t n, std::int64_t serial_below, const Fn& fn) {
  parallel_for_parts(threads, n, serial_below, [&](int, std::int64_t b, std::int64_t e) { fn(b, e); });
}

}  // namespace day0
