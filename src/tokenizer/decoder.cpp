// Decoders (the reference's decoders/*): ByteLevel, Metaspace, Replace, Strip, Fuse, ByteFallback,
// BPEDecoder and Sequence, each a decode_chain over token strings, and their JSON construction.
#include <nlohmann/json.hpp>

#include "tokenizer/json_util.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

namespace day0::tok {
namespace {

class ByteLevelDecoder final : public Decoder {
 public:
  Status decode_chain(std::vector<std::string>& tokens, bool last) const override {
    std::string bytes;
    for (const std::string& t : tokens) {
      // A token with any character outside the byte table (e.g. an added token such as
      // "<｜User｜>") contributes its own UTF-8 instead.
      const std::size_t mark = bytes.size();
      bool mapped = true;
      for (std::size_t i = 0; i < t.size();) {
        std::size_t len = 0;
        const int b = char_to_byte(decode_at(t, i, &len));
        if (b < 0) {
          mapped = false;
          break;
        }
        bytes.push_back(static_cast<char>(b));
        i += len;
      }
      if (!mapped) bytes.resize(mark), bytes += t;
    }
    tokens.assign(1, last ? std::move(bytes) : utf8_lossy(bytes));
    return Status::success();
  }
  bool concatenates() const override { return true; }
};

class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(char32_t replacement, bool strip_first) : replacement_(replacement), strip_first_(strip_first) {}
  Status decode_chain(std::vector<std::string>& tokens, bool) const override {
    for (std::size_t k = 0; k < tokens.size(); ++k) {
      const std::string& t = tokens[k];
      std::string out;
      for (std::size_t i = 0; i < t.size();) {
        std::size_t len = 0;
        const char32_t c = decode_at(t, i, &len);
        if (c != replacement_)
          out.append(t, i, len);
        else if (!(k == 0 && strip_first_))
          out.push_back(' ');  // the first token loses every replacement
        i += len;
      }
      tokens[k] = std::move(out);
    }
    return Status::success();
  }

 private:
  char32_t replacement_;
  bool strip_first_;
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(Regex pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  Status decode_chain(std::vector<std::string>& tokens, bool) const override {
    for (std::string& t : tokens) {
      std::string out;
      std::size_t last = 0;
      D0_RETURN_IF_ERROR(pattern_.for_each_match(t, [&](std::size_t b, std::size_t e) {
        out.append(t, last, b - last);
        out += content_;
        last = e;
      }));
      out.append(t, last, std::string::npos);
      t = std::move(out);
    }
    return Status::success();
  }
  bool per_token() const override { return true; }

 private:
  Regex pattern_;
  std::string content_;
};

class StripDecoder final : public Decoder {
 public:
  StripDecoder(char32_t content, std::size_t start, std::size_t stop) : content_(content), start_(start), stop_(stop) {}
  Status decode_chain(std::vector<std::string>& tokens, bool) const override {
    for (std::string& t : tokens) {
      std::vector<std::pair<std::size_t, std::size_t>> chars;  // (offset, length)
      for (std::size_t i = 0, len = 0; i < t.size(); i += len) {
        decode_at(t, i, &len);
        chars.emplace_back(i, len);
      }
      const auto is_content = [&](std::size_t k) {
        std::size_t len = 0;
        return decode_at(t, chars[k].first, &len) == content_;
      };
      std::size_t cut_start = 0, cut_stop = chars.size();
      for (std::size_t k = 0; k < start_ && k < chars.size() && is_content(k); ++k) cut_start = k + 1;
      for (std::size_t k = 0; k < stop_ && k < chars.size() && is_content(chars.size() - 1 - k); ++k) {
        cut_stop = chars.size() - 1 - k;
      }
      if (cut_stop <= cut_start) {
        t.clear();
        continue;
      }
      const std::size_t b = cut_start < chars.size() ? chars[cut_start].first : t.size();
      const std::size_t e = cut_stop < chars.size() ? chars[cut_stop].first : t.size();
      t = t.substr(b, e - b);
    }
    return Status::success();
  }
  bool per_token() const override { return true; }

 private:
  char32_t content_;
  std::size_t start_, stop_;
};

class FuseDecoder final : public Decoder {
 public:
  Status decode_chain(std::vector<std::string>& tokens, bool) const override {
    std::string all;
    for (const std::string& t : tokens) all += t;
    tokens.assign(1, std::move(all));
    return Status::success();
  }
  bool concatenates() const override { return true; }
};

class ByteFallbackDecoder final : public Decoder {
 public:
  Status decode_chain(std::vector<std::string>& tokens, bool) const override {
    std::vector<std::string> out;
    std::string bytes;
    const auto flush = [&] {
      if (bytes.empty()) return;
      if (!utf8_first_invalid(bytes)) {
        out.push_back(bytes);
      } else {
        // Invalid bytes become one U+FFFD each (not per maximal subpart), as the reference does.
        for (std::size_t i = 0; i < bytes.size(); ++i) out.emplace_back("\xEF\xBF\xBD");
      }
      bytes.clear();
    };
    for (std::string& t : tokens) {
      int value = -1;
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>') value = parse_hex_byte(t[3], t[4]);
      if (value >= 0) {
        bytes.push_back(static_cast<char>(value));
        continue;
      }
      flush();
      out.push_back(std::move(t));
    }
    flush();
    tokens = std::move(out);
    return Status::success();
  }

 private:
  static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  // Rust's u8::from_str_radix(.., 16) on two characters (it also takes a leading '+').
  static int parse_hex_byte(char a, char b) {
    const int lo = hex_digit(b);
    if (lo < 0) return -1;
    if (a == '+') return lo;
    const int hi = hex_digit(a);
    return hi < 0 ? -1 : hi * 16 + lo;
  }
};

// BPEDecoder: the end-of-word suffix becomes a space, except in the last token.
class BpeSuffixDecoder final : public Decoder {
 public:
  explicit BpeSuffixDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
  Status decode_chain(std::vector<std::string>& tokens, bool) const override {
    for (std::size_t k = 0; k < tokens.size(); ++k) {
      if (suffix_.empty()) continue;
      const std::string with = k + 1 == tokens.size() ? "" : " ";
      std::string out;
      const std::string& t = tokens[k];
      for (std::size_t i = 0;;) {
        const std::size_t f = t.find(suffix_, i);
        if (f == std::string::npos) {
          out.append(t, i, std::string::npos);
          break;
        }
        out.append(t, i, f - i);
        out += with;
        i = f + suffix_.size();
      }
      tokens[k] = std::move(out);
    }
    return Status::success();
  }

 private:
  std::string suffix_;
};

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> steps) : steps_(std::move(steps)) {}
  Status decode_chain(std::vector<std::string>& tokens, bool last) const override {
    for (std::size_t i = 0; i < steps_.size(); ++i) {
      D0_RETURN_IF_ERROR(steps_[i]->decode_chain(tokens, last && i + 1 == steps_.size()));
    }
    return Status::success();
  }
  bool per_token() const override {
    for (const auto& s : steps_) {
      if (!s->per_token()) return false;
    }
    return true;
  }
  bool concatenates() const override {
    for (std::size_t i = 0; i + 1 < steps_.size(); ++i) {
      if (!steps_[i]->per_token()) return false;
    }
    return !steps_.empty() && (steps_.back()->per_token() || steps_.back()->concatenates());
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

Result<bool> strips_first(const json& j, const std::string& here) {
  const auto it = j.find("prepend_scheme");
  if (it != j.end() && !it->is_null()) {
    const std::string s = it->is_string() ? it->get<std::string>() : "";
    if (s != "always" && s != "first" && s != "never") {
      return field_error(here, "prepend_scheme", "\"always\", \"first\" or \"never\"");
    }
    return s != "never";
  }
  return get_bool(j, "add_prefix_space", true, here);
}

}  // namespace

Result<std::unique_ptr<Decoder>> decoder_from_json(const json& j, const std::string& file) {
  if (j.is_null()) return std::unique_ptr<Decoder>();
  const std::string where = file + ": decoder";
  D0_ASSIGN_OR_RETURN(const std::string type, type_of(j, where));
  const std::string here = where + " " + type;
  if (type == "ByteLevel") return std::unique_ptr<Decoder>(new ByteLevelDecoder());
  if (type == "Fuse") return std::unique_ptr<Decoder>(new FuseDecoder());
  if (type == "ByteFallback") return std::unique_ptr<Decoder>(new ByteFallbackDecoder());
  if (type == "Metaspace") {
    D0_ASSIGN_OR_RETURN(const char32_t replacement, get_char(j, "replacement", here));
    D0_ASSIGN_OR_RETURN(const bool strip_first, strips_first(j, here));
    return std::unique_ptr<Decoder>(new MetaspaceDecoder(replacement, strip_first));
  }
  if (type == "Replace") {
    D0_ASSIGN_OR_RETURN(Regex pattern, get_pattern(j, here));
    D0_ASSIGN_OR_RETURN(std::string content, get_string(j, "content", here));
    return std::unique_ptr<Decoder>(new ReplaceDecoder(std::move(pattern), std::move(content)));
  }
  if (type == "Strip") {
    D0_ASSIGN_OR_RETURN(const char32_t content, get_char(j, "content", here));
    D0_ASSIGN_OR_RETURN(const std::uint64_t start, get_uint(j, "start", 0, here));
    D0_ASSIGN_OR_RETURN(const std::uint64_t stop, get_uint(j, "stop", 0, here));
    return std::unique_ptr<Decoder>(new StripDecoder(content, start, stop));
  }
  if (type == "BPEDecoder") {
    const auto it = j.find("suffix");
    std::string suffix = "</w>";
    if (it != j.end() && !it->is_null()) {
      if (!it->is_string()) return field_error(here, "suffix", "a string");
      suffix = it->get<std::string>();
    }
    return std::unique_ptr<Decoder>(new BpeSuffixDecoder(std::move(suffix)));
  }
  if (type == "Sequence") {
    const auto it = j.find("decoders");
    if (it == j.end() || !it->is_array()) return field_error(here, "decoders", "an array");
    std::vector<std::unique_ptr<Decoder>> steps;
    for (const json& step : *it) {
      if (step.is_null()) return make_error(here + ": null step");
      D0_ASSIGN_OR_RETURN(auto d, decoder_from_json(step, file));
      steps.push_back(std::move(d));
    }
    return std::unique_ptr<Decoder>(new SequenceDecoder(std::move(steps)));
  }
  return make_error(where + " type \"" + type + "\" is not supported");
}

}  // namespace day0::tok
