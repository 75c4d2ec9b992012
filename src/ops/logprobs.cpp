// Raw logprobs: one pass for the max, one for the sum, one heap pass for the top n.
#include "ops/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/token_cutoff.h"

namespace day0 {
namespace {

// "a ranks before b" (a and b holding logits): larger key first, lower id first among equals.
struct RanksBefore {
  bool operator()(const TokenLogprob& a, const TokenLogprob& b) const {
    const std::uint32_t ka = logit_key(a.logprob), kb = logit_key(b.logprob);
    return ka > kb || (ka == kb && a.token < b.token);
  }
};

}  // namespace

double log_sum_exp(std::span<const float> logits) {
  float m = -std::numeric_limits<float>::infinity();
  for (const float x : logits) m = std::max(m, x);
  if (m == -std::numeric_limits<float>::infinity()) return -std::numeric_limits<double>::infinity();
  double sum = 0.0;
  for (const float x : logits) sum += std::exp(static_cast<double>(x) - m);
  return m + std::log(sum);
}

std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, int n, double lse) {
  const std::size_t k = std::min<std::size_t>(n > 0 ? n : 0, logits.size());
  std::vector<TokenLogprob> heap;  // the k best so far; heap.front() is the worst of them
  if (k == 0) return heap;
  heap.reserve(k + 1);
  const RanksBefore before;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    const TokenLogprob c{static_cast<std::int32_t>(i), logits[i]};
    if (heap.size() < k) {
      heap.push_back(c);
      std::push_heap(heap.begin(), heap.end(), before);
    } else if (before(c, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), before);
      heap.back() = c;
      std::push_heap(heap.begin(), heap.end(), before);
    }
  }
  std::sort(heap.begin(), heap.end(), before);
  for (TokenLogprob& t : heap) t.logprob = static_cast<float>(t.logprob - lse);
  return heap;
}

LogprobRecord logprob_record(std::span<const float> logits, std::int32_t token, int top_n) {
  LogprobRecord r;
  const double lse = log_sum_exp(logits);
  r.picked = static_cast<float>(logits[static_cast<std::size_t>(token)] - lse);
  const std::vector<TokenLogprob> top = top_logprobs(logits, top_n < kMaxLogprobTop ? top_n : kMaxLogprobTop, lse);
  r.n = static_cast<std::int32_t>(top.size());
  for (std::size_t i = 0; i < top.size(); ++i) {
    r.ids[i] = top[i].token;
    r.logprobs[i] = top[i].logprob;
  }
  return r;
}

std::vector<TokenLogprob> record_top(const LogprobRecord& record) {
  std::vector<TokenLogprob> top;
  for (int i = 0; i < record.n && i < kMaxLogprobTop; ++i) top.push_back({record.ids[i], record.logprobs[i]});
  return top;
}

}  // namespace day0
