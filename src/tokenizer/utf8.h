// UTF-8 helpers: validation with the offending offset, lossy repair, and incomplete-tail detection.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace day0 {

// Byte offset of the first invalid UTF-8 sequence, or nullopt if `s` is valid.
std::optional<std::size_t> utf8_first_invalid(std::string_view s);
// Replaces each maximal invalid subpart with U+FFFD (the Unicode "substitution of maximal subparts"
// practice, which Rust's from_utf8_lossy and TextDecoder follow).
std::string utf8_lossy(std::string_view s);
// Length of the longest suffix that is an incomplete but so-far valid UTF-8 sequence (0..3).
std::size_t utf8_incomplete_tail(std::string_view s);

}  // namespace day0
