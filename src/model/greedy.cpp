// Greedy decoding.
#include "model/greedy.h"

#include <chrono>
#include <span>
#include <string>

#include "ops/greedy_pick.h"

namespace day0 {

std::int32_t argmax_token(const Tensor& logits_row) {
  return greedy_pick(std::span(logits_row.data<float>(), static_cast<std::size_t>(logits_row.numel()))).token;
}

namespace {

// The step's token: the greedy pick of its logits, or the device's ([1, 2]: ops/greedy_pick.h's two ids). Unusable
// logits (NaN, +inf, only -inf) are an error: the model diverged, and no token stands for that.
Result<std::int32_t> chosen_token(const Tensor& out, StepOutput output, int step) {
  const GreedyPick pick =
      output == StepOutput::logits
          ? greedy_pick(std::span(out.data<float>(), static_cast<std::size_t>(out.numel())))
          : GreedyPick{out.data<std::int32_t>()[0], out.data<std::int32_t>()[1]};
  D0_RETURN_IF_ERROR(greedy_pick_status(pick, "greedy_generate: step " + std::to_string(step)));
  return pick.token;
}

}  // namespace

Result<GreedyResult> greedy_generate(Executor& executor, std::span<const std::int32_t> prompt, int max_new_tokens,
                                     bool keep_logits, const TokenFn& on_token) {
  using clock = std::chrono::steady_clock;
  GreedyResult result;
  if (max_new_tokens <= 0) return result;
  // Without kept logits each step returns only the device's pick: two ids to the host instead of V logits.
  const StepOutput output = keep_logits ? StepOutput::logits : StepOutput::greedy;
  auto t0 = clock::now();
  D0_ASSIGN_OR_RETURN(Tensor out, executor.forward(prompt, false, {}, output));
  result.prefill_seconds = std::chrono::duration<double>(clock::now() - t0).count();
  t0 = clock::now();
  if (!keep_logits) {  // each step queued before the last one's pick is read, its token fed on the device
    D0_ASSIGN_OR_RETURN(std::int32_t token, chosen_token(out, output, 0));
    result.tokens.push_back(token);
    if (on_token) on_token(token);
    QueuedDecode next;
    if (max_new_tokens > 1) {
      D0_ASSIGN_OR_RETURN(next, executor.queue_solo_decode(token));
    }
    for (int step = 1; step < max_new_tokens; ++step) {
      const QueuedDecode current = next;
      if (step + 1 < max_new_tokens) {
        D0_ASSIGN_OR_RETURN(next, executor.queue_solo_decode(std::nullopt));
      }
      D0_ASSIGN_OR_RETURN(const Tensor picks, executor.wait_decode(current));
      D0_ASSIGN_OR_RETURN(token, chosen_token(picks, output, step));
      result.tokens.push_back(token);
      if (on_token) on_token(token);
    }
    result.decode_seconds = std::chrono::duration<double>(clock::now() - t0).count();
    return result;
  }
  for (int step = 0; step < max_new_tokens; ++step) {
    D0_ASSIGN_OR_RETURN(const std::int32_t token, chosen_token(out, output, step));
    result.tokens.push_back(token);
    if (on_token) on_token(token);
    if (keep_logits) result.step_logits.push_back(out);
    if (step + 1 == max_new_tokens) break;
    D0_ASSIGN_OR_RETURN(out, executor.forward(std::span<const std::int32_t>(&token, 1), false, {}, output));
  }
  result.decode_seconds = std::chrono::duration<double>(clock::now() - t0).count();
  return result;
}

}  // namespace day0
