// The lexer: transformers' preprocessing (with trim_blocks and lstrip_blocks on, as @huggingface/jinja's
// Template sets them) followed by @huggingface/jinja's tokenizer, byte for byte; every byte keeps the
// line it had in the original source so errors can name it.
#include "tokenizer/jinja/lexer.h"

#include <utility>

#include "tokenizer/jinja/js_string.h"
#include "tokenizer/unicode.h"
#include "tokenizer/jinja/value.h"

namespace day0::jinja {
namespace {

struct Src {
  std::string text;
  std::vector<int> line;  // per byte
  void push(char c, int l) {
    text.push_back(c);
    line.push_back(l);
  }
  std::size_t size() const { return text.size(); }
};

bool starts(const std::string& s, std::size_t i, std::string_view p) { return s.compare(i, p.size(), p) == 0; }

// Where a JS multiline `^` matches: after \n, \r, U+2028, U+2029.
std::size_t line_terminator_len(const std::string& s, std::size_t i) {
  if (s[i] == '\n' || s[i] == '\r') return 1;
  if (starts(s, i, "\xE2\x80\xA8") || starts(s, i, "\xE2\x80\xA9")) return 3;
  return 0;
}

Src preprocess(std::string_view source) {
  Src a;
  int line = 1;
  for (char c : source) {
    a.push(c, line);
    if (c == '\n') ++line;
  }
  // A single trailing newline is dropped.
  if (!a.text.empty() && a.text.back() == '\n') a.text.pop_back(), a.line.pop_back();

  // lstrip_blocks: /^[ \t]*({[#%-])/gm -> "$1".
  Src b;
  for (std::size_t i = 0; i < a.size();) {
    if (i == 0 || line_terminator_len(a.text, i - 1) || (i >= 3 && line_terminator_len(a.text, i - 3) == 3)) {
      std::size_t j = i;
      while (j < a.size() && (a.text[j] == ' ' || a.text[j] == '\t')) ++j;
      if (j + 1 < a.size() && a.text[j] == '{' &&
          (a.text[j + 1] == '#' || a.text[j + 1] == '%' || a.text[j + 1] == '-'))
        i = j;
    }
    const std::size_t end = i + 1;
    for (; i < end; ++i) b.push(a.text[i], a.line[i]);
  }

  // trim_blocks: /([#%-]})\n/g -> "$1".
  Src c;
  for (std::size_t i = 0; i < b.size(); ++i) {
    c.push(b.text[i], b.line[i]);
    const char t = b.text[i];
    if ((t == '#' || t == '%' || t == '-') && i + 2 < b.size() && b.text[i + 1] == '}' && b.text[i + 2] == '\n') {
      c.push('}', b.line[i + 1]);
      i += 2;
    }
  }

  // {% generation %} / {% endgeneration %} tags vanish (honouring {%- and -%}).
  Src d;
  std::size_t match_end_out = 0;  // output size where the previous match ended
  for (std::size_t i = 0; i < c.size();) {
    if (starts(c.text, i, "{%")) {
      std::size_t j = i + 2;
      const bool lstrip = j < c.size() && c.text[j] == '-';
      if (lstrip) ++j;
      while (std::size_t n = js_space_len(c.text, j)) j += n;
      bool tag = false;
      if (starts(c.text, j, "endgeneration"))
        j += 13, tag = true;
      else if (starts(c.text, j, "generation"))
        j += 10, tag = true;
      if (tag) {
        while (std::size_t n = js_space_len(c.text, j)) j += n;
        const bool rstrip = j < c.size() && c.text[j] == '-';
        if (rstrip) ++j;
        tag = starts(c.text, j, "%}");
        if (tag) {
          j += 2;
          if (lstrip) {
            while (d.size() > match_end_out) {
              std::size_t start = d.size() - 1;
              while (start > match_end_out && (static_cast<unsigned char>(d.text[start]) & 0xC0) == 0x80) --start;
              if (js_space_len(d.text, start) != d.size() - start) break;
              d.text.resize(start);
              d.line.resize(start);
            }
          }
          std::size_t k = j;
          while (std::size_t n = js_space_len(c.text, k)) k += n;
          if (!rstrip)
            for (std::size_t q = j; q < k; ++q) d.push(c.text[q], c.line[q]);
          i = k;
          match_end_out = d.size();
          continue;
        }
      }
    }
    d.push(c.text[i], c.line[i]);
    ++i;
  }
  return d;
}

struct Lexer {
  Src src;
  std::vector<Token> tokens;
  std::size_t pos = 0;
  int curly_depth = 0;

  char at(std::size_t i) const { return i < src.size() ? src.text[i] : '\0'; }
  int line_at(std::size_t i) const {
    if (src.line.empty()) return 1;
    return src.line[i < src.line.size() ? i : src.line.size() - 1];
  }
  [[noreturn]] void error(const std::string& msg, std::size_t where) const { throw JinjaError{msg, line_at(where)}; }
  bool last_is(Tok t) const { return !tokens.empty() && tokens.back().type == t; }
  void push(Tok t, std::string v, std::size_t where) { tokens.push_back(Token{t, std::move(v), line_at(where)}); }

  void strip_trailing_whitespace() {
    if (last_is(Tok::Text)) {
      tokens.back().value = js_trim_end(tokens.back().value);
      if (tokens.back().value.empty()) tokens.pop_back();
    }
  }
  void skip_leading_whitespace() {
    while (std::size_t n = js_space_len(src.text, pos)) pos += n;
  }
  // consumeWhile's end-of-input check: running off the end inside a tag is an error.
  void check_not_end(std::size_t start) const {
    if (pos >= src.size()) error("unexpected end of template inside a tag", start);
  }
  std::string consume_digits(std::size_t start) {
    std::string s;
    while (at(pos) >= '0' && at(pos) <= '9') {
      s.push_back(src.text[pos++]);
      check_not_end(start);
    }
    return s;
  }

  std::string consume_string(char quote, std::size_t start) {
    std::string s;
    int pending_high = -1;  // a \uD8xx waiting for its low surrogate
    const auto flush = [&] {
      if (pending_high >= 0) tok::append_utf8(s, 0xFFFD);
      pending_high = -1;
    };
    while (pos < src.size() && src.text[pos] != quote) {
      if (src.text[pos] == '\\') {
        ++pos;
        if (pos >= src.size()) error("unexpected end of template in a string literal", start);
        const char e = src.text[pos++];
        if (e == 'x' || e == 'u') {
          const std::size_t len = e == 'x' ? 2 : 4;
          unsigned unit = 0;
          for (std::size_t k = 0; k < len; ++k) {
            const char h = at(pos + k);
            const int d = (h >= '0' && h <= '9')   ? h - '0'
                          : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                          : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                                   : -1;
            if (d < 0 || pos + k >= src.size()) error(std::string("invalid escape sequence \\") + e, pos - 2);
            unit = unit * 16 + static_cast<unsigned>(d);
          }
          pos += len;
          if (unit >= 0xDC00 && unit <= 0xDFFF && pending_high >= 0) {
            tok::append_utf8(s, 0x10000 + ((static_cast<char32_t>(pending_high) - 0xD800) << 10) + (unit - 0xDC00));
            pending_high = -1;
          } else if (unit >= 0xD800 && unit <= 0xDBFF) {
            flush();
            pending_high = static_cast<int>(unit);
          } else {
            flush();
            tok::append_utf8(s, unit >= 0xD800 && unit <= 0xDFFF ? 0xFFFD : unit);
          }
          continue;
        }
        flush();
        switch (e) {
          case 'n':
            s.push_back('\n');
            break;
          case 't':
            s.push_back('\t');
            break;
          case 'r':
            s.push_back('\r');
            break;
          case 'b':
            s.push_back('\b');
            break;
          case 'f':
            s.push_back('\f');
            break;
          case 'v':
            s.push_back('\v');
            break;
          case '\'':
          case '"':
          case '\\':
            s.push_back(e);
            break;
          default:
            error(std::string("unexpected escaped character '") + e + "'", pos - 2);
        }
        continue;
      }
      flush();
      s.push_back(src.text[pos++]);
      check_not_end(start);
    }
    flush();
    if (pos >= src.size()) error("unterminated string literal", start);
    ++pos;  // closing quote
    return s;
  }

  void run() {
    static const std::pair<std::string_view, Tok> kTable[] = {
        {"{%", Tok::OpenStatement},  {"%}", Tok::CloseStatement},
        {"{{", Tok::OpenExpression}, {"}}", Tok::CloseExpression},
        {"(", Tok::OpenParen},       {")", Tok::CloseParen},
        {"{", Tok::OpenCurly},       {"}", Tok::CloseCurly},
        {"[", Tok::OpenSquare},      {"]", Tok::CloseSquare},
        {",", Tok::Comma},           {".", Tok::Dot},
        {":", Tok::Colon},           {"|", Tok::Pipe},
        {"<=", Tok::Comparison},     {">=", Tok::Comparison},
        {"==", Tok::Comparison},     {"!=", Tok::Comparison},
        {"<", Tok::Comparison},      {">", Tok::Comparison},
        {"+", Tok::Additive},        {"-", Tok::Additive},
        {"~", Tok::Additive},        {"**", Tok::Power},
        {"*", Tok::Multiplicative},  {"//", Tok::Multiplicative},
        {"/", Tok::Multiplicative},  {"%", Tok::Multiplicative},
        {"=", Tok::Equals},
    };
    const std::string& s = src.text;
    while (pos < s.size()) {
      if (tokens.empty() || last_is(Tok::CloseStatement) || last_is(Tok::CloseExpression) || last_is(Tok::Comment)) {
        const std::size_t start = pos;
        while (pos < s.size() && !(s[pos] == '{' && (at(pos + 1) == '%' || at(pos + 1) == '{' || at(pos + 1) == '#')))
          ++pos;
        if (pos > start) {
          push(Tok::Text, s.substr(start, pos - start), start);
          continue;
        }
      }
      const std::size_t start = pos;
      if (s[pos] == '{' && at(pos + 1) == '#') {
        pos += 2;
        const bool strip_before = at(pos) == '-';
        if (strip_before) ++pos;
        std::string comment;
        while (at(pos) != '#' || at(pos + 1) != '}') {
          if (pos + 2 >= s.size()) error("missing end of comment tag #}", start);
          comment.push_back(s[pos++]);
        }
        const bool strip_after = !comment.empty() && comment.back() == '-';
        if (strip_after) comment.pop_back();
        if (strip_before) strip_trailing_whitespace();
        push(Tok::Comment, std::move(comment), start);
        pos += 2;
        if (strip_after) skip_leading_whitespace();
        continue;
      }
      if (starts(s, pos, "{%-")) {
        strip_trailing_whitespace();
        push(Tok::OpenStatement, "{%", start);
        pos += 3;
        continue;
      }
      if (starts(s, pos, "{{-")) {
        strip_trailing_whitespace();
        push(Tok::OpenExpression, "{{", start);
        curly_depth = 0;
        pos += 3;
        continue;
      }
      while (std::size_t n = js_space_len(s, pos)) {
        pos += n;
        check_not_end(start);
      }
      if (starts(s, pos, "-%}")) {
        push(Tok::CloseStatement, "%}", pos);
        pos += 3;
        skip_leading_whitespace();
        continue;
      }
      if (starts(s, pos, "-}}")) {
        push(Tok::CloseExpression, "}}", pos);
        pos += 3;
        skip_leading_whitespace();
        continue;
      }
      const std::size_t tok_start = pos;
      const char ch = s[pos];
      if (ch == '-' || ch == '+') {
        if (tokens.empty() || last_is(Tok::Text)) error(std::string("unexpected character '") + ch + "'", pos);
        const Tok lt = tokens.back().type;
        if (lt != Tok::Ident && lt != Tok::Number && lt != Tok::String && lt != Tok::CloseParen &&
            lt != Tok::CloseSquare) {
          ++pos;
          std::string num = consume_digits(tok_start);
          if (!num.empty() && at(pos) == '.' && at(pos + 1) >= '0' && at(pos + 1) <= '9') {
            ++pos;
            num.push_back('.');
            num += consume_digits(tok_start);
          }
          push(num.empty() ? Tok::Unary : Tok::Number, std::string(1, ch) + num, tok_start);
          continue;
        }
      }
      bool matched = false;
      for (const auto& [seq, type] : kTable) {
        if (seq == "}}" && curly_depth > 0) continue;
        if (starts(s, pos, seq)) {
          push(type, std::string(seq), pos);
          if (type == Tok::OpenExpression)
            curly_depth = 0;
          else if (type == Tok::OpenCurly)
            ++curly_depth;
          else if (type == Tok::CloseCurly)
            --curly_depth;
          pos += seq.size();
          matched = true;
          break;
        }
      }
      if (matched) continue;
      if (ch == '\'' || ch == '"') {
        ++pos;
        push(Tok::String, consume_string(ch, tok_start), tok_start);
        continue;
      }
      if (ch >= '0' && ch <= '9') {
        std::string num = consume_digits(tok_start);
        if (!last_is(Tok::Dot) && at(pos) == '.' && at(pos + 1) >= '0' && at(pos + 1) <= '9') {
          ++pos;
          num.push_back('.');
          num += consume_digits(tok_start);
        }
        push(Tok::Number, std::move(num), tok_start);
        continue;
      }
      const auto is_word = [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
      };
      if (is_word(ch)) {
        std::string word;
        while (is_word(at(pos))) {
          word.push_back(s[pos++]);
          check_not_end(tok_start);
        }
        push(Tok::Ident, std::move(word), tok_start);
        continue;
      }
      std::size_t n = 0;
      js_decode(s, pos, &n);
      error("unexpected character '" + s.substr(pos, n) + "'", pos);
    }
  }
};

}  // namespace

const char* tok_name(Tok t) {
  switch (t) {
    case Tok::Text:
      return "text";
    case Tok::Number:
      return "number";
    case Tok::String:
      return "string";
    case Tok::Ident:
      return "identifier";
    case Tok::Equals:
      return "'='";
    case Tok::OpenParen:
      return "'('";
    case Tok::CloseParen:
      return "')'";
    case Tok::OpenStatement:
      return "'{%'";
    case Tok::CloseStatement:
      return "'%}'";
    case Tok::OpenExpression:
      return "'{{'";
    case Tok::CloseExpression:
      return "'}}'";
    case Tok::OpenSquare:
      return "'['";
    case Tok::CloseSquare:
      return "']'";
    case Tok::OpenCurly:
      return "'{'";
    case Tok::CloseCurly:
      return "'}'";
    case Tok::Comma:
      return "','";
    case Tok::Dot:
      return "'.'";
    case Tok::Colon:
      return "':'";
    case Tok::Pipe:
      return "'|'";
    case Tok::Additive:
      return "additive operator";
    case Tok::Multiplicative:
      return "multiplicative operator";
    case Tok::Power:
      return "'**'";
    case Tok::Comparison:
      return "comparison operator";
    case Tok::Unary:
      return "unary operator";
    case Tok::Comment:
      return "comment";
  }
  return "?";
}

std::vector<Token> tokenize(std::string_view source) {
  Lexer lx;
  lx.src = preprocess(source);
  lx.run();
  return std::move(lx.tokens);
}

}  // namespace day0::jinja
