// Pre-tokenizers (the reference's pre_tokenizers/*): Split, ByteLevel, Digits, Metaspace, Whitespace,
// WhitespaceSplit and Sequence, the five split behaviors, the GPT-2 byte table, and JSON construction.
// Pieces are spans over one buffer: splitting never copies text, only ByteLevel/Metaspace rewrite it.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>

#include "tokenizer/json_util.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace day0::tok {

const std::array<char32_t, 256>& byte_to_char() {
  // GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves, the other 68 bytes to
  // U+0100 onwards in byte order.
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> t{};
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      t[b] = printable ? static_cast<char32_t>(b) : next++;
    }
    return t;
  }();
  return table;
}

int char_to_byte(char32_t c) {
  static const std::array<std::int16_t, 0x144> inverse = [] {
    std::array<std::int16_t, 0x144> inv;
    inv.fill(-1);
    for (int b = 0; b < 256; ++b) inv[byte_to_char()[b]] = static_cast<std::int16_t>(b);
    return inv;
  }();
  return c < inverse.size() ? inverse[c] : -1;
}

namespace {

struct Match {
  std::uint32_t begin, end;
  bool is_match;
};

// The reference's NormalizedString::split: turns the match list of one piece into sub-pieces per
// behavior, drops removed and empty ones, and appends them (absolute offsets) to `out`.
void split_by_behavior(const std::vector<Match>& matches, SplitBehavior behavior, const Span& parent,
                       std::vector<Span>& out) {
  struct Part {
    std::uint32_t begin, end;
    bool remove;
  };
  std::vector<Part> parts;
  parts.reserve(matches.size());
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::Isolated:
      for (const Match& m : matches) parts.push_back({m.begin, m.end, false});
      break;
    case SplitBehavior::Removed:
      for (const Match& m : matches) parts.push_back({m.begin, m.end, m.is_match});
      break;
    case SplitBehavior::Contiguous:
      for (const Match& m : matches) {
        if (m.is_match == previous_match && !parts.empty())
          parts.back().end = m.end;
        else
          parts.push_back({m.begin, m.end, false});
        previous_match = m.is_match;
      }
      break;
    case SplitBehavior::MergedWithPrevious:
      for (const Match& m : matches) {
        if (m.is_match && !previous_match && !parts.empty())
          parts.back().end = m.end;
        else
          parts.push_back({m.begin, m.end, false});
        previous_match = m.is_match;
      }
      break;
    case SplitBehavior::MergedWithNext:
      for (auto it = matches.rbegin(); it != matches.rend(); ++it) {
        if (it->is_match && !previous_match && !parts.empty())
          parts.back().begin = it->begin;
        else
          parts.push_back({it->begin, it->end, false});
        previous_match = it->is_match;
      }
      std::reverse(parts.begin(), parts.end());
      break;
  }
  for (const Part& p : parts) {
    if (p.remove || p.begin == p.end) continue;
    out.push_back(Span{parent.begin + p.begin, parent.begin + p.end, parent.at_origin && p.begin == 0});
  }
}

// The reference's Pattern::find_matches for a regex: gaps and matches covering the whole text.
Status regex_matches(const Regex& re, std::string_view text, bool invert, std::vector<Match>& out) {
  out.clear();
  std::uint32_t prev = 0;
  D0_RETURN_IF_ERROR(re.for_each_match(text, [&](std::size_t b, std::size_t e) {
    if (prev != b) out.push_back({prev, static_cast<std::uint32_t>(b), invert});
    out.push_back({static_cast<std::uint32_t>(b), static_cast<std::uint32_t>(e), !invert});
    prev = static_cast<std::uint32_t>(e);
  }));
  if (prev != text.size()) out.push_back({prev, static_cast<std::uint32_t>(text.size()), invert});
  return Status::success();
}

// find_matches for a character predicate: each matching character is its own match.
template <class Pred>
void char_matches(std::string_view text, Pred pred, std::vector<Match>& out) {
  out.clear();
  std::uint32_t last = 0;
  for (std::size_t i = 0; i < text.size();) {
    std::size_t len = 0;
    const char32_t c = decode_at(text, i, &len);
    if (pred(c)) {
      if (last < i) out.push_back({last, static_cast<std::uint32_t>(i), false});
      out.push_back({static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(i + len), true});
      last = static_cast<std::uint32_t>(i + len);
    }
    i += len;
  }
  if (last < text.size()) out.push_back({last, static_cast<std::uint32_t>(text.size()), false});
}

class Split final : public PreTokenizer {
 public:
  Split(Regex re, SplitBehavior behavior, bool invert) : re_(std::move(re)), behavior_(behavior), invert_(invert) {}
  Status pre_tokenize(Pieces& p) const override {
    std::vector<Span> out;
    out.reserve(p.spans.size() * 2 + p.buf.size() / 4);
    std::vector<Match> matches;
    for (const Span& span : p.spans) {
      const std::string_view text = p.text(span);
      if (behavior_ == SplitBehavior::Isolated && !invert_) {
        // Hot path (every real byte-level tokenizer): matches and gaps are all kept.
        std::uint32_t prev = 0;
        const auto emit = [&](std::uint32_t b, std::uint32_t e) {
          if (b < e) out.push_back(Span{span.begin + b, span.begin + e, span.at_origin && b == 0});
        };
        D0_RETURN_IF_ERROR(re_.for_each_match(text, [&](std::size_t b, std::size_t e) {
          emit(prev, static_cast<std::uint32_t>(b));
          emit(static_cast<std::uint32_t>(b), static_cast<std::uint32_t>(e));
          prev = static_cast<std::uint32_t>(e);
        }));
        emit(prev, static_cast<std::uint32_t>(text.size()));
        continue;
      }
      D0_RETURN_IF_ERROR(regex_matches(re_, text, invert_, matches));
      split_by_behavior(matches, behavior_, span, out);
    }
    p.spans = std::move(out);
    return Status::success();
  }

 private:
  Regex re_;
  SplitBehavior behavior_;
  bool invert_;
};

class ByteLevel final : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, std::optional<Regex> re) : add_prefix_space_(add_prefix_space), re_(std::move(re)) {
    for (int b = 0; b < 256; ++b) {
      std::string s;
      append_utf8(s, byte_to_char()[b]);
      map_[b].len = static_cast<std::uint8_t>(s.size());
      for (std::size_t k = 0; k < s.size(); ++k) map_[b].bytes[k] = s[k];
    }
  }

  Status pre_tokenize(Pieces& p) const override {
    Pieces q;
    q.buf.reserve(p.buf.size() + p.buf.size() / 2 + p.spans.size());
    q.spans.reserve(p.spans.size());
    std::string prefixed;
    for (const Span& span : p.spans) {
      std::string_view text = p.text(span);
      if (add_prefix_space_ && text.front() != ' ') {
        prefixed.resize(text.size() + 1);
        prefixed[0] = ' ';
        text.copy(prefixed.data() + 1, text.size());
        text = prefixed;
      }
      if (!re_) {
        emit_mapped(q, text, span.at_origin);
        continue;
      }
      std::size_t prev = 0;
      D0_RETURN_IF_ERROR(re_->for_each_match(text, [&](std::size_t b, std::size_t e) {
        if (prev < b) emit_mapped(q, text.substr(prev, b - prev), span.at_origin && prev == 0);
        if (b < e) emit_mapped(q, text.substr(b, e - b), span.at_origin && b == 0);
        prev = e;
      }));
      if (prev < text.size()) emit_mapped(q, text.substr(prev), span.at_origin && prev == 0);
    }
    p = std::move(q);
    return Status::success();
  }

 private:
  struct Mapped {
    char bytes[2];
    std::uint8_t len;
  };
  void emit_mapped(Pieces& q, std::string_view text, bool at_origin) const {
    const auto begin = static_cast<std::uint32_t>(q.buf.size());
    for (const char c : text) {
      const Mapped& m = map_[static_cast<unsigned char>(c)];
      q.buf.append(m.bytes, m.len);
    }
    q.spans.push_back(Span{begin, static_cast<std::uint32_t>(q.buf.size()), at_origin});
  }

  bool add_prefix_space_;
  std::optional<Regex> re_;
  std::array<Mapped, 256> map_{};
};

class Digits final : public PreTokenizer {
 public:
  explicit Digits(bool individual) : individual_(individual) {}
  Status pre_tokenize(Pieces& p) const override {
    std::vector<Span> out;
    std::vector<Match> matches;
    for (const Span& span : p.spans) {
      char_matches(p.text(span), is_numeric, matches);
      split_by_behavior(matches, individual_ ? SplitBehavior::Isolated : SplitBehavior::Contiguous, span, out);
    }
    p.spans = std::move(out);
    return Status::success();
  }

 private:
  bool individual_;
};

enum class Prepend { Always, First, Never };

class Metaspace final : public PreTokenizer {
 public:
  Metaspace(char32_t replacement, Prepend scheme, bool split)
      : replacement_(replacement), scheme_(scheme), split_(split) {
    append_utf8(rep_, replacement);
  }
  Status pre_tokenize(Pieces& p) const override {
    Pieces q;
    std::vector<Match> matches;
    std::string s;
    for (const Span& span : p.spans) {
      s.clear();
      for (const char c : p.text(span)) {
        if (c == ' ')
          s += rep_;
        else
          s.push_back(c);
      }
      const bool needs_prefix = s.compare(0, rep_.size(), rep_) != 0;
      if (needs_prefix && (scheme_ == Prepend::Always || (scheme_ == Prepend::First && span.at_origin))) {
        s.insert(0, rep_);
      }
      const Span whole{static_cast<std::uint32_t>(q.buf.size()), static_cast<std::uint32_t>(q.buf.size() + s.size()),
                       span.at_origin};
      q.buf += s;
      if (!split_) {
        if (whole.begin < whole.end) q.spans.push_back(whole);
        continue;
      }
      char_matches(
          s, [this](char32_t c) { return c == replacement_; }, matches);
      split_by_behavior(matches, SplitBehavior::MergedWithNext, whole, q.spans);
    }
    p = std::move(q);
    return Status::success();
  }

 private:
  char32_t replacement_;
  std::string rep_;
  Prepend scheme_;
  bool split_;
};

// Whitespace keeps the regex matches and drops what lies between (Invert + Removed in the reference).
class KeepMatches final : public PreTokenizer {
 public:
  explicit KeepMatches(Regex re) : re_(std::move(re)) {}
  Status pre_tokenize(Pieces& p) const override {
    std::vector<Span> out;
    std::vector<Match> matches;
    for (const Span& span : p.spans) {
      D0_RETURN_IF_ERROR(regex_matches(re_, p.text(span), /*invert=*/true, matches));
      split_by_behavior(matches, SplitBehavior::Removed, span, out);
    }
    p.spans = std::move(out);
    return Status::success();
  }

 private:
  Regex re_;
};

class WhitespaceSplit final : public PreTokenizer {
 public:
  Status pre_tokenize(Pieces& p) const override {
    std::vector<Span> out;
    std::vector<Match> matches;
    for (const Span& span : p.spans) {
      char_matches(p.text(span), is_white_space, matches);
      split_by_behavior(matches, SplitBehavior::Removed, span, out);
    }
    p.spans = std::move(out);
    return Status::success();
  }
};

class Sequence final : public PreTokenizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PreTokenizer>> steps) : steps_(std::move(steps)) {}
  Status pre_tokenize(Pieces& p) const override {
    for (const auto& step : steps_) {
      D0_RETURN_IF_ERROR(step->pre_tokenize(p));
      if (p.spans.empty()) break;
    }
    return Status::success();
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

// \w+|[^\w\s]+ with the Rust regex crate's \w (Alphabetic, marks, digits, Pc, join controls).
constexpr std::string_view kRustWordsPattern =
    R"([\p{L}\p{Nl}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}\x{24B6}-\x{24E9}\x{1F130}-\x{1F149}\x{1F150}-\x{1F169}\x{1F170}-\x{1F189}]+|)"
    R"([^\p{L}\p{Nl}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}\x{24B6}-\x{24E9}\x{1F130}-\x{1F149}\x{1F150}-\x{1F169}\x{1F170}-\x{1F189}\s]+)";

constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace

Result<std::unique_ptr<PreTokenizer>> pre_tokenizer_from_json(const json& j, const std::string& file) {
  if (j.is_null()) return std::unique_ptr<PreTokenizer>();
  const std::string where = file + ": pre_tokenizer";
  D0_ASSIGN_OR_RETURN(const std::string type, type_of(j, where));
  const std::string here = where + " " + type;
  if (type == "Split") {
    D0_ASSIGN_OR_RETURN(Regex re, get_pattern(j, here));
    D0_ASSIGN_OR_RETURN(const std::string behavior, get_string(j, "behavior", here));
    D0_ASSIGN_OR_RETURN(const bool invert, get_bool(j, "invert", false, here));
    SplitBehavior b;
    if (behavior == "Removed")
      b = SplitBehavior::Removed;
    else if (behavior == "Isolated")
      b = SplitBehavior::Isolated;
    else if (behavior == "MergedWithPrevious")
      b = SplitBehavior::MergedWithPrevious;
    else if (behavior == "MergedWithNext")
      b = SplitBehavior::MergedWithNext;
    else if (behavior == "Contiguous")
      b = SplitBehavior::Contiguous;
    else
      return field_error(here, "behavior", "Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous");
    return std::unique_ptr<PreTokenizer>(new Split(std::move(re), b, invert));
  }
  if (type == "ByteLevel") {
    D0_ASSIGN_OR_RETURN(const bool add_prefix_space, get_bool(j, "add_prefix_space", true, here));
    D0_ASSIGN_OR_RETURN(const bool use_regex, get_bool(j, "use_regex", true, here));
    std::optional<Regex> re;
    if (use_regex) {
      D0_ASSIGN_OR_RETURN(Regex gpt2, Regex::compile(kGpt2Pattern));
      re = std::move(gpt2);
    }
    return std::unique_ptr<PreTokenizer>(new ByteLevel(add_prefix_space, std::move(re)));
  }
  if (type == "Digits") {
    D0_ASSIGN_OR_RETURN(const bool individual, get_bool(j, "individual_digits", false, here));
    return std::unique_ptr<PreTokenizer>(new Digits(individual));
  }
  if (type == "Metaspace") {
    D0_ASSIGN_OR_RETURN(const char32_t replacement, get_char(j, "replacement", here));
    D0_ASSIGN_OR_RETURN(const bool split, get_bool(j, "split", true, here));
    Prepend scheme = Prepend::Always;
    const auto it = j.find("prepend_scheme");
    if (it != j.end() && !it->is_null()) {
      const std::string s = it->is_string() ? it->get<std::string>() : "";
      if (s == "always")
        scheme = Prepend::Always;
      else if (s == "first")
        scheme = Prepend::First;
      else if (s == "never")
        scheme = Prepend::Never;
      else
        return field_error(here, "prepend_scheme", "\"always\", \"first\" or \"never\"");
    } else {
      D0_ASSIGN_OR_RETURN(const bool add_prefix_space, get_bool(j, "add_prefix_space", true, here));
      scheme = add_prefix_space ? Prepend::Always : Prepend::Never;
    }
    return std::unique_ptr<PreTokenizer>(new Metaspace(replacement, scheme, split));
  }
  if (type == "Whitespace") {
    // The reference runs \w+|[^\w\s]+ on the Rust regex crate here, whose \w adds the join controls.
    D0_ASSIGN_OR_RETURN(Regex re, Regex::compile(kRustWordsPattern));
    return std::unique_ptr<PreTokenizer>(new KeepMatches(std::move(re)));
  }
  if (type == "WhitespaceSplit") return std::unique_ptr<PreTokenizer>(new WhitespaceSplit());
  if (type == "Sequence") {
    const auto it = j.find("pretokenizers");
    if (it == j.end() || !it->is_array()) return field_error(here, "pretokenizers", "an array");
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (const json& step : *it) {
      if (step.is_null()) return make_error(here + ": null step");
      D0_ASSIGN_OR_RETURN(auto s, pre_tokenizer_from_json(step, file));
      steps.push_back(std::move(s));
    }
    return std::unique_ptr<PreTokenizer>(new Sequence(std::move(steps)));
  }
  return make_error(where + " type \"" + type + "\" is not supported");
}

}  // namespace day0::tok
