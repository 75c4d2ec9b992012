// The logit adjustments that depend on what a sequence has seen: logit_bias, the repetition penalty
// (prompt and output tokens, once each), frequency and presence penalties (output tokens), in vLLM's order.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "engine/sampling_params.h"
#include "ops/logit_edits.h"

namespace day0 {

// The token history the penalties read: the prompt's distinct ids (kept only when a repetition penalty
// needs them) and how often each id was output.
class TokenHistory {
 public:
  TokenHistory(std::span<const std::int32_t> prompt_tokens, bool keep_prompt);
  void add_output(std::int32_t token);

  const std::vector<std::int32_t>& prompt_unique() const { return prompt_unique_; }  // sorted
  const std::unordered_map<std::int32_t, std::int32_t>& output_counts() const { return output_counts_; }
  bool in_prompt(std::int32_t token) const;
  bool empty() const { return prompt_unique_.empty() && output_counts_.empty(); }

 private:
  std::vector<std::int32_t> prompt_unique_;
  std::unordered_map<std::int32_t, std::int32_t> output_counts_;
};

// True when apply_penalties would change something (so the caller can skip copying the logits).
bool penalties_apply(const SamplingParams& params, const TokenHistory& history);
// True when penalties_apply is false for every history: what holds for the next token holds for those after it.
bool penalties_never_apply(const SamplingParams& params);

// apply_penalties' edits (ops/logit_edits.h), ids ascending, an id's in the order they apply: its bias, then the
// repetition penalty, then frequency and presence; an id outside [0, vocab) is an error naming it. Linear in the
// prompt's distinct ids (already sorted), n log n in the output's.
Status penalty_edits(const SamplingParams& params, const TokenHistory& history, std::size_t vocab,
                     std::vector<LogitEdit>& out);
// penalty_edits kept for one sequence as its history grows: built by the first get() (one merge), then updated one
// output at a time (its id's subtract recounted, a first occurrence's repetition and subtract inserted in its id's
// run), so a step copies the row's edits instead of sorting and merging its history again. Always what penalty_edits
// gives for the same history (tested).
class SequencePenaltyEdits {
 public:
  // The edits of `history` over `vocab` ids: built where not yet built (or built for another vocabulary), with
  // penalty_edits' errors; else as kept.
  Result<const std::vector<LogitEdit>*> get(const SamplingParams& params, const TokenHistory& history,
                                            std::size_t vocab);
  // After history.add_output(token): the kept edits follow (where built; an id outside them drops them, for the next
  // get() to build and name).
  void add_output(const SamplingParams& params, const TokenHistory& history, std::int32_t token);

 private:
  std::vector<LogitEdit> edits_;
  std::size_t vocab_ = 0;  // 0: not built
};

// What penalty_edits would add for one more output token, whichever it is: its PendingToken (ops/logit_edits.h).
PendingToken pending_token_edits(const SamplingParams& params);
// In place (penalty_edits applied), touching only the ids in the history and in logit_bias. Repetition: a positive
// logit is divided by the penalty, a negative one multiplied. Frequency: minus penalty x count. Presence: minus penalty
// once. An id outside `logits` is an error naming it.
Status apply_penalties(std::span<float> logits, const SamplingParams& params, const TokenHistory& history);

}  // namespace day0
