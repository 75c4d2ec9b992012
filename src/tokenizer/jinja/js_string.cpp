// JavaScript string semantics on UTF-8 (see js_string.h): whitespace and trimming, whole-string case
// mapping (with the final-sigma rule), UTF-16 lengths/indices/ordering, Number#toString, parseInt and
// parseFloat, JSON string quoting.
#include "tokenizer/jinja/js_string.h"
#include "tokenizer/unicode.h"

#include <utf8proc.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace day0::jinja {
namespace {

bool is_cased(char32_t cp) {
  const auto c = static_cast<utf8proc_int32_t>(cp);
  const auto cat = utf8proc_category(c);
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT ||
         utf8proc_tolower(c) != c || utf8proc_toupper(c) != c;
}

bool is_case_ignorable(char32_t cp) {
  if (cp == 0x27 || cp == 0x2E || cp == 0x3A || cp == 0x5E || cp == 0x60 || cp == 0xA8 || cp == 0xAD || cp == 0xAF ||
      cp == 0xB4 || cp == 0xB7 || cp == 0xB8 || cp == 0x2018 || cp == 0x2019 || cp == 0x2024 || cp == 0x2027)
    return true;
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_ME || cat == UTF8PROC_CATEGORY_CF ||
         cat == UTF8PROC_CATEGORY_LM || cat == UTF8PROC_CATEGORY_SK;
}

std::vector<char32_t> decode_all(std::string_view s) {
  std::vector<char32_t> cps;
  for (std::size_t i = 0, n = 0; i < s.size(); i += n) cps.push_back(js_decode(s, i, &n));
  return cps;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

std::size_t skip_space(std::string_view s) {
  std::size_t i = 0;
  while (std::size_t n = js_space_len(s, i)) i += n;
  return i;
}

// Length of the longest prefix of s that is a StrUnsignedDecimalLiteral without "Infinity".
std::size_t decimal_prefix(std::string_view s) {
  std::size_t i = 0, int_digits = 0, frac_digits = 0;
  while (i < s.size() && is_digit(s[i])) ++i, ++int_digits;
  if (i < s.size() && s[i] == '.') {
    std::size_t j = i + 1;
    while (j < s.size() && is_digit(s[j])) ++j, ++frac_digits;
    if (int_digits + frac_digits > 0) i = j;
  }
  if (int_digits + frac_digits == 0) return 0;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    std::size_t j = i + 1;
    if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
    const std::size_t d = j;
    while (j < s.size() && is_digit(s[j])) ++j;
    if (j > d) i = j;
  }
  return i;
}

double parse_decimal(std::string_view s) { return std::strtod(std::string(s).c_str(), nullptr); }

const char kHex[] = "0123456789abcdef";

void append_u_escape(std::string& out, unsigned unit) {
  out += "\\u";
  for (int shift = 12; shift >= 0; shift -= 4) out.push_back(kHex[(unit >> shift) & 0xF]);
}

}  // namespace

char32_t js_decode(std::string_view s, std::size_t i, std::size_t* len) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(i + k < s.size() ? s[i + k] : 0); };
  const unsigned char c = b(0);
  if (c < 0x80) return *len = 1, c;
  if (c < 0xE0) return *len = 2, static_cast<char32_t>(((c & 0x1F) << 6) | (b(1) & 0x3F));
  if (c < 0xF0) return *len = 3, static_cast<char32_t>(((c & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F));
  *len = 4;
  return static_cast<char32_t>(((c & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F));
}

bool js_is_space(char32_t cp) {
  switch (cp) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x20:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
    case 0xFEFF:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

std::size_t js_space_len(std::string_view s, std::size_t i) {
  if (i >= s.size()) return 0;
  std::size_t n = 0;
  const char32_t cp = js_decode(s, i, &n);
  return js_is_space(cp) ? n : 0;
}

std::string js_trim_start(std::string_view s) { return std::string(s.substr(skip_space(s))); }

std::string js_trim_end(std::string_view s) {
  std::size_t end = s.size();
  while (end > 0) {
    std::size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    if (js_space_len(s, start) != end - start) break;
    end = start;
  }
  return std::string(s.substr(0, end));
}

std::string js_trim(std::string_view s) { return js_trim_end(s.substr(skip_space(s))); }

std::string js_upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0, n = 0; i < s.size(); i += n) js_map_case(out, js_decode(s, i, &n), true);
  return out;
}

std::string js_lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  if (s.find("\xCE\xA3") == std::string_view::npos) {
    for (std::size_t i = 0, n = 0; i < s.size(); i += n) js_map_case(out, js_decode(s, i, &n), false);
    return out;
  }
  // Capital sigma lowers to final sigma after a cased letter and not before one (Unicode Final_Sigma).
  const std::vector<char32_t> cps = decode_all(s);
  for (std::size_t k = 0; k < cps.size(); ++k) {
    if (cps[k] != 0x3A3) {
      js_map_case(out, cps[k], false);
      continue;
    }
    std::size_t b = k;
    while (b > 0 && is_case_ignorable(cps[b - 1])) --b;
    std::size_t a = k + 1;
    while (a < cps.size() && is_case_ignorable(cps[a])) ++a;
    const bool final_sigma = b > 0 && is_cased(cps[b - 1]) && !(a < cps.size() && is_cased(cps[a]));
    tok::append_utf8(out, final_sigma ? 0x3C2 : 0x3C3);
  }
  return out;
}

std::string js_capitalize(std::string_view s) {
  if (s.empty()) return {};
  std::size_t n = 0;
  const char32_t cp = js_decode(s, 0, &n);
  if (cp >= 0x10000) return std::string(s);  // charAt(0) is a lone surrogate: unchanged
  std::string out;
  js_map_case(out, cp, true);
  out.append(s.substr(n));
  return out;
}

std::string js_title(std::string_view s) {
  std::string out(s);
  bool prev_word = false;
  for (char& c : out) {
    const bool word = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '_';
    if (word && !prev_word && c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
    prev_word = word;
  }
  return out;
}

std::size_t utf16_length(std::string_view s) {
  std::size_t units = 0;
  for (unsigned char c : s) {
    if ((c & 0xC0) == 0x80) continue;
    units += c >= 0xF0 ? 2 : 1;
  }
  return units;
}

std::optional<std::string> utf16_at(std::string_view s, double index) {
  if (std::isnan(index)) index = 0;
  index = std::trunc(index);
  const double len = static_cast<double>(utf16_length(s));
  if (index < 0) index += len;
  if (index < 0 || index >= len) return std::nullopt;
  const auto target = static_cast<std::size_t>(index);
  std::size_t unit = 0;
  for (std::size_t i = 0, n = 0; i < s.size(); i += n) {
    const char32_t cp = js_decode(s, i, &n);
    const std::size_t units = cp >= 0x10000 ? 2 : 1;
    if (target < unit + units) return units == 2 ? std::string("\xEF\xBF\xBD") : std::string(s.substr(i, n));
    unit += units;
  }
  return std::nullopt;
}

std::vector<std::uint32_t> code_point_offsets(std::string_view s) {
  std::vector<std::uint32_t> out;
  for (std::size_t i = 0, n = 0; i < s.size(); i += n) {
    js_decode(s, i, &n);
    out.push_back(static_cast<std::uint32_t>(i));
  }
  out.push_back(static_cast<std::uint32_t>(s.size()));
  return out;
}

int utf16_compare(std::string_view a, std::string_view b) {
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    std::size_t na = 0, nb = 0;
    const char32_t ca = js_decode(a, i, &na), cb = js_decode(b, j, &nb);
    if (ca != cb) {
      const auto key = [](char32_t c) { return c >= 0x10000 ? 0xD800 + ((c - 0x10000) >> 10) : c; };
      const char32_t ka = key(ca), kb = key(cb);
      if (ka != kb) return ka < kb ? -1 : 1;
      return ca < cb ? -1 : 1;
    }
    i += na;
    j += nb;
  }
  if (i < a.size()) return 1;
  if (j < b.size()) return -1;
  return 0;
}

std::string js_number(double v) {
  if (std::isnan(v)) return "NaN";
  if (v == 0) return "0";
  if (std::isinf(v)) return v < 0 ? "-Infinity" : "Infinity";
  std::string sign = v < 0 ? "-" : "";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, std::fabs(v), std::chars_format::scientific);
  const std::string_view sci(buf, static_cast<std::size_t>(res.ptr - buf));
  const std::size_t e = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e))
    if (c != '.') digits.push_back(c);
  const int exp = std::atoi(std::string(sci.substr(e + 1)).c_str());
  const int k = static_cast<int>(digits.size()), n = exp + 1;
  if (k <= n && n <= 21) return sign + digits + std::string(static_cast<std::size_t>(n - k), '0');
  if (0 < n && n <= 21) return sign + digits.substr(0, n) + "." + digits.substr(n);
  if (-6 < n && n <= 0) return sign + "0." + std::string(static_cast<std::size_t>(-n), '0') + digits;
  const std::string exponent = std::string(n - 1 >= 0 ? "+" : "-") + std::to_string(std::abs(n - 1));
  if (k == 1) return sign + digits + "e" + exponent;
  return sign + digits.substr(0, 1) + "." + digits.substr(1) + "e" + exponent;
}

std::string js_fixed1(double v) {
  if (!std::isfinite(v) || std::fabs(v) >= 1e21) return js_number(v);
  char buf[400];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

double js_parse_int(std::string_view s) {
  s = s.substr(skip_space(s));
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) negative = s[0] == '-', s = s.substr(1);
  std::size_t n = 0;
  while (n < s.size() && is_digit(s[n])) ++n;
  if (n == 0) return NAN;
  const double v = parse_decimal(s.substr(0, n));
  return negative ? -v : v;
}

double js_parse_float(std::string_view s) {
  s = s.substr(skip_space(s));
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) negative = s[0] == '-', s = s.substr(1);
  double v;
  if (s.substr(0, 8) == "Infinity") {
    v = INFINITY;
  } else {
    const std::size_t n = decimal_prefix(s);
    if (n == 0) return NAN;
    v = parse_decimal(s.substr(0, n));
  }
  return negative ? -v : v;
}

double js_to_number(std::string_view s) {
  const std::string t = js_trim(s);
  std::string_view v = t;
  if (v.empty()) return 0;
  if (v.size() > 2 && v[0] == '0' && std::string_view("xXoObB").find(v[1]) != std::string_view::npos) {
    const int base = (v[1] == 'x' || v[1] == 'X') ? 16 : (v[1] == 'o' || v[1] == 'O') ? 8 : 2;
    double r = 0;
    for (char c : v.substr(2)) {
      int d = is_digit(c)              ? c - '0'
              : (c >= 'a' && c <= 'f') ? c - 'a' + 10
              : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                       : 99;
      if (d >= base) return NAN;
      r = r * base + d;
    }
    return r;
  }
  bool negative = false;
  if (v[0] == '+' || v[0] == '-') negative = v[0] == '-', v = v.substr(1);
  double r;
  if (v == "Infinity") {
    r = INFINITY;
  } else {
    if (decimal_prefix(v) != v.size() || v.empty()) return NAN;
    r = parse_decimal(v);
  }
  return negative ? -r : r;
}

void js_json_quote(std::string& out, std::string_view s, bool ensure_ascii) {
  out.push_back('"');
  for (std::size_t i = 0, n = 0; i < s.size(); i += n) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    n = 1;
    switch (c) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      default:
        break;
    }
    if (c < 0x20) {
      append_u_escape(out, c);
    } else if (c < 0x7F) {
      out.push_back(static_cast<char>(c));
    } else if (!ensure_ascii) {
      js_decode(s, i, &n);
      out.append(s.substr(i, n));
    } else {
      const char32_t cp = js_decode(s, i, &n);
      if (cp >= 0x10000) {
        append_u_escape(out, 0xD800 + ((cp - 0x10000) >> 10));
        append_u_escape(out, 0xDC00 + ((cp - 0x10000) & 0x3FF));
      } else {
        append_u_escape(out, cp);
      }
    }
  }
  out.push_back('"');
}

}  // namespace day0::jinja
