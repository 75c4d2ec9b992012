// Regex: the reference's Oniguruma patterns (Ruby syntax) run on PCRE2 with JIT, with Oniguruma's
// find-iteration semantics. Compiled once, shared read-only; match scratch is per thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace day0::tok {

class Regex {
 public:
  // `pattern` in the reference's (Oniguruma, Ruby) syntax; translated where PCRE2 reads it differently.
  static Result<Regex> compile(std::string_view pattern);
  // Matches `text` literally (the reference's String patterns).
  static Result<Regex> literal(std::string_view text);

  // Calls f(start, end) for each match in order. Empty matches follow Oniguruma's iterator: one
  // right after the previous match is skipped by advancing one character. Returns an error only
  // if the matcher hit a resource limit.
  template <class F>
  Status for_each_match(std::string_view s, F&& f) const {
    std::size_t last_end = 0;
    std::size_t last_match_end = static_cast<std::size_t>(-1);
    while (last_end <= s.size()) {
      std::size_t ms = 0, me = 0;
      const int rc = match_at(s, last_end, &ms, &me);
      if (rc == 0) break;
      if (rc < 0) return match_error(rc, last_end);
      if (ms == me && me == last_match_end) {
        last_end += last_end < s.size() ? char_len(s, last_end) : 1;
        continue;
      }
      last_end = me;
      last_match_end = me;
      f(ms, me);
    }
    return Status::success();
  }

  const std::string& source() const;

 private:
  struct Code;
  explicit Regex(std::shared_ptr<const Code> code) : code_(std::move(code)) {}
  static Result<Regex> build(std::string source, std::string_view pcre_pattern);
  // 1: match found at [*ms, *me); 0: none; < 0: PCRE2 error code.
  int match_at(std::string_view s, std::size_t start, std::size_t* ms, std::size_t* me) const;
  static std::size_t char_len(std::string_view s, std::size_t i);
  Error match_error(int rc, std::size_t offset) const;

  std::shared_ptr<const Code> code_;
};

// Translates Oniguruma (Ruby syntax) escapes whose meaning differs in PCRE2: \s (White_Space, which
// PCRE2 extends with U+180E), \w (Alphabetic, marks, decimal digits, Pc) and \h
// (a hex digit in Ruby, horizontal space in PCRE2). Exposed for tests.
std::string translate_oniguruma(std::string_view pattern);

}  // namespace day0::tok
