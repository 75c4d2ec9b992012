// Sampler: checks the logits once, applies the penalties on a copy only when there is something to
// apply, then takes the argmax (greedy) or draws from the filtered candidates.
#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "engine/philox.h"

namespace day0 {
namespace {

// The lowest id among the largest logits.
std::int32_t argmax(std::span<const float> logits) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best]) best = i;
  return static_cast<std::int32_t>(best);
}

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
  D0_RETURN_IF_ERROR(check_logits(logits));
  std::span<const float> adjusted = logits;
  if (penalties_apply(params_, history_)) {
    scratch.logits.assign(logits.begin(), logits.end());
    D0_RETURN_IF_ERROR(apply_penalties(scratch.logits, params_, history_));
    adjusted = scratch.logits;
  }

  SampleResult result;
  if (params_.is_greedy()) {
    result.token = argmax(adjusted);  // greedy reads no random number
  } else {
    keep_candidates(adjusted, params_, scratch.candidates);
    result.token = draw_candidate(scratch.candidates, philox_uniform(seed_, output_.size()));
  }

  if (params_.logprobs) {
    const double lse = log_sum_exp(logits);
    result.logprob = static_cast<float>(logits[result.token] - lse);
    result.top_logprobs = top_logprobs(logits, params_.top_logprobs, lse);
  }
  output_.push_back(result.token);
  history_.add_output(result.token);
  return result;
}

}  // namespace day0
