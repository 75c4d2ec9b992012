// A token drawn from softmax(logits / temperature): the one definition the host sampler (engine/sampler.cpp) and
// Ops::draw_tokens (CPU, and the CUDA kernel bit for bit) share, so a row drawn on the device gets the token the host
// would have drawn from the same logits and uniform number.
//
// Weights w_i = exp_nonpositive((logits[i] - max) * inv_t), in float (exp_nonpositive.h). The vocabulary is cut into
// blocks of kDrawBlock ids; in a block, lane l (0-31) sums ids l, l + 32, ... in double in that order, and the 32 lane
// sums are added as the tree a warp's shuffles make (lane l += lane l + s, s = 16, 8, 4, 2, 1). The total adds the
// block sums in order. The drawn id is where the running sum first exceeds u * total, the running sum walking the
// blocks in order, in a block the lanes in order, in a lane its ids in order, zero weights skipped. At each level, if
// rounding leaves no part crossing, the draw falls to the last positive weight of that level in the same order. Every
// id holds an interval of its weight's length, so P(id) = w_id / total up to rounding. C++17 (CUDA sources include it
// through ops.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "ops/token_cutoff.h"

namespace day0 {

inline constexpr int kDrawLanes = 32;
inline constexpr int kDrawBlock = 2048;  // ids a block: 64 a lane

// One row's draw: the row of the logits, 1 / temperature (as the float the weights multiply by), the uniform
// number in [0, 1) (philox_uniform of the sampler's seed and position), and the sampler's top-k, top-p and min-p
// (token_cutoff.h; the defaults cut nothing).
struct TokenDraw {
  std::int32_t row = 0;
  float inv_t = 1.f;
  double u = 0.0;
  std::int32_t top_k = 0;  // <= 0 or >= vocab: every id
  double top_p = 1.0;      // >= 1: every id
  double min_p = 0.0;      // weights under min_p (the largest's is 1) are cut
};

// Draws for a step of `rows` logits rows: each row in range and drawn once, inv_t positive and finite, u in [0, 1),
// top_p in (0, 1], min_p in [0, 1]. Errors start with `what`.
Status check_token_draws(const std::vector<TokenDraw>& draws, std::int64_t rows, const std::string& what);

// The id drawn from `logits` [vocab] (max_logit their largest, finite) as the header says; -1 when no weight is
// positive.
std::int32_t draw_token(const float* logits, std::int64_t vocab, float max_logit, float inv_t, double u);
// The same walk with the weights of ids past `cutoff` (token_cutoff.h: top-k, top-p) or under min_p set to zero.
std::int32_t draw_token(const float* logits, std::int64_t vocab, float max_logit, float inv_t, double u,
                        const TokenCutoff& cutoff, double min_p);
// The sampler's draw: `d`'s top-k and top-p as token_cutoff's cutoff, then the masked walk with its min_p.
std::int32_t draw_token(const float* logits, std::int64_t vocab, float max_logit, const TokenDraw& d);

}  // namespace day0
