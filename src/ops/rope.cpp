// RoPE inverse frequencies: default and YaRN (REFERENCE.md §0.2), mirroring transformers' float32 math.
#include "ops/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace day0 {

double yarn_get_mscale(double factor, double mscale) {
  return factor <= 1.0 ? 1.0 : 0.1 * mscale * std::log(factor) + 1.0;
}

// Dimension index at which a wavelength completes `rotations` turns over the original context (double, as python).
static double yarn_correction_dim(double rotations, int dim, double base, double original_max) {
  return dim * std::log(original_max / (rotations * 2.0 * std::numbers::pi)) / (2.0 * std::log(base));
}

std::vector<float> rope_inv_freq(const RopeSpec& rope) {
  const int half = rope.rotary_dim / 2;
  std::vector<float> inv(half, 0.f);
  if (rope.kind == RopeKind::none) return inv;
  const float base = static_cast<float>(rope.theta);
  std::vector<float> pos_freq(half);
  for (int i = 0; i < half; ++i)
    pos_freq[i] = std::pow(base, static_cast<float>(2 * i) / static_cast<float>(rope.rotary_dim));
  if (rope.kind == RopeKind::default_) {
    for (int i = 0; i < half; ++i) inv[i] = 1.0f / pos_freq[i];
    return inv;
  }
  double low = yarn_correction_dim(rope.beta_fast, rope.rotary_dim, rope.theta, rope.original_max_position);
  double high = yarn_correction_dim(rope.beta_slow, rope.rotary_dim, rope.theta, rope.original_max_position);
  if (rope.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(rope.rotary_dim - 1));
  if (low == high) high += 0.001;  // avoid a zero-width ramp
  const float factor = static_cast<float>(rope.factor);
  for (int i = 0; i < half; ++i) {
    const float extra = 1.0f / pos_freq[i];
    const float inter = 1.0f / (factor * pos_freq[i]);
    float ramp = (static_cast<float>(i) - static_cast<float>(low)) / static_cast<float>(high - low);
    ramp = std::clamp(ramp, 0.0f, 1.0f);
    const float extra_weight = 1.0f - ramp;
    inv[i] = inter * (1.0f - extra_weight) + extra * extra_weight;
  }
  return inv;
}

}  // namespace day0
