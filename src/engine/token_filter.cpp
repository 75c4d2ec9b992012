// top-k / top-p / min-p without sorting the vocabulary: top-k by a bounded heap (nth_element for large
// k), top-p by a histogram of log-weights that finds the bucket where the mass crosses p, so only that
// bucket is sorted. Two passes over V whatever the shape of the distribution.
#include "engine/token_filter.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace day0 {
namespace {

constexpr std::size_t kHeapTopK = 4096;  // above this, nth_element is cheaper than a heap
constexpr int kBuckets = 2048;
constexpr double kLogWeightSpan = 64.0;  // weights below e^-64 share the last bucket

// "a ranks before b": larger logit first, lower id first on ties.
bool ranks_before(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

bool by_id(const Candidate& a, const Candidate& b) { return a.id < b.id; }

// The k best candidates of `logits`, in id order.
void select_top_k(std::span<const float> logits, std::size_t k, std::vector<Candidate>& out) {
  out.clear();
  if (k <= kHeapTopK) {
    out.reserve(k + 1);
    for (std::size_t i = 0; i < logits.size(); ++i) {
      const Candidate c{logits[i], static_cast<std::int32_t>(i), 0.f};
      if (out.size() < k) {
        out.push_back(c);
        std::push_heap(out.begin(), out.end(), ranks_before);  // front: the worst kept
      } else if (ranks_before(c, out.front())) {
        std::pop_heap(out.begin(), out.end(), ranks_before);
        out.back() = c;
        std::push_heap(out.begin(), out.end(), ranks_before);
      }
    }
  } else {
    out.resize(logits.size());
    for (std::size_t i = 0; i < logits.size(); ++i) out[i] = {logits[i], static_cast<std::int32_t>(i), 0.f};
    std::nth_element(out.begin(), out.begin() + k, out.end(), ranks_before);
    out.resize(k);
  }
  std::sort(out.begin(), out.end(), by_id);
}

// Buckets of equal width in log-weight (m - logit) / temperature: monotonic in the logit, and no log().
struct Buckets {
  float max_logit;
  double scale;  // buckets per logit unit
  int of(const Candidate& c) const {
    const double b = (static_cast<double>(max_logit) - c.logit) * scale;
    return b < kBuckets - 1 ? static_cast<int>(b) : kBuckets - 1;  // -inf logits land last
  }
};

// Keeps the candidates whose mass ranked strictly above them is below top_p of the total (vLLM's rule:
// the smallest set reaching p, at least one token). The kept set is every candidate ranking at or
// before a cutoff, found by sorting only the bucket where the running mass crosses the target.
void cut_top_p(std::vector<Candidate>& cands, double top_p, const Buckets& buckets) {
  std::array<double, kBuckets> mass{};
  for (const Candidate& c : cands) mass[buckets.of(c)] += c.weight;
  double total = 0.0;
  for (const double m : mass) total += m;
  const double target = top_p * total;

  int crossing = 0;
  double above = 0.0;  // mass of the buckets before `crossing`
  while (crossing < kBuckets - 1 && above + mass[crossing] < target) above += mass[crossing++];

  std::vector<Candidate> boundary;
  for (const Candidate& c : cands)
    if (buckets.of(c) == crossing) boundary.push_back(c);
  if (boundary.empty()) return;  // only rounding could get here; keeping everything is safe
  std::sort(boundary.begin(), boundary.end(), ranks_before);
  Candidate cutoff = boundary.front();
  bool first = crossing == 0;
  for (const Candidate& c : boundary) {
    if (!first && above >= target) break;
    cutoff = c;
    above += c.weight;
    first = false;
  }
  std::erase_if(cands, [&](const Candidate& c) { return ranks_before(cutoff, c); });
}

// A candidate's weight, exp((logit - max logit) / temperature), by exp_nonpositive: the weight pass over the
// vocabulary vectorises (std::exp in double was ~6 ns a token, 1.3 of the 1.8 ms a 201,088-token draw took).
struct WeightOf {
  float max_logit;
  float inv_t;
  float operator()(float x) const { return exp_nonpositive((x - max_logit) * inv_t); }
};

float max_logit(std::span<const float> logits) {
  float m = -std::numeric_limits<float>::infinity();
  for (const float x : logits) m = std::max(m, x);
  return m;
}

// The index whose cumulative weight first exceeds u * total weight (zero weights skipped; the last positive one if
// rounding leaves the target at the very end; -1 for none). The total is four interleaved partial sums, a fixed
// order that does not chain every add on the one before.
template <class Weight>
std::int64_t draw_index(std::size_t n, const Weight& weight, double u) {
  double part[4] = {0.0, 0.0, 0.0, 0.0};
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (std::size_t j = 0; j < 4; ++j) part[j] += weight(i + j);
  for (; i < n; ++i) part[i % 4] += weight(i);
  const double target = u * ((part[0] + part[1]) + (part[2] + part[3]));
  double cumulative = 0.0;
  std::int64_t last_positive = n == 0 ? -1 : 0;
  for (i = 0; i < n; ++i) {
    const float w = weight(i);
    if (w <= 0.f) continue;
    cumulative += w;
    last_positive = static_cast<std::int64_t>(i);
    if (cumulative > target) return last_positive;
  }
  return last_positive;
}

}  // namespace

void keep_candidates(std::span<const float> logits, const SamplingParams& params, std::vector<Candidate>& out) {
  out.clear();
  const std::size_t n = logits.size();
  if (n == 0) return;
  const float m = max_logit(logits);
  const double inv_t = 1.0 / params.temperature;
  const WeightOf weight_of{m, static_cast<float>(inv_t)};

  if (params.top_k > 0 && static_cast<std::size_t>(params.top_k) < n) {
    select_top_k(logits, static_cast<std::size_t>(params.top_k), out);
    for (Candidate& c : out) c.weight = weight_of(c.logit);
  } else {
    out.resize(n);
    for (std::size_t i = 0; i < n; ++i) out[i] = {logits[i], static_cast<std::int32_t>(i), weight_of(logits[i])};
  }
  if (params.top_p < 1.0) cut_top_p(out, params.top_p, Buckets{m, inv_t * (kBuckets / kLogWeightSpan)});
  // The best token (weight 1) survives top-k and top-p, so min_p's threshold is relative to the whole
  // distribution or the renormalised one alike: p >= min_p * p_max is weight >= min_p.
  if (params.min_p > 0.0) std::erase_if(out, [&](const Candidate& c) { return c.weight < params.min_p; });
}

bool keeps_every_token(const SamplingParams& params, std::size_t vocab) {
  return (params.top_k <= 0 || static_cast<std::size_t>(params.top_k) >= vocab) && params.top_p >= 1.0 &&
         params.min_p <= 0.0;
}

std::int32_t draw_candidate(std::span<const Candidate> candidates, double u) {
  const std::int64_t i = draw_index(
      candidates.size(), [&](std::size_t j) { return candidates[j].weight; }, u);
  return i < 0 ? -1 : candidates[static_cast<std::size_t>(i)].id;
}

}  // namespace day0
