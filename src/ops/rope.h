// Rotary position embedding parameters and tables (default and YaRN), half-split pairs (i, i + r/2).
#pragma once

#include <vector>

namespace day0 {

enum class RopeKind { none, default_, yarn };

struct RopeSpec {
  RopeKind kind = RopeKind::none;
  double theta = 10000.0;
  int rotary_dim = 0;  // lanes rotated per head
  // YaRN
  double factor = 1.0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double original_max_position = 0;
  bool truncate = true;
  double attention_factor = 1.0;  // multiplies cos and sin
};

// rotary_dim / 2 inverse frequencies, computed in float32 the way transformers does.
std::vector<float> rope_inv_freq(const RopeSpec& rope);

// YaRN's default attention factor: 0.1 * mscale * ln(factor) + 1 (1 when factor <= 1).
double yarn_get_mscale(double factor, double mscale = 1.0);

}  // namespace day0
