// JavaScript string and number semantics on UTF-8 strings, as @huggingface/jinja gets them from V8:
// UTF-16 lengths and indices, String.prototype.trim/toUpperCase/toLowerCase, Number#toString,
// parseInt/parseFloat, JSON.stringify of strings. All inputs are valid UTF-8.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace day0::jinja {

// Decodes the code point at s[i]; *len receives its byte length.
char32_t js_decode(std::string_view s, std::size_t i, std::size_t* len);

// JavaScript's WhiteSpace + LineTerminator set (what trim() removes and regex \s matches).
bool js_is_space(char32_t cp);
// Byte length of the JS whitespace character at s[i], or 0 if none starts there.
std::size_t js_space_len(std::string_view s, std::size_t i);
std::string js_trim(std::string_view s);
std::string js_trim_start(std::string_view s);
std::string js_trim_end(std::string_view s);

// Appends the upper- or lowercase mapping of one code point (case_mapping.cpp).
void js_map_case(std::string& out, char32_t cp, bool upper);
std::string js_upper(std::string_view s);
std::string js_lower(std::string_view s);
std::string js_capitalize(std::string_view s);  // charAt(0).toUpperCase() + slice(1)
std::string js_title(std::string_view s);       // replace(/\b\w/g, toUpperCase)

std::size_t utf16_length(std::string_view s);
// s.at(index) over UTF-16 code units (negative counts from the end); a lone surrogate becomes U+FFFD.
std::optional<std::string> utf16_at(std::string_view s, double index);
// Array.from(s) as byte offsets: where each code point starts, then s.size() (strings stay below 4 GiB).
std::vector<std::uint32_t> code_point_offsets(std::string_view s);
// a < b as JavaScript compares strings (by UTF-16 code units): negative, zero or positive.
int utf16_compare(std::string_view a, std::string_view b);

// Number.prototype.toString() (shortest round trip, JS exponent rules).
std::string js_number(double v);
// Number.prototype.toFixed(1) for integral values.
std::string js_fixed1(double v);
double js_parse_int(std::string_view s);    // parseInt(s, 10); NaN if no digits
double js_parse_float(std::string_view s);  // parseFloat(s); NaN if no number
double js_to_number(std::string_view s);    // Number(s) as used by ==

// JSON.stringify(string), then (ensure_ascii) every UTF-16 unit >= 0x7f as \uXXXX.
void js_json_quote(std::string& out, std::string_view s, bool ensure_ascii);

}  // namespace day0::jinja
