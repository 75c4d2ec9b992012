// Sampler: one sequence's logits -> token step, in vLLM's order: logit_bias, repetition penalty (prompt
// and output), frequency and presence penalties (output), temperature, top-k, top-p, min-p, draw.
// Reported logprobs come from the raw model distribution. The draw for output position i is
// philox(seed, i), so a seeded request gives the same tokens whatever else is in the batch.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/status.h"
#include "engine/penalties.h"
#include "engine/sampling_params.h"
#include "ops/logprobs.h"
#include "ops/token_draw.h"

namespace day0 {

struct SampleResult {
  std::int32_t token = -1;
  std::optional<float> logprob;            // raw logprob of `token`, when params.logprobs
  std::vector<TokenLogprob> top_logprobs;  // params.top_logprobs entries, most likely first
};

// Working memory of one sampling step (a copy of the logits, the candidate array): one per scheduler
// thread, reused across sequences so that a step allocates nothing once warm.
struct SamplerScratch {
  std::vector<float> logits;
};

// A seed for a request that did not set one: drawn once, from std::random_device.
std::uint64_t draw_request_seed();

class Sampler {
 public:
  // `params` must have passed validate_sampling_params; `prompt_tokens` feeds the repetition penalty;
  // `request_seed` is used when params.seed is unset.
  Sampler(SamplingParams params, std::span<const std::int32_t> prompt_tokens, std::uint64_t request_seed);

  // Picks the next token and records it as output (for penalties and the next position's draw).
  // Errors (the request fails, nothing else): empty logits, a NaN or +inf logit, every logit -inf,
  // or logits that do not cover a penalised or biased token id.
  Result<SampleResult> sample(std::span<const float> logits, SamplerScratch& scratch);
  Result<SampleResult> sample(std::span<const float> logits) { return sample(logits, own_scratch_); }

  // Whether the next token is the argmax of the raw logits and nothing else is read from them (greedy, no bias or
  // penalty that applies, no logprobs): then a pick made elsewhere (Ops::greedy_tokens) stands for sample().
  // With `ahead` > 0: the token that many steps after the next, whatever tokens come between (for a step queued before
  // the last one's pick is taken): then no penalty may ever apply.
  bool argmax_only(std::uint64_t ahead = 0) const;
  // Records such a pick as sample() would: `unusable` -1, or the id of a NaN or +inf logit, or -2 (every logit -inf
  // or none), which fail as sample() does. With logprobs, `record` (Ops::row_logprobs' for the row) gives them.
  Result<SampleResult> take_argmax(std::int32_t token, std::int32_t unusable, const LogprobRecord* record = nullptr);

  // Where the token `ahead` steps after the next (0: the next) can be picked on the device from this step's logits
  // row `row` (of `vocab` ids), so that the pick stands for sample(): nullopt where the host must read the logits
  // (logprobs with a bias or penalty that applies, or more than one step ahead; a bias or penalty that applies,
  // without `edits` or more than one step ahead; an id outside the vocabulary, which sample() then names). With
  // logprobs, `logprob_top` says so (>= 0: the row's record, Ops::row_logprobs, with that many top logprobs, goes to
  // take_argmax). Where a bias or penalty applies, the row's edits (penalty_edits) are appended to `edits`, for
  // Ops::edit_logits before the pick; one step ahead also the token the step before picks as pending
  // (pending_token_edits). The pick is then the argmax (greedy: `draw` empty) or `draw` (Ops::draw_tokens,
  // token_draw.h: temperature, top-k, top-p, min-p), taken with take_argmax (the same checks; the token recorded,
  // and the record's logprobs where the request asks for them).
  struct DevicePick {
    std::optional<TokenDraw> draw;
    std::int32_t logprob_top = -1;
  };
  std::optional<DevicePick> device_pick(std::int32_t row, std::uint64_t ahead, std::int64_t vocab, LogitEdits* edits);

  const SamplingParams& params() const { return params_; }
  std::uint64_t seed() const { return seed_; }
  const std::vector<std::int32_t>& output_tokens() const { return output_; }

 private:
  // The logprobs of the chosen token, and the token recorded in the history.
  SampleResult finish(std::span<const float> logits, SampleResult& result);
  // The token recorded in the history.
  SampleResult record_output(SampleResult& result);
  float inverse_temperature() const { return static_cast<float>(1.0 / params_.temperature); }
  // The draw of the token `ahead` steps after the next, for logits row `row`.
  TokenDraw draw_params(std::int32_t row, std::uint64_t ahead) const;
  SamplingParams params_;
  std::uint64_t seed_;
  TokenHistory history_;
  SequencePenaltyEdits edits_;  // built at the first penalised pick
  std::vector<std::int32_t> output_;
  SamplerScratch own_scratch_;
};

}  // namespace day0
