// Normalizers (the reference's normalizers/*): Unicode forms, Lowercase, Prepend, Replace, Strip,
// StripAccents and Sequence, and their construction from tokenizer.json.
// Offsets are not tracked: encode() returns ids only, and no id depends on alignments here.
#include <nlohmann/json.hpp>

#include "tokenizer/json_util.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace day0::tok {
namespace {

class UnicodeForm final : public Normalizer {
 public:
  explicit UnicodeForm(NormForm form) : form_(form) {}
  Status normalize(std::string& s) const override {
    if (!unicode_normalize(s, form_)) return make_error("Unicode normalization failed (out of memory)");
    return Status::success();
  }

 private:
  NormForm form_;
};

class Lowercase final : public Normalizer {
 public:
  Status normalize(std::string& s) const override {
    unicode_lowercase(s);
    return Status::success();
  }
};

class Prepend final : public Normalizer {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  Status normalize(std::string& s) const override {
    if (!s.empty()) s.insert(0, prefix_);  // the reference leaves empty strings empty
    return Status::success();
  }

 private:
  std::string prefix_;
};

class Replace final : public Normalizer {
 public:
  Replace(Regex pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  Status normalize(std::string& s) const override {
    std::string out;
    std::size_t last = 0;
    bool matched = false;
    D0_RETURN_IF_ERROR(pattern_.for_each_match(s, [&](std::size_t b, std::size_t e) {
      out.append(s, last, b - last);
      out += content_;
      last = e;
      matched = true;
    }));
    if (!matched) return Status::success();
    out.append(s, last, std::string::npos);
    s = std::move(out);
    return Status::success();
  }

 private:
  Regex pattern_;
  std::string content_;
};

class Strip final : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  Status normalize(std::string& s) const override {
    std::size_t b = 0, e = s.size();
    if (left_) {
      while (b < e) {
        std::size_t len = 0;
        if (!is_white_space(decode_at(s, b, &len))) break;
        b += len;
      }
    }
    if (right_) {
      while (e > b) {
        std::size_t start = e - 1;
        while (start > b && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
        std::size_t len = 0;
        if (!is_white_space(decode_at(s, start, &len))) break;
        e = start;
      }
    }
    s = s.substr(b, e - b);
    return Status::success();
  }

 private:
  bool left_, right_;
};

class StripAccents final : public Normalizer {
 public:
  Status normalize(std::string& s) const override {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size();) {
      std::size_t len = 0;
      const char32_t c = decode_at(s, i, &len);
      if (!is_mark(c)) out.append(s, i, len);
      i += len;
    }
    s = std::move(out);
    return Status::success();
  }
};

class Sequence final : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
  Status normalize(std::string& s) const override {
    for (const auto& step : steps_) D0_RETURN_IF_ERROR(step->normalize(s));
    return Status::success();
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

}  // namespace

Result<std::unique_ptr<Normalizer>> normalizer_from_json(const json& j, const std::string& file) {
  if (j.is_null()) return std::unique_ptr<Normalizer>();
  const std::string where = file + ": normalizer";
  D0_ASSIGN_OR_RETURN(const std::string type, type_of(j, where));
  const std::string here = where + " " + type;
  if (type == "NFC") return std::unique_ptr<Normalizer>(new UnicodeForm(NormForm::NFC));
  if (type == "NFD") return std::unique_ptr<Normalizer>(new UnicodeForm(NormForm::NFD));
  if (type == "NFKC") return std::unique_ptr<Normalizer>(new UnicodeForm(NormForm::NFKC));
  if (type == "NFKD") return std::unique_ptr<Normalizer>(new UnicodeForm(NormForm::NFKD));
  if (type == "Lowercase") return std::unique_ptr<Normalizer>(new Lowercase());
  if (type == "StripAccents") return std::unique_ptr<Normalizer>(new StripAccents());
  if (type == "Prepend") {
    D0_ASSIGN_OR_RETURN(std::string prefix, get_string(j, "prepend", here));
    return std::unique_ptr<Normalizer>(new Prepend(std::move(prefix)));
  }
  if (type == "Replace") {
    D0_ASSIGN_OR_RETURN(Regex pattern, get_pattern(j, here));
    D0_ASSIGN_OR_RETURN(std::string content, get_string(j, "content", here));
    return std::unique_ptr<Normalizer>(new Replace(std::move(pattern), std::move(content)));
  }
  if (type == "Strip") {
    D0_ASSIGN_OR_RETURN(const bool left, get_bool(j, "strip_left", false, here));
    D0_ASSIGN_OR_RETURN(const bool right, get_bool(j, "strip_right", false, here));
    return std::unique_ptr<Normalizer>(new Strip(left, right));
  }
  if (type == "Sequence") {
    const auto it = j.find("normalizers");
    if (it == j.end() || !it->is_array()) return field_error(here, "normalizers", "an array");
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (const json& step : *it) {
      if (step.is_null()) return make_error(here + ": null step");
      D0_ASSIGN_OR_RETURN(auto n, normalizer_from_json(step, file));
      steps.push_back(std::move(n));
    }
    return std::unique_ptr<Normalizer>(new Sequence(std::move(steps)));
  }
  return make_error(where + " type \"" + type + "\" is not supported");
}

}  // namespace day0::tok
