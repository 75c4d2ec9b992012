// Sampler: checks the logits once, applies the penalties on a copy only when there is something to
// apply, then takes the argmax (greedy) or draws with top-k / top-p's cutoff and min-p (ops/token_cutoff.h).
#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "engine/philox.h"
#include "ops/greedy_pick.h"
#include "ops/token_draw.h"

namespace day0 {
namespace {

Status check_logits(std::span<const float> logits) {
  if (logits.empty()) return make_error("sampler: empty logits");
  bool any_finite = false;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    const float x = logits[i];
    if (std::isnan(x) || x == std::numeric_limits<float>::infinity())
      return make_error("sampler: logit of token " + std::to_string(i) + " is " + (std::isnan(x) ? "NaN" : "+inf"));
    any_finite = any_finite || x != -std::numeric_limits<float>::infinity();
  }
  if (!any_finite) return make_error("sampler: every logit is -inf");
  return Status::success();
}

}  // namespace

std::uint64_t draw_request_seed() {
  std::random_device device;
  const std::uint64_t hi = device(), lo = device();
  return ((hi << 32) ^ lo) & sampling_range::kMaxSeed;
}

Sampler::Sampler(SamplingParams params, std::span<const std::int32_t> prompt_tokens, std::uint64_t request_seed)
    : params_(std::move(params)),
      seed_(params_.seed.value_or(request_seed)),
      history_(prompt_tokens, params_.repetition_penalty != 1.0) {}

Result<SampleResult> Sampler::sample(std::span<const float> logits, SamplerScratch& scratch) {
  const bool penalised = penalties_apply(params_, history_);
  SampleResult result;
  if (params_.is_greedy() && !penalised) {  // the common case, in one pass
    const GreedyPick pick = greedy_pick(logits);
    if (pick.unusable != -1) {
      D0_RETURN_IF_ERROR(check_logits(logits));  // says which logit and what it holds
      return make_error("sampler: unusable logits");
    }
    result.token = pick.token;
    return finish(logits, result);
  }
  D0_RETURN_IF_ERROR(check_logits(logits));
  std::span<const float> adjusted = logits;
  if (penalised) {
    scratch.logits.assign(logits.begin(), logits.end());
    D0_ASSIGN_OR_RETURN(const std::vector<LogitEdit>* edits, edits_.get(params_, history_, logits.size()));
    apply_logit_edits(scratch.logits.data(), edits->data(), edits->size());
    adjusted = scratch.logits;
  }

  if (params_.is_greedy()) {
    result.token = greedy_pick(adjusted).token;              // greedy reads no random number
  } else {  // top-k and top-p as one cutoff, min-p as a threshold: the walk of the draw masked (token_cutoff.h)
    const float m = *std::max_element(adjusted.begin(), adjusted.end());
    result.token = draw_token(adjusted.data(), static_cast<std::int64_t>(adjusted.size()), m, draw_params(0, 0));
  }

  return finish(logits, result);
}

bool Sampler::argmax_only(std::uint64_t ahead) const {
  return params_.is_greedy() && !params_.logprobs &&
         (ahead == 0 ? !penalties_apply(params_, history_) : penalties_never_apply(params_));
}

std::optional<Sampler::DevicePick> Sampler::device_pick(std::int32_t row, std::uint64_t ahead, std::int64_t vocab,
                                                        LogitEdits* edits) {
  const SamplingParams& p = params_;
  const bool penalised = ahead == 0 ? penalties_apply(p, history_) : !penalties_never_apply(p);
  if (p.logprobs && (ahead > 1 || penalised)) return std::nullopt;  // logprobs read the raw logits
  if (penalised) {
    // Ahead by one: the history lacks the token the step before picks, which the device edits as pending.
    if (ahead > 1 || edits == nullptr || vocab < 0) return std::nullopt;
    const Result<const std::vector<LogitEdit>*> row_edits = edits_.get(p, history_, static_cast<std::size_t>(vocab));
    if (!row_edits.ok()) return std::nullopt;
    edits->add_row(row, **row_edits, ahead == 1 ? pending_token_edits(p) : PendingToken{});
  }
  DevicePick pick;
  if (!p.is_greedy()) pick.draw = draw_params(row, ahead);
  if (p.logprobs) pick.logprob_top = p.top_logprobs;
  return pick;
}

TokenDraw Sampler::draw_params(std::int32_t row, std::uint64_t ahead) const {
  return TokenDraw{row,           inverse_temperature(), philox_uniform(seed_, output_.size() + ahead),
                   params_.top_k, params_.top_p,         params_.min_p};
}

Result<SampleResult> Sampler::take_argmax(std::int32_t token, std::int32_t unusable, const LogprobRecord* record) {
  D0_RETURN_IF_ERROR(greedy_pick_status({token, unusable}, "sampler"));
  SampleResult result;
  result.token = token;
  if (params_.logprobs) {
    if (!record) return make_error("sampler: a pick made elsewhere came without the logprobs the request asks for");
    result.logprob = record->picked;
    result.top_logprobs = record_top(*record);
  }
  return record_output(result);
}

SampleResult Sampler::finish(std::span<const float> logits, SampleResult& result) {
  if (params_.logprobs) {
    const double lse = log_sum_exp(logits);
    result.logprob = static_cast<float>(logits[result.token] - lse);
    result.top_logprobs = top_logprobs(logits, params_.top_logprobs, lse);
  }
  return record_output(result);
}

SampleResult Sampler::record_output(SampleResult& result) {
  output_.push_back(result.token);
  history_.add_output(result.token);
  edits_.add_output(params_, history_, result.token);
  return std::move(result);
}

}  // namespace day0
