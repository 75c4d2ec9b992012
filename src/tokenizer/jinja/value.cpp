// Runtime values: construction (with bounded nesting), truthiness, the two string conversions
// @huggingface/jinja uses (RuntimeValue.toString and String(value)), its toJSON, JS equality, and the
// conversion of nlohmann JSON input into values.
#include "tokenizer/jinja/value.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "tokenizer/jinja/js_string.h"

namespace day0::jinja {

void fail(std::string message) { throw JinjaError{std::move(message), 0}; }

// ---- DictData ----

const Value* DictData::find(std::string_view key) const {
  if (!index_.empty()) {
    auto it = index_.find(std::string(key));
    return it == index_.end() ? nullptr : &entries[it->second].second;
  }
  for (const auto& [k, v] : entries)
    if (k == key) return &v;
  return nullptr;
}

Value* DictData::find(std::string_view key) { return const_cast<Value*>(std::as_const(*this).find(key)); }

void DictData::set(std::string key, Value value) {
  if (Value* v = find(key)) {
    *v = std::move(value);
    return;
  }
  entries.emplace_back(std::move(key), std::move(value));
  if (!index_.empty())
    index_.emplace(entries.back().first, entries.size() - 1);
  else if (entries.size() > 12)
    reindex();
}

bool DictData::erase(std::string_view key) {
  auto it = std::find_if(entries.begin(), entries.end(), [&](const auto& e) { return e.first == key; });
  if (it == entries.end()) return false;
  entries.erase(it);
  if (!index_.empty()) reindex();
  return true;
}

void DictData::reindex() {
  index_.clear();
  for (std::size_t i = 0; i < entries.size(); ++i) index_.emplace(entries[i].first, i);
}

// ---- construction ----

namespace {

int depth_of(const Value& v) {
  if (v.kind == Kind::List) return v.list->depth;
  if (v.kind == Kind::Dict) return v.dict->depth;
  return 0;
}

void check_depth(int depth) {
  if (depth > kMaxValueDepth) fail("value nested more than " + std::to_string(kMaxValueDepth) + " levels deep");
}

}  // namespace

Value make_undefined() { return Value{}; }
Value make_hole() {
  Value v;
  v.kind = Kind::Hole;
  return v;
}
void check_not_hole(const Value& v) {
  if (v.kind == Kind::Hole) fail("Cannot read properties of undefined (the result of first/last on an empty list)");
}
Value make_null() {
  Value v;
  v.kind = Kind::Null;
  return v;
}
Value make_bool(bool b) {
  Value v;
  v.kind = Kind::Bool;
  v.num = b ? 1 : 0;
  return v;
}
Value make_int(double n) {
  Value v;
  v.kind = Kind::Int;
  v.num = n;
  return v;
}
Value make_float(double n) {
  Value v;
  v.kind = Kind::Float;
  v.num = n;
  return v;
}
Value make_str(std::string s) {
  Value v;
  v.kind = Kind::String;
  v.str = std::make_shared<const std::string>(std::move(s));
  return v;
}
Value make_list(std::vector<Value> items, bool tuple) {
  if (items.size() > kMaxListSize) fail("list of more than " + std::to_string(kMaxListSize) + " elements");
  for (const Value& item : items) check_not_hole(item);
  auto data = std::make_shared<ListData>();
  int depth = 0;
  for (const Value& item : items) depth = std::max(depth, depth_of(item));
  check_depth(depth + 1);
  data->items = std::move(items);
  data->tuple = tuple;
  data->depth = depth + 1;
  Value v;
  v.kind = Kind::List;
  v.list = std::move(data);
  return v;
}
Value make_dict(std::vector<std::pair<std::string, Value>> entries, bool kwargs, bool unique_keys) {
  auto data = std::make_shared<DictData>();
  int depth = 0;
  for (const auto& e : entries) {
    check_not_hole(e.second);
    depth = std::max(depth, depth_of(e.second));
  }
  if (unique_keys && entries.size() <= 12) {
    data->entries = std::move(entries);
  } else {
    for (auto& [k, item] : entries) data->set(std::move(k), std::move(item));
  }
  check_depth(depth + 1);
  data->kwargs = kwargs;
  data->depth = depth + 1;
  Value v;
  v.kind = Kind::Dict;
  v.dict = std::move(data);
  return v;
}
Value make_fn(NativeFn fn) {
  Value v;
  v.kind = Kind::Function;
  v.fn = std::make_shared<FunctionData>(FunctionData{std::move(fn)});
  return v;
}

const char* type_name(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined:
      return "UndefinedValue";
    case Kind::Null:
      return "NullValue";
    case Kind::Bool:
      return "BooleanValue";
    case Kind::Int:
      return "IntegerValue";
    case Kind::Float:
      return "FloatValue";
    case Kind::String:
      return "StringValue";
    case Kind::List:
      return v.list->tuple ? "TupleValue" : "ArrayValue";
    case Kind::Dict:
      return v.dict->kwargs ? "KeywordArgumentsValue" : "ObjectValue";
    case Kind::Namespace:
      return "NamespaceValue";
    case Kind::Function:
      return "FunctionValue";
    case Kind::Hole:
      return "undefined";
  }
  return "?";
}

bool raw_truthy(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined:
    case Kind::Null:
    case Kind::Hole:
      return false;
    case Kind::Bool:
    case Kind::Int:
    case Kind::Float:
      return v.num != 0 && !std::isnan(v.num);
    case Kind::String:
      return !v.s().empty();
    default:
      return true;
  }
}

bool truthy(const Value& v) {
  check_not_hole(v);
  if (v.kind == Kind::List) return !v.list->items.empty();
  if (v.kind == Kind::Dict) return !v.dict->entries.empty();
  return raw_truthy(v);
}

// ---- string conversions ----

std::string display(const Value& v) {
  check_not_hole(v);
  switch (v.kind) {
    case Kind::Undefined:
      return "undefined";
    case Kind::Null:
      return "null";
    case Kind::Bool:
      return v.num != 0 ? "true" : "false";
    case Kind::Int:
      return js_number(v.num);
    case Kind::Float:
      if (v.num == 0 && std::signbit(v.num)) return "-0.0";
      return std::isfinite(v.num) && std::fmod(v.num, 1.0) == 0 ? js_fixed1(v.num) : js_number(v.num);
    case Kind::String:
      return v.s();
    case Kind::List:
    case Kind::Dict:
    case Kind::Namespace:
      return to_json(v, JsonOptions{}, false);
    case Kind::Function:
      return "[Function]";
    case Kind::Hole:
      break;
  }
  return {};
}

std::string raw_string(const Value& v) {
  check_not_hole(v);
  switch (v.kind) {
    case Kind::Int:
    case Kind::Float:
      return js_number(v.num);
    case Kind::List: {
      std::string out;
      for (std::size_t i = 0; i < v.list->items.size(); ++i) {
        if (i) out.push_back(',');
        out += display(v.list->items[i]);
      }
      return out;
    }
    case Kind::Dict:
    case Kind::Namespace:
      return "[object Map]";
    default:
      return display(v);
  }
}

namespace {

// An approximation of String.prototype.localeCompare (ICU root collation) for sort_keys: punctuation,
// then digits, then letters case-insensitively; lowercase first on ties.
int locale_compare(const std::string& a, const std::string& b) {
  const auto primary = [](unsigned char c) -> int {
    if (c >= 'a' && c <= 'z') return 1000 + (c - 'a');
    if (c >= 'A' && c <= 'Z') return 1000 + (c - 'A');
    if (c >= '0' && c <= '9') return 500 + c;
    return c < 0x80 ? c : 2000 + c;
  };
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const int pa = primary(static_cast<unsigned char>(a[i])), pb = primary(static_cast<unsigned char>(b[i]));
    if (pa != pb) return pa < pb ? -1 : 1;
  }
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return a[i] > b[i] ? -1 : 1;  // lowercase (larger code) first
  }
  return 0;
}

// "\n" followed by `unit` n times.
std::string newline_and(const std::string& unit, std::size_t n) {
  std::string out(1, '\n');
  for (std::size_t i = 0; i < n; ++i) out += unit;
  return out;
}

void json_rec(std::string& out, const Value& v, const JsonOptions& o, int depth, bool undef_null) {
  if (depth > kMaxValueDepth + 8) fail("value nested too deeply to convert to JSON");
  check_not_hole(v);
  switch (v.kind) {
    case Kind::Null:
      out += "null";
      return;
    case Kind::Undefined:
      out += undef_null ? "null" : "undefined";
      return;
    case Kind::Int:
    case Kind::Float:
      out += std::isfinite(v.num) ? js_number(v.num) : "null";
      return;
    case Kind::Bool:
      out += v.num != 0 ? "true" : "false";
      return;
    case Kind::String:
      js_json_quote(out, v.s(), o.ensure_ascii);
      return;
    default:
      break;
  }
  if ((v.kind == Kind::List && v.list->tuple) || (v.kind == Kind::Dict && v.dict->kwargs) || v.kind == Kind::Function)
    fail(std::string("Cannot convert to JSON: ") + type_name(v));
  const bool indent = o.indent != 0 && !std::isnan(o.indent);
  // " ".repeat(indent): RangeError when negative; an indent beyond any output size is refused too.
  if (indent && (o.indent < 0 || o.indent > kMaxIndent)) fail("Invalid count value: " + js_number(o.indent));
  const std::string item_sep = o.has_separators ? o.item_sep : indent ? "," : ", ";
  const std::string key_sep = o.has_separators ? o.key_sep : ": ";
  const std::string unit = indent ? std::string(static_cast<std::size_t>(o.indent), ' ') : "";
  const std::string base = newline_and(unit, static_cast<std::size_t>(depth));
  const std::string child = base + unit;
  if (v.kind == Kind::List) {
    const auto& items = v.list->items;
    out.push_back('[');
    if (indent && !items.empty()) out += child;
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (i) out += indent ? item_sep + child : item_sep;
      json_rec(out, items[i], o, depth + 1, undef_null);
    }
    if (indent && !items.empty()) out += base;
    out.push_back(']');
    return;
  }
  std::vector<const std::pair<std::string, Value>*> entries;
  for (const auto& e : v.dict->entries) entries.push_back(&e);
  if (o.sort_keys)
    std::stable_sort(entries.begin(), entries.end(),
                     [](const auto* a, const auto* b) { return locale_compare(a->first, b->first) < 0; });
  out.push_back('{');
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (i) out += item_sep;
    if (indent) out += child;
    js_json_quote(out, entries[i]->first, o.ensure_ascii);
    out += key_sep;
    json_rec(out, entries[i]->second, o, depth + 1, undef_null);
  }
  if (indent && !entries.empty()) out += base;
  out.push_back('}');
}

// The JS type of a raw value, for equality.
enum class JsType { Undefined, Null, Boolean, Number, String, Object };

JsType js_type(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined:
      return JsType::Undefined;
    case Kind::Null:
      return JsType::Null;
    case Kind::Bool:
      return JsType::Boolean;
    case Kind::Int:
    case Kind::Float:
      return JsType::Number;
    case Kind::String:
      return JsType::String;
    default:
      return JsType::Object;
  }
}

const void* identity(const Value& v) {
  if (v.list) return v.list.get();
  if (v.dict) return v.dict.get();
  return v.fn.get();
}

bool strict_same_type(const Value& a, const Value& b, bool nan_equal) {
  switch (js_type(a)) {
    case JsType::Undefined:
    case JsType::Null:
      return true;
    case JsType::Boolean:
      return a.num == b.num;
    case JsType::Number:
      return a.num == b.num || (nan_equal && std::isnan(a.num) && std::isnan(b.num));
    case JsType::String:
      return a.s() == b.s();
    case JsType::Object:
      return identity(a) == identity(b);
  }
  return false;
}

}  // namespace

std::string to_json(const Value& v, const JsonOptions& options, bool undefined_to_null) {
  std::string out;
  json_rec(out, v, options, 0, undefined_to_null);
  return out;
}

bool strict_equal(const Value& a, const Value& b) {
  check_not_hole(a);
  check_not_hole(b);
  return js_type(a) == js_type(b) && strict_same_type(a, b, false);
}

bool same_value_zero(const Value& a, const Value& b) {
  check_not_hole(a);
  check_not_hole(b);
  return js_type(a) == js_type(b) && strict_same_type(a, b, true);
}

bool loose_equal(const Value& a, const Value& b) {
  check_not_hole(a);
  check_not_hole(b);
  const JsType ta = js_type(a), tb = js_type(b);
  if (ta == tb) return strict_same_type(a, b, false);
  const auto nullish = [](JsType t) { return t == JsType::Undefined || t == JsType::Null; };
  if (nullish(ta) || nullish(tb)) return nullish(ta) && nullish(tb);
  if (ta == JsType::Boolean) return loose_equal(make_int(a.num), b);
  if (tb == JsType::Boolean) return loose_equal(a, make_int(b.num));
  if (ta == JsType::Number && tb == JsType::String) return a.num == js_to_number(b.s());
  if (ta == JsType::String && tb == JsType::Number) return js_to_number(a.s()) == b.num;
  if (ta == JsType::Object) return loose_equal(make_str(raw_string(a)), b);
  if (tb == JsType::Object) return loose_equal(a, make_str(raw_string(b)));
  return false;
}

// ---- JSON input ----

namespace {

// Canonical array-index keys ("0".."4294967294") come first in JS property order.
bool array_index_key(const std::string& k, std::uint64_t* index) {
  if (k.empty() || k.size() > 10 || (k.size() > 1 && k[0] == '0')) return false;
  std::uint64_t v = 0;
  for (char c : k) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  *index = v;
  return v <= 4294967294ULL;
}

template <class J>
Value convert(const J& j, int depth) {
  if (depth > kMaxValueDepth) fail("context nested more than " + std::to_string(kMaxValueDepth) + " levels deep");
  switch (j.type()) {
    case nlohmann::json::value_t::null:
    case nlohmann::json::value_t::discarded:
      return make_null();
    case nlohmann::json::value_t::boolean:
      return make_bool(j.template get<bool>());
    case nlohmann::json::value_t::number_integer:
      return make_int(static_cast<double>(j.template get<std::int64_t>()));
    case nlohmann::json::value_t::number_unsigned:
      return make_int(static_cast<double>(j.template get<std::uint64_t>()));
    case nlohmann::json::value_t::number_float: {
      const double d = j.template get<double>();
      return std::isfinite(d) && std::trunc(d) == d ? make_int(d) : make_float(d);
    }
    case nlohmann::json::value_t::string:
      return make_str(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(convert(e, depth + 1));
      return make_list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      std::vector<std::pair<std::uint64_t, std::string>> indexed;
      std::vector<std::pair<std::string, Value>> entries;
      for (auto it = j.begin(); it != j.end(); ++it) {
        std::uint64_t idx = 0;
        if (array_index_key(it.key(), &idx)) indexed.emplace_back(idx, it.key());
      }
      std::sort(indexed.begin(), indexed.end());
      for (const auto& [idx, key] : indexed) entries.emplace_back(key, convert(j.at(key), depth + 1));
      for (auto it = j.begin(); it != j.end(); ++it) {
        std::uint64_t idx = 0;
        if (!array_index_key(it.key(), &idx)) entries.emplace_back(it.key(), convert(it.value(), depth + 1));
      }
      return make_dict(std::move(entries), false, true);
    }
    case nlohmann::json::value_t::binary:
      fail("binary JSON values are not supported");
  }
  return make_null();
}

}  // namespace

Value from_json(const nlohmann::json& j) { return convert(j, 0); }
Value from_json(const nlohmann::ordered_json& j) { return convert(j, 0); }

}  // namespace day0::jinja
