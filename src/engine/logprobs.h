// Log-probabilities of the raw model distribution (log_softmax of the unmodified logits), the way
// vLLM reports them by default: the sampled token's and the n most likely tokens'.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace day0 {

struct TokenLogprob {
  std::int32_t token;
  float logprob;
  friend bool operator==(const TokenLogprob&, const TokenLogprob&) = default;
};

// log(sum(exp(logits))), accumulated in double; -inf when every logit is -inf.
double log_sum_exp(std::span<const float> logits);

// The n largest logits as logprobs, sorted by logprob descending and token id ascending on ties.
// O(V log n): no sort of the vocabulary. `lse` is log_sum_exp(logits).
std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, int n, double lse);

}  // namespace day0
