// Greedy decoding of one sequence: prefill the prompt, then one token per step over the KV cache.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "model/executor.h"

namespace day0 {

struct GreedyResult {
  std::vector<std::int32_t> tokens;  // generated, not including the prompt
  std::vector<Tensor> step_logits;   // [1, V] logits that chose each token (kept on request)
  double prefill_seconds = 0, decode_seconds = 0;
};

// argmax with the lowest index on ties (as torch.argmax): greedy_pick's token, which means nothing where the row
// holds NaN or +inf, or only -inf (greedy_pick says which).
std::int32_t argmax_token(const Tensor& logits_row);

// Called with each token as it is chosen (for streaming output).
using TokenFn = std::function<void(std::int32_t token)>;

// Without keep_logits the token is picked on the backend (Executor's StepOutput::greedy: the same lowest id of the
// largest logit) and each decode step is queued before the last one's pick is read (Executor::queue_decode); with
// it, on the host (ops/greedy_pick.h). Either way logits that hold NaN or +inf, or only -inf, are an error naming
// the step; after an error the executor's solo sequence may hold steps past it (reset() it).
Result<GreedyResult> greedy_generate(Executor& executor, std::span<const std::int32_t> prompt, int max_new_tokens,
                                     bool keep_logits = false, const TokenFn& on_token = {});

}  // namespace day0
