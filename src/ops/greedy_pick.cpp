// greedy_pick: see greedy_pick.h.
#include "ops/greedy_pick.h"

#include <algorithm>
#include <limits>

namespace day0 {

GreedyPick greedy_pick(std::span<const float> logits) {
  constexpr std::size_t kBlock = 256;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const float* x = logits.data();
  const std::size_t n = logits.size();
  float best = -kInf;
  std::size_t best_block = 0, bad_block = n;
  bool above_minus_inf = false;
  for (std::size_t b = 0; b < n; b += kBlock) {
    const std::size_t e = std::min(n, b + kBlock);
    float m = -kInf;
    std::int32_t bad = 0, finite = 0;
    for (std::size_t i = b; i < e; ++i) {
      const float v = x[i];
      m = v > m ? v : m;
      bad += !(v < kInf);  // NaN or +inf
      finite += v > -kInf;
    }
    if (bad > 0 && bad_block == n) bad_block = b;
    above_minus_inf = above_minus_inf || finite > 0;
    if (m > best) best = m, best_block = b;
  }
  GreedyPick pick;
  if (bad_block < n) {
    std::size_t i = bad_block;
    while (x[i] < kInf) ++i;  // the block holds it
    pick.unusable = static_cast<std::int32_t>(i);
    return pick;
  }
  if (!above_minus_inf) {
    pick.unusable = -2;
    return pick;
  }
  std::size_t i = best_block;
  while (!(x[i] == best)) ++i;  // the block holds it
  pick.token = static_cast<std::int32_t>(i);
  return pick;
}

Status greedy_pick_status(const GreedyPick& pick, const std::string& what) {
  if (pick.unusable == -1) return Status::success();
  if (pick.unusable >= 0)
    return make_error(what + ": logit of token " + std::to_string(pick.unusable) + " is NaN or +inf");
  return make_error(what + ": every logit is -inf");
}

}  // namespace day0
