// Log-probabilities of the raw model distribution (log_softmax of the unmodified logits), the way vLLM reports them
// by default: the picked token's and the n most likely tokens'. The host's definition: the sampler's, and
// CpuOps::row_logprobs' records (logprob_record.h).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ops/logprob_record.h"

namespace day0 {

struct TokenLogprob {
  std::int32_t token;
  float logprob;
  friend bool operator==(const TokenLogprob&, const TokenLogprob&) = default;
};

// log(sum(exp(logits))), accumulated in double; -inf when every logit is -inf.
double log_sum_exp(std::span<const float> logits);

// The n largest logits as logprobs, in rank order: larger logit first (by logit_key, token_cutoff.h: +0 before -0),
// lower id first among equals. O(V log n): no sort of the vocabulary. `lse` is log_sum_exp(logits).
std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, int n, double lse);

// The host's record of a row whose pick is `token` (0 <= token < logits.size()).
LogprobRecord logprob_record(std::span<const float> logits, std::int32_t token, int top_n);

// A record's top entries.
std::vector<TokenLogprob> record_top(const LogprobRecord& record);

}  // namespace day0
