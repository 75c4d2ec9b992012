// Philox4x32-10 with the constants of Random123; checked against its known-answer vectors in the tests.
#include "engine/philox.h"

namespace day0 {
namespace {

constexpr std::uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
constexpr std::uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;

inline void mulhilo(std::uint32_t a, std::uint32_t b, std::uint32_t& hi, std::uint32_t& lo) {
  const std::uint64_t p = static_cast<std::uint64_t>(a) * b;
  hi = static_cast<std::uint32_t>(p >> 32);
  lo = static_cast<std::uint32_t>(p);
}

}  // namespace

PhiloxBlock philox4x32_10(PhiloxBlock c, std::array<std::uint32_t, 2> k) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k[0] += kW0;
      k[1] += kW1;
    }
    std::uint32_t hi0, lo0, hi1, lo1;
    mulhilo(kM0, c[0], hi0, lo0);
    mulhilo(kM1, c[2], hi1, lo1);
    c = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
  }
  return c;
}

double philox_uniform(std::uint64_t seed, std::uint64_t position) {
  const PhiloxBlock r = philox4x32_10(
      {static_cast<std::uint32_t>(position), static_cast<std::uint32_t>(position >> 32), 0u, 0u},
      {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)});
  const std::uint64_t bits = (static_cast<std::uint64_t>(r[0]) << 32) | r[1];
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

}  // namespace day0
