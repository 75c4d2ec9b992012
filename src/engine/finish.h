// When a sequence ends and why: EOS and stop token ids end it with "stop" (their text is not output),
// max_tokens with "length"; a stop string (StopMatcher) also gives "stop". A token that is both a stop
// token and the max_tokens-th is a "stop", as in vLLM.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "engine/sampling_params.h"

namespace day0 {

enum class FinishReason { none, stop, length };

// "stop" / "length"; an empty view for none (the API's null).
std::string_view finish_reason_name(FinishReason reason);

// EOS (unless ignore_eos) or one of stop_token_ids: the sequence ends and the token's text is dropped.
bool is_stop_token(std::int32_t token, const SamplingParams& params, std::span<const std::int32_t> eos_token_ids);

// The verdict after the sampled `token` became output token number `n_output_tokens` (counting it).
FinishReason finish_after_token(std::int32_t token, std::int64_t n_output_tokens, const SamplingParams& params,
                                std::span<const std::int32_t> eos_token_ids);

}  // namespace day0
