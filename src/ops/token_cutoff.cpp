// token_cutoff: the radix descent the header describes, written as a device's passes compute it.
#include "ops/token_cutoff.h"

#include <array>
#include <vector>

#include "ops/exp_nonpositive.h"

namespace day0 {
namespace {

// The first id in rank order, among those `within` keeps, whose inclusive measure reaches the target. The target
// comes from the candidates' total measure. Each pass keeps the candidates of the chosen digit only (in id order),
// so the exponentials are taken once and later passes see few ids.
template <class Measure, class Target>
TokenCutoff descend(const float* logits, std::int64_t vocab, const TokenCutoff& within, const Measure& measure,
                    const Target& target_of) {
  struct Candidate {
    std::uint32_t key;
    std::int32_t id;
    std::uint64_t measure;
  };
  thread_local std::vector<Candidate> candidates, next;  // kept: a sampler's warm step allocates nothing
  candidates.clear();
  std::uint64_t total = 0;
  for (std::int64_t i = 0; i < vocab; ++i) {
    const std::uint32_t key = logit_key(logits[i]);
    if (!cutoff_keeps(within, key, i)) continue;
    const std::uint64_t m = measure(logits[i]);
    candidates.push_back({key, static_cast<std::int32_t>(i), m});
    total += m;
  }
  const std::uint64_t target = target_of(total);
  std::uint64_t above = 0;
  for (int shift = 24; shift >= 0 && !candidates.empty(); shift -= 8) {
    std::array<std::uint64_t, 256> count{}, mass{};
    for (const Candidate& c : candidates) {
      const auto d = (c.key >> shift) & 255u;
      ++count[d];
      mass[d] += c.measure;
    }
    std::uint32_t chosen = 0;
    for (int d = 255; d >= 0; --d) {
      if (count[d] == 0) continue;
      chosen = static_cast<std::uint32_t>(d);
      if (above + mass[d] >= target) break;
      above += mass[d];  // only the last digit with candidates can fall through: the total reaches the target
    }
    next.clear();
    for (const Candidate& c : candidates)
      if (((c.key >> shift) & 255u) == chosen) next.push_back(c);
    candidates.swap(next);
  }
  if (candidates.empty()) return within;  // no candidate: nothing to cut
  // The ties at the cutoff key, in id order.
  for (const Candidate& c : candidates) {
    above += c.measure;
    if (above >= target) return {c.key, c.id};
  }
  return {candidates.back().key, candidates.back().id};
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
