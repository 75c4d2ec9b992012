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

// check_logits and argmax in one pass: blocks of 256 with a branch-free max and counts, then one scan of the
// first block holding the maximum. 2x faster than the two passes (64 rows of 201,088 on the CI machine: 226 ->
// 106 us a row). Not usable: some NaN or +inf, or every logit -inf.
struct Scan {
  std::int32_t argmax = 0;
  bool usable = false;
};

Scan scan_logits(std::span<const float> logits) {
  constexpr std::size_t kBlock = 256;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const float* x = logits.data();
  const std::size_t n = logits.size();
  float best = -kInf;
  std::size_t best_block = 0;
  std::int64_t unusable = 0, above_minus_inf = 0;
  for (std::size_t b = 0; b < n; b += kBlock) {
    const std::size_t e = std::min(n, b + kBlock);
    float m = -kInf;
    std::int32_t bad = 0, finite = 0;
    for (std::size_t i = b; i < e; ++i) {
      const float v = x[i];
      m = v > m ? v : m;
      bad += !(v < kInf);  // NaN or +inf
      finite += v > -kInf;
    }
    unusable += bad;
    above_minus_inf += finite;
    if (m > best) best = m, best_block = b;
  }
  Scan s;
  s.usable = n > 0 && unusable == 0 && above_minus_inf > 0;
  if (!s.usable) return s;
  std::size_t i = best_block;
  while (!(x[i] == best)) ++i;  // the block holds it
  s.argmax = static_cast<std::int32_t>(i);
  return s;
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
  const bool penalised = penalties_apply(params_, history_);
  SampleResult result;
  if (params_.is_greedy() && !penalised) {  // the common case, in one pass
    const Scan scan = scan_logits(logits);
    if (!scan.usable) {
      D0_RETURN_IF_ERROR(check_logits(logits));  // says which logit
      return make_error("sampler: unusable logits");
    }
    result.token = scan.argmax;
    return finish(logits, result);
  }
  D0_RETURN_IF_ERROR(check_logits(logits));
  std::span<const float> adjusted = logits;
  if (penalised) {
    scratch.logits.assign(logits.begin(), logits.end());
    D0_RETURN_IF_ERROR(apply_penalties(scratch.logits, params_, history_));
    adjusted = scratch.logits;
  }

  if (params_.is_greedy()) {
    result.token = argmax(adjusted);                         // greedy reads no random number
  } else if (keeps_every_token(params_, adjusted.size())) {  // temperature only: no candidate list
    result.token =
        draw_unfiltered(adjusted, params_.temperature, philox_uniform(seed_, output_.size()), scratch.weights);
  } else {
    keep_candidates(adjusted, params_, scratch.candidates);
    result.token = draw_candidate(scratch.candidates, philox_uniform(seed_, output_.size()));
  }

  return finish(logits, result);
}

bool Sampler::argmax_only() const {
  return params_.is_greedy() && !params_.logprobs && !penalties_apply(params_, history_);
}

Result<SampleResult> Sampler::take_argmax(std::int32_t token, std::int32_t unusable) {
  if (unusable >= 0) return make_error("sampler: logit of token " + std::to_string(unusable) + " is NaN or +inf");
  if (unusable != -1) return make_error("sampler: every logit is -inf");
  SampleResult result;
  result.token = token;
  return finish({}, result);  // no logprobs to read (argmax_only): only the token is recorded
}

SampleResult Sampler::finish(std::span<const float> logits, SampleResult& result) {
  if (params_.logprobs) {
    const double lse = log_sum_exp(logits);
    result.logprob = static_cast<float>(logits[result.token] - lse);
    result.top_logprobs = top_logprobs(logits, params_.top_logprobs, lse);
  }
  output_.push_back(result.token);
  history_.add_output(result.token);
  return std::move(result);
}

}  // namespace day0
