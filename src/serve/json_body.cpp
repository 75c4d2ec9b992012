// Strict JSON: a validating SAX pass (which never builds anything and stops at the first problem, so
// a 10k-deep or 1M-element body costs microseconds), then nlohmann's own DOM parse of the accepted text.
#include "serve/json_body.h"

#include <cmath>
#include <string>
#include <unordered_set>
#include <vector>

namespace day0 {
namespace {

using ojson = nlohmann::ordered_json;

class StrictSax {
 public:
  explicit StrictSax(const JsonLimits& limits) : limits_(limits) {}

  bool null() { return value_done(); }
  bool boolean(bool) { return value_done(); }
  bool number_integer(ojson::number_integer_t) { return value_done(); }
  bool number_unsigned(ojson::number_unsigned_t) { return value_done(); }
  bool number_float(ojson::number_float_t v, const ojson::string_t&) {
    if (!std::isfinite(v)) return fail("number out of range in the request body");
    return value_done();
  }
  bool string(ojson::string_t&) { return value_done(); }
  bool binary(ojson::binary_t&) { return value_done(); }
  bool start_object(std::size_t) { return open(false); }
  bool start_array(std::size_t) { return open(true); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(ojson::string_t& k) {
    Frame& f = frames_.back();
    f.key = k;
    if (!f.keys.insert(k).second) return fail("duplicate key '" + quote_user_text(k) + "' in the request body");
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& ex) {
    std::string what = ex.what();
    const std::size_t bracket = what.find("] ");
    if (what.rfind("[json.exception.", 0) == 0 && bracket != std::string::npos) what = what.substr(bracket + 2);
    return fail("request body is not valid JSON: " + quote_user_text(what, 300));
  }

  const ApiError& error() const { return error_; }

 private:
  struct Frame {
    bool is_array = false;
    std::int64_t count = 0;  // array: values seen
    std::string key;         // object: the key whose value is being read
    std::unordered_set<std::string> keys;
  };

  bool open(bool is_array) {
    if (static_cast<std::int32_t>(frames_.size()) >= limits_.max_depth)
      return fail("request body nests objects and arrays deeper than " + std::to_string(limits_.max_depth) +
                  " levels");
    frames_.emplace_back();
    frames_.back().is_array = is_array;
    return true;
  }
  bool close() {
    frames_.pop_back();
    return value_done();
  }
  bool value_done() {
    if (frames_.empty()) return true;
    Frame& f = frames_.back();
    if (f.is_array) {
      if (++f.count > limits_.max_array_elements) {
        const std::string array = array_path();
        return fail((array.empty() ? std::string("an array") : array) + " has more than " +
                        std::to_string(limits_.max_array_elements) + " elements",
                    array);
      }
    } else {
      f.key.clear();
    }
    return true;
  }

  // Where the parser is, as the OpenAI param of a field: "messages[2].content". A body whose root is
  // not an object has no field names, so it gets none.
  std::string path() const {
    if (frames_.empty() || frames_.front().is_array) return {};
    std::string p;
    for (const Frame& f : frames_) {
      if (f.is_array) {
        p.append("[").append(std::to_string(f.count)).append("]");
      } else {
        if (f.key.empty()) break;
        if (!p.empty()) p.append(".");
        p.append(quote_user_text(f.key));
      }
    }
    return p;
  }
  // The innermost array's own path, without the index of its element.
  std::string array_path() const {
    std::string p = path();
    const std::size_t bracket = p.rfind('[');
    if (bracket != std::string::npos) p.resize(bracket);
    return p;
  }
  bool fail(std::string message) { return fail(std::move(message), path()); }
  bool fail(std::string message, std::string param) {
    error_ = invalid_request(std::move(param), std::move(message));
    return false;
  }

  JsonLimits limits_;
  std::vector<Frame> frames_;
  ApiError error_;
};

bool only_whitespace(std::string_view s) {
  return s.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

}  // namespace

ApiResult<ojson> parse_json_body(std::string_view body, const JsonLimits& limits) {
  if (only_whitespace(body)) return invalid_request("", "request body is empty: expected a JSON object");
  if (body.size() >= 3 && body.substr(0, 3) == "\xEF\xBB\xBF")
    return invalid_request("", "request body starts with a UTF-8 byte order mark: send plain JSON");
  StrictSax sax(limits);
  if (!ojson::sax_parse(body.begin(), body.end(), &sax, ojson::input_format_t::json, true, false)) return sax.error();
  ojson j = ojson::parse(body.begin(), body.end(), nullptr, false);
  if (j.is_discarded()) return invalid_request("", "request body is not valid JSON");
  return j;
}

}  // namespace day0
