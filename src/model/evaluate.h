// Scoring text with a model: per-token log-probabilities of a sequence (the basis of perplexity checks).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/executor.h"

namespace day0 {

// log p(ids[t+1] | ids[0..t]) for t = 0..n-2, from one prefill of a fresh sequence (the executor is reset).
Result<std::vector<double>> token_logprobs(Executor& executor, std::span<const std::int32_t> ids);

// Numerically stable log-softmax of one logits row, evaluated at `index`.
double log_softmax_at(const float* logits, std::int64_t n, std::int64_t index);

}  // namespace day0
