// The shared draw: see the header. Written as the CUDA kernel computes it, level by level.
#include "ops/token_draw.h"

#include <cmath>
#include <vector>

#include "ops/exp_nonpositive.h"

namespace day0 {
namespace {

struct Weights {
  const float* logits;
  std::int64_t vocab;
  float max_logit, inv_t;
  TokenCutoff cutoff;
  double min_p;
  float operator()(std::int64_t i) const {
    if (i >= vocab || !cutoff_keeps(cutoff, logit_key(logits[i]), i)) return 0.f;
    const float w = exp_nonpositive((logits[i] - max_logit) * inv_t);
    return static_cast<double>(w) < min_p ? 0.f : w;
  }
};

// Lane l's ids in block b, in order.
std::int64_t lane_id(std::int64_t b, int l, int k) {
  return b * kDrawBlock + l + static_cast<std::int64_t>(kDrawLanes) * k;
}
constexpr int kPerLane = kDrawBlock / kDrawLanes;

double lane_sum(const Weights& w, std::int64_t b, int l) {
  double s = 0.0;
  for (int k = 0; k < kPerLane; ++k) s += static_cast<double>(w(lane_id(b, l, k)));
  return s;
}

// The block's 32 lane sums, and their tree as a warp's shuffles add them.
double block_sum(const Weights& w, std::int64_t b, double (&lanes)[kDrawLanes]) {
  double v[kDrawLanes];
  for (int l = 0; l < kDrawLanes; ++l) v[l] = lanes[l] = lane_sum(w, b, l);
  for (int s = kDrawLanes / 2; s >= 1; s /= 2)
    for (int l = 0; l < s; ++l) v[l] = v[l] + v[l + s];
  return v[0];
}

// The last positive weight of lane l of block b, of block b (lanes from the last), or -1.
std::int32_t last_in_lane(const Weights& w, std::int64_t b, int l) {
  for (int k = kPerLane - 1; k >= 0; --k)
    if (w(lane_id(b, l, k)) > 0.f) return static_cast<std::int32_t>(lane_id(b, l, k));
  return -1;
}
std::int32_t last_in_block(const Weights& w, std::int64_t b) {
  for (int l = kDrawLanes - 1; l >= 0; --l)
    if (const std::int32_t i = last_in_lane(w, b, l); i >= 0) return i;
  return -1;
}

}  // namespace

Status check_token_draws(const std::vector<TokenDraw>& draws, std::int64_t rows, const std::string& what) {
  std::vector<char> drawn(static_cast<std::size_t>(std::max<std::int64_t>(rows, 0)), 0);
  for (const TokenDraw& d : draws) {
    if (d.row < 0 || d.row >= rows)
      return make_error(what + ": draw row " + std::to_string(d.row) + " outside the " + std::to_string(rows) +
                        " logits rows");
    if (drawn[static_cast<std::size_t>(d.row)]++)
      return make_error(what + ": row " + std::to_string(d.row) + " drawn twice");
    if (!(d.inv_t > 0.f) || !std::isfinite(d.inv_t))
      return make_error(what + ": row " + std::to_string(d.row) + ": 1 / temperature must be positive and finite");
    if (!(d.u >= 0.0 && d.u < 1.0))
      return make_error(what + ": row " + std::to_string(d.row) + ": the uniform number must lie in [0, 1)");
    if (!(d.top_p > 0.0 && d.top_p <= 1.0))
      return make_error(what + ": row " + std::to_string(d.row) + ": top_p must lie in (0, 1]");
    if (!(d.min_p >= 0.0 && d.min_p <= 1.0))
      return make_error(what + ": row " + std::to_string(d.row) + ": min_p must lie in [0, 1]");
  }
  return Status::success();
}

std::int32_t draw_token(const float* logits, std::int64_t vocab, float max_logit, float inv_t, double u) {
  return draw_token(logits, vocab, max_logit, inv_t, u, TokenCutoff{}, 0.0);
}

std::int32_t draw_token(const float* logits, std::int64_t vocab, float max_logit, float inv_t, double u,
                        const TokenCutoff& cutoff, double min_p) {
  const Weights w{logits, vocab, max_logit, inv_t, cutoff, min_p};
  const std::int64_t blocks = (vocab + kDrawBlock - 1) / kDrawBlock;
  thread_local std::vector<double> sums;  // kept: a sampler's warm step allocates nothing (engine/sampler.h)
  sums.resize(static_cast<std::size_t>(blocks));
  double lanes[kDrawLanes];
  double total = 0.0;
  for (std::int64_t b = 0; b < blocks; ++b) total += sums[b] = block_sum(w, b, lanes);
  const double target = u * total;
  double cum = 0.0;
  std::int64_t b = 0;
  while (b < blocks && !(cum + sums[b] > target)) cum += sums[b++];
  if (b == blocks) {  // rounding: the last positive weight
    for (std::int64_t c = blocks - 1; c >= 0; --c)
      if (sums[c] > 0.0) return last_in_block(w, c);
    return -1;
  }
  (void)block_sum(w, b, lanes);
  int l = 0;
  while (l < kDrawLanes && !(cum + lanes[l] > target)) cum += lanes[l++];
  if (l == kDrawLanes) return last_in_block(w, b);
  for (int k = 0; k < kPerLane; ++k) {
    const float x = w(lane_id(b, l, k));
    if (!(x > 0.f)) continue;
    cum += static_cast<double>(x);
    if (cum > target) return static_cast<std::int32_t>(lane_id(b, l, k));
  }
  return last_in_lane(w, b, l);
}

std::int32_t draw_token(const float* logits, std::int64_t vocab, float max_logit, const TokenDraw& d) {
  const TokenCutoff cut = token_cutoff(logits, vocab, max_logit, d.inv_t, d.top_k, d.top_p);
  return draw_token(logits, vocab, max_logit, d.inv_t, d.u, cut, d.min_p);
}

}  // namespace day0
