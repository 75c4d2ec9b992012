// Greedy decoding.
#include "model/greedy.h"

#include <chrono>

namespace day0 {

std::int32_t argmax_token(const Tensor& logits_row) {
  const float* p = logits_row.data<float>();
  std::int32_t best = 0;
  for (std::int64_t i = 1; i < logits_row.numel(); ++i)
    if (p[i] > p[best]) best = static_cast<std::int32_t>(i);
  return best;
}

Result<GreedyResult> greedy_generate(Executor& executor, std::span<const std::int32_t> prompt, int max_new_tokens,
                                     bool keep_logits, const TokenFn& on_token) {
  using clock = std::chrono::steady_clock;
  GreedyResult result;
  if (max_new_tokens <= 0) return result;
  auto t0 = clock::now();
  D0_ASSIGN_OR_RETURN(Tensor logits, executor.forward(prompt));
  result.prefill_seconds = std::chrono::duration<double>(clock::now() - t0).count();
  t0 = clock::now();
  for (int step = 0; step < max_new_tokens; ++step) {
    const std::int32_t token = argmax_token(logits);
    result.tokens.push_back(token);
    if (on_token) on_token(token);
    if (keep_logits) result.step_logits.push_back(logits);
    if (step + 1 == max_new_tokens) break;
    D0_ASSIGN_OR_RETURN(logits, executor.forward(std::span<const std::int32_t>(&token, 1)));
  }
  result.decode_seconds = std::chrono::duration<double>(clock::now() - t0).count();
  return result;
}

}  // namespace day0
