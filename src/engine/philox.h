// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3"): a counter-based
// generator. The draw for (seed, position) needs no state, so a sequence's samples do not depend on
// batch composition, preemption or restarts (RELIABILITY.md D2).
#pragma once

#include <array>
#include <cstdint>

namespace day0 {

using PhiloxBlock = std::array<std::uint32_t, 4>;

PhiloxBlock philox4x32_10(PhiloxBlock counter, std::array<std::uint32_t, 2> key);

// A uniform double in [0, 1) with 53 random bits for draw `position` of the stream keyed by `seed`.
double philox_uniform(std::uint64_t seed, std::uint64_t position);

}  // namespace day0
