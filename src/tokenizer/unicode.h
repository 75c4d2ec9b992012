// Code-point helpers for the tokenizer: UTF-8 stepping, the character classes the reference's Rust code
// uses (char::is_whitespace, char::is_numeric, regex \w), and normalization forms via utf8proc.
// All functions take valid UTF-8 (encode() validates its input first).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace day0::tok {

// Decodes the code point at s[i] (valid UTF-8 assumed) and stores its byte length in *len.
inline char32_t decode_at(std::string_view s, std::size_t i, std::size_t* len) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  if (c < 0x80) return *len = 1, c;
  if (c < 0xE0) return *len = 2, static_cast<char32_t>(((c & 0x1F) << 6) | (b(1) & 0x3F));
  if (c < 0xF0) return *len = 3, static_cast<char32_t>(((c & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F));
  *len = 4;
  return static_cast<char32_t>(((c & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F));
}

// Byte length of the UTF-8 sequence led by `lead` (1 for stray continuation bytes).
inline std::size_t utf8_len(unsigned char lead) { return lead < 0xC0 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4; }

void append_utf8(std::string& out, char32_t cp);

// Rust's char::is_whitespace: the Unicode White_Space property.
bool is_white_space(char32_t cp);
// Rust's char::is_numeric: general category Nd, Nl or No.
bool is_numeric(char32_t cp);
// The Rust regex crate's Unicode \w (Alphabetic, marks, decimal digits, connector punctuation,
// join controls): general categories L*, Nl, M*, Nd, Pc, U+200C/U+200D and the Other_Alphabetic
// circled/squared letters.
bool is_word_char(char32_t cp);
// General category M* (what the reference's StripAccents removes).
bool is_mark(char32_t cp);

enum class NormForm { NFC, NFD, NFKC, NFKD };
// Returns false only on an internal utf8proc failure (out of memory); `s` is valid UTF-8.
bool unicode_normalize(std::string& s, NormForm form);
// Rust's char::to_lowercase applied per character (full mappings: U+0130 becomes "i\u0307").
void unicode_lowercase(std::string& s);

}  // namespace day0::tok
