// Random sampling's candidate set: temperature, then top-k, top-p and min-p (vLLM's order), and the
// draw from what is left. O(V) passes; the vocabulary is never sorted.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/sampling_params.h"
#include "ops/exp_nonpositive.h"

namespace day0 {

struct Candidate {
  float logit;
  std::int32_t id;
  float weight;  // exp((logit - max logit) / temperature): the unnormalised probability, at most 1
};

// The tokens that top_k, top_p and min_p of `params` keep from finite-or-minus-infinity `logits`
// (penalties already applied), with weights for `params.temperature` (> 0), in id order. Ties in logit
// are broken towards the lower id. Never empty when `logits` has a finite value. `out` is reused.
void keep_candidates(std::span<const float> logits, const SamplingParams& params, std::vector<Candidate>& out);

// The candidate whose cumulative weight first exceeds u * total weight, for u in [0, 1).
std::int32_t draw_candidate(std::span<const Candidate> candidates, double u);

// Whether top_k, top_p and min_p of `params` keep every token of a vocabulary of `vocab` (temperature only).
bool keeps_every_token(const SamplingParams& params, std::size_t vocab);

}  // namespace day0
