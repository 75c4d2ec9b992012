// UTF-8 validation and repair, per the Unicode Standard's table of well-formed byte sequences.
#include "tokenizer/utf8.h"

namespace day0 {
namespace {

// Length of the valid sequence starting at s[i], or 0 if the maximal subpart there is invalid;
// *consumed is how many bytes the maximal invalid subpart spans (>= 1) when 0 is returned.
std::size_t sequence_at(std::string_view s, std::size_t i, std::size_t* consumed) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  *consumed = 1;
  if (c < 0x80) return 1;
  int len = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // range of the second byte
  if (c >= 0xC2 && c <= 0xDF) len = 2;
  else if (c == 0xE0) len = 3, lo = 0xA0;
  else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) len = 3;
  else if (c == 0xED) len = 3, hi = 0x9F;  // no surrogates
  else if (c == 0xF0) len = 4, lo = 0x90;
  else if (c >= 0xF1 && c <= 0xF3) len = 4;
  else if (c == 0xF4) len = 4, hi = 0x8F;
  else return 0;
  for (int k = 1; k < len; ++k) {
    if (i + k >= s.size()) {
      *consumed = k;
      return 0;
    }
    const unsigned char x = b(i + k);
    const bool ok = k == 1 ? (x >= lo && x <= hi) : (x >= 0x80 && x <= 0xBF);
    if (!ok) {
      *consumed = k;
      return 0;
    }
  }
  return static_cast<std::size_t>(len);
}

}  // namespace

std::optional<std::size_t> utf8_first_invalid(std::string_view s) {
  std::size_t i = 0, consumed = 0;
  while (i < s.size()) {
    const std::size_t n = sequence_at(s, i, &consumed);
    if (n == 0) return i;
    i += n;
  }
  return std::nullopt;
}

std::string utf8_lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  std::size_t i = 0, consumed = 0;
  while (i < s.size()) {
    const std::size_t n = sequence_at(s, i, &consumed);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      i += consumed;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::size_t utf8_incomplete_tail(std::string_view s) {
  // Try the last 1..3 bytes as the start of a sequence that runs off the end without an error.
  for (std::size_t k = 1; k <= 3 && k <= s.size(); ++k) {
    const std::size_t start = s.size() - k;
    std::size_t consumed = 0;
    if (sequence_at(s, start, &consumed) == 0 && consumed == k && static_cast<unsigned char>(s[start]) >= 0xC2)
      return k;
  }
  return 0;
}

}  // namespace day0
