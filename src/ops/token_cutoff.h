// What top-k and top-p keep, as one cutoff in rank order: the definition the host sampler and a device kernel are to
// share bit for bit (perf notes v60's design; the device half is not built yet).
//
// Rank order: the logit's order-preserving key descending (logit_key: -0 ranks below +0), then the id ascending.
// - top-k (0 < k < vocab) keeps the first k ids of that order.
// - top-p (p < 1) keeps, of what top-k kept, the first ids up to and including the first one whose inclusive mass
//   reaches T = trunc(Q * p), Q the kept ids' total mass. A mass is top_p_mass(w): the weight w =
//   exp_nonpositive((logit - max) / temperature) <= 1 as the integer rint(w * 2^40). Integer sums are the same in
//   any order, so a parallel device adds them as it likes and still agrees with the host; weights under 2^-41 count
//   as zero here (their share of the total is under 1e-7). At least one id is kept.
// The cutoff is the last kept id; token_cutoff finds it by a radix descent over the keys, 8 bits a pass (counts for
// top-k, masses for top-p), then the ties at the cutoff key in id order: the order a device's histograms take.
// C++17: CUDA sources include it (logit_key and cutoff_keeps run on the device too).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/host_device.h"

namespace day0 {

// Ids at or before (key, id) in rank order are kept. The default keeps every id.
struct TokenCutoff {
  std::uint32_t key = 0;
  std::int32_t id = INT32_MAX;
};

// Larger logit, larger key; -inf below every finite logit (NaN never reaches here: a row holding one is refused).
D0_HOST_DEVICE std::uint32_t logit_key(float x) {
#if defined(__CUDA_ARCH__)
  const std::uint32_t bits = __float_as_uint(x);
#else
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
#endif
  return (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
}

D0_HOST_DEVICE bool cutoff_keeps(const TokenCutoff& c, std::uint32_t key, std::int64_t id) {
  return key > c.key || (key == c.key && id <= c.id);
}

// A weight in [0, 1] as top-p's integer mass (the device's __float2ull_rn of w * 2^40 is the same integer: the
// product is exact).
inline std::uint64_t top_p_mass(float w) {
  return static_cast<std::uint64_t>(std::nearbyint(static_cast<double>(w) * 1099511627776.0));
}

// The cutoff of top_k (<= 0 or >= vocab: none) and top_p (>= 1: none) over `logits` [vocab] whose largest is
// max_logit, at 1 / temperature inv_t, as the header says.
TokenCutoff token_cutoff(const float* logits, std::int64_t vocab, float max_logit, float inv_t, std::int64_t top_k,
                         double top_p);

}  // namespace day0
