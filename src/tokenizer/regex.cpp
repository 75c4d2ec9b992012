// PCRE2 behind tok::Regex: pattern translation from Oniguruma's Ruby syntax, compilation with
// UTF + UCP + JIT, and per-thread match scratch (match data, JIT stack).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.h"

#include <pcre2.h>

#include "tokenizer/unicode.h"

namespace day0::tok {

struct Regex::Code {
  std::string source;
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Code() { pcre2_code_free(code); }
};

namespace {

constexpr std::string_view kSpaceSet =
    "\\t-\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";
// Oniguruma's Unicode \w: Alphabetic (letters, Nl, the Other_Alphabetic circled and squared
// letters; its Other_Alphabetic marks are in M), marks, decimal digits and Pc. (Unlike the Rust
// regex crate's \w, not the join controls U+200C/U+200D.)
constexpr std::string_view kWordSet =
    "\\p{L}\\p{Nl}\\p{M}\\p{Nd}\\p{Pc}\\x{24B6}-\\x{24E9}\\x{1F130}-\\x{1F149}\\x{1F150}-\\x{1F169}"
    "\\x{1F170}-\\x{1F189}";
constexpr std::string_view kHexSet = "0-9a-fA-F";

// Match data and JIT stack for the calling thread; one pair serves every pattern (only the whole
// match's offsets are read, so one ovector pair is enough).
struct Scratch {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* stack = nullptr;
  Scratch() {
    data = pcre2_match_data_create(1, nullptr);
    context = pcre2_match_context_create(nullptr);
    stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
    if (context && stack) pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~Scratch() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  if (pcre2_get_error_message(code, buf, sizeof buf) < 0) return "error " + std::to_string(code);
  return reinterpret_cast<const char*>(buf);
}

}  // namespace

std::string translate_oniguruma(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 16);
  int class_depth = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[++i];
      const bool in_class = class_depth > 0;
      std::string_view set;
      bool negate = false;
      switch (e) {
        case 's':
          set = kSpaceSet;
          break;
        case 'S':
          set = kSpaceSet, negate = true;
          break;
        case 'w':
          set = kWordSet;
          break;
        case 'W':
          set = kWordSet, negate = true;
          break;
        case 'h':
          set = kHexSet;
          break;
        case 'H':
          set = kHexSet, negate = true;
          break;
        default:
          break;
      }
      if (set.empty() || (in_class && negate)) {
        // Negated sets cannot be spliced into a class; PCRE2's own \S, \W differ only on rare
        // characters (U+180E, some marks). \H inside a class has no PCRE2 equivalent.
        out.push_back('\\');
        out.push_back(e);
      } else if (in_class) {
        out += set;
      } else {
        out += negate ? "[^" : "[";
        out += set;
        out.push_back(']');
      }
      continue;
    }
    if (class_depth > 0) {
      if (c == '[' && i + 1 < p.size() && p[i + 1] == ':') {
        const std::size_t close = p.find(":]", i + 2);
        if (close != std::string_view::npos) {
          out.append(p.substr(i, close + 2 - i));
          i = close + 1;
          continue;
        }
      }
      if (c == '[') ++class_depth;
      if (c == ']') --class_depth;
      out.push_back(c);
      continue;
    }
    out.push_back(c);
    if (c == '[') {
      class_depth = 1;
      // A ']' right after '[' or '[^' is a literal member.
      if (i + 1 < p.size() && p[i + 1] == '^') out.push_back(p[++i]);
      if (i + 1 < p.size() && p[i + 1] == ']') out.push_back(p[++i]);
    }
  }
  return out;
}

Result<Regex> Regex::build(std::string source, std::string_view pcre_pattern) {
  auto code = std::make_shared<Code>();
  code->source = std::move(source);
  pcre2_compile_context* ctx = pcre2_compile_context_create(nullptr);
  // Oniguruma's Ruby syntax: '^'/'$' are line anchors, and only '\n' ends a line.
  pcre2_set_newline(ctx, PCRE2_NEWLINE_LF);
  int err = 0;
  PCRE2_SIZE err_off = 0;
  code->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pcre_pattern.data()), pcre_pattern.size(),
                             PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE, &err, &err_off, ctx);
  pcre2_compile_context_free(ctx);
  if (!code->code) {
    return make_error("invalid regex \"" + code->source + "\": " + pcre2_message(err) + " at offset " +
                      std::to_string(err_off));
  }
  code->jit = pcre2_jit_compile(code->code, PCRE2_JIT_COMPLETE) == 0;
  return Regex(std::move(code));
}

Result<Regex> Regex::compile(std::string_view pattern) {
  return build(std::string(pattern), translate_oniguruma(pattern));
}

Result<Regex> Regex::literal(std::string_view text) {
  std::string escaped;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x80 && !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) {
      if (u < 0x20 || u == 0x7F) {
        static const char* hex = "0123456789ABCDEF";
        escaped += "\\x{";
        escaped.push_back(hex[u >> 4]);
        escaped.push_back(hex[u & 15]);
        escaped.push_back('}');
        continue;
      }
      escaped.push_back('\\');
    }
    escaped.push_back(c);
  }
  return build(std::string(text), escaped);
}

const std::string& Regex::source() const { return code_->source; }

std::size_t Regex::char_len(std::string_view s, std::size_t i) { return utf8_len(static_cast<unsigned char>(s[i])); }

int Regex::match_at(std::string_view s, std::size_t start, std::size_t* ms, std::size_t* me) const {
  Scratch& sc = scratch();
  const auto subject = reinterpret_cast<PCRE2_SPTR>(s.data());
  int rc;
  if (code_->jit) {
    rc = pcre2_jit_match(code_->code, subject, s.size(), start, 0, sc.data, sc.context);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      rc = pcre2_match(code_->code, subject, s.size(), start, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, sc.data, nullptr);
    }
  } else {
    rc = pcre2_match(code_->code, subject, s.size(), start, PCRE2_NO_UTF_CHECK, sc.data, nullptr);
  }
  if (rc == PCRE2_ERROR_NOMATCH) return 0;
  if (rc < 0) return rc;  // rc == 0 only means the ovector was too small for the groups: still a match
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(sc.data);
  *ms = ov[0];
  *me = ov[1] < ov[0] ? ov[0] : ov[1];  // \K can put the end before the start
  return 1;
}

Error Regex::match_error(int rc, std::size_t offset) const {
  return make_error("regex \"" + code_->source + "\" failed at byte " + std::to_string(offset) + ": " +
                    pcre2_message(rc));
}

}  // namespace day0::tok
