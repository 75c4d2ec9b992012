// token_logprobs.
#include "model/evaluate.h"

#include <cmath>

namespace day0 {

double log_softmax_at(const float* logits, std::int64_t n, std::int64_t index) {
  double max = logits[0];
  for (std::int64_t i = 1; i < n; ++i) max = std::fmax(max, double(logits[i]));
  double sum = 0;
  for (std::int64_t i = 0; i < n; ++i) sum += std::exp(double(logits[i]) - max);
  return double(logits[index]) - max - std::log(sum);
}

Result<std::vector<double>> token_logprobs(Executor& executor, std::span<const std::int32_t> ids) {
  if (ids.size() < 2) return make_error("token_logprobs: need at least two tokens");
  executor.reset();
  D0_ASSIGN_OR_RETURN(Tensor logits, executor.forward(ids, /*all_logits=*/true));
  const std::int64_t V = logits.size(1);
  std::vector<double> out;
  for (std::size_t t = 0; t + 1 < ids.size(); ++t) {
    if (ids[t + 1] < 0 || ids[t + 1] >= V) return make_error("token_logprobs: token id outside the vocabulary");
    out.push_back(log_softmax_at(logits.data<float>() + t * V, V, ids[t + 1]));
  }
  return out;
}

}  // namespace day0
