// token_cutoff: the radix descent the header describes, written as a device's passes compute it.
#include "ops/token_cutoff.h"

#include <array>

#include "ops/exp_nonpositive.h"

namespace day0 {
namespace {

// The first id in rank order, among those `within` keeps, whose inclusive measure reaches the target. The target
// comes from the candidates' total measure (known after the first pass's histogram).
template <class Measure, class Target>
TokenCutoff descend(const float* logits, std::int64_t vocab, const TokenCutoff& within, const Measure& measure,
                    const Target& target_of) {
  std::uint32_t prefix = 0, mask = 0;
  std::uint64_t above = 0, target = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    std::array<std::uint64_t, 256> count{}, mass{};
    for (std::int64_t i = 0; i < vocab; ++i) {
      const std::uint32_t key = logit_key(logits[i]);
      if ((key & mask) != prefix || !cutoff_keeps(within, key, i)) continue;
      const auto d = (key >> shift) & 255u;
      ++count[d];
      mass[d] += measure(logits[i]);
    }
    if (shift == 24) {
      std::uint64_t total = 0;
      for (const std::uint64_t m : mass) total += m;
      target = target_of(total);
    }
    int chosen = -1;
    for (int d = 255; d >= 0; --d) {
      if (count[d] == 0) continue;
      if (above + mass[d] >= target) {
        chosen = d;
        break;
      }
      above += mass[d];
    }
    if (chosen < 0) return within;  // no candidate: nothing to cut
    prefix |= static_cast<std::uint32_t>(chosen) << shift;
    mask |= 255u << shift;
  }
  std::int64_t last = -1;
  for (std::int64_t i = 0; i < vocab; ++i) {
    const std::uint32_t key = logit_key(logits[i]);
    if (key != prefix || !cutoff_keeps(within, key, i)) continue;
    above += measure(logits[i]);
    last = i;
    if (above >= target) break;
  }
  return {prefix, static_cast<std::int32_t>(last)};
}

}  // namespace

TokenCutoff token_cutoff(const float* logits, std::int64_t vocab, float max_logit, float inv_t, std::int64_t top_k,
                         double top_p) {
  TokenCutoff cut;
  if (top_k > 0 && top_k < vocab)
    cut = descend(
        logits, vocab, cut, [](float) { return std::uint64_t{1}; },
        [&](std::uint64_t) { return static_cast<std::uint64_t>(top_k); });
  if (top_p < 1.0)
    cut = descend(
        logits, vocab, cut, [&](float x) { return top_p_mass(exp_nonpositive((x - max_logit) * inv_t)); },
        [&](std::uint64_t total) { return static_cast<std::uint64_t>(static_cast<double>(total) * top_p); });
  return cut;
}

}  // namespace day0
