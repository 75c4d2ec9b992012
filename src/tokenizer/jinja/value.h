// Runtime values, mirroring @huggingface/jinja's RuntimeValue classes: undefined, none, bool, int, float
// (JS doubles), string, list/tuple, dict (insertion-ordered; also kwargs), namespace, callable, and the raw
// JS undefined `[]|first` yields. Lists and dicts are shared, as JS objects are.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace day0::jinja {

// A template error; `line` (1-based, 0 = not yet known) is filled in by the node that was being evaluated.
struct JinjaError {
  std::string message;
  int line = 0;
};
[[noreturn]] void fail(std::string message);

struct Value;
struct Env;
class Interp;

// Hole is the reference's raw JS `undefined` (not an UndefinedValue): what `[]|first` and `[]|last` return.
// Most uses of it throw there (a TypeError), so they fail here; see the Hole cases in the interpreter.
enum class Kind : unsigned char { Undefined, Null, Bool, Int, Float, String, List, Dict, Namespace, Function, Hole };

struct ListData {
  std::vector<Value> items;
  bool tuple = false;  // a TupleValue (from a tuple literal)
  int depth = 1;       // nesting depth, bounded so destruction and printing cannot overflow the stack
};

struct DictData {
  std::vector<std::pair<std::string, Value>> entries;  // insertion order
  bool kwargs = false;                                 // a KeywordArgumentsValue
  int depth = 1;

  const Value* find(std::string_view key) const;
  Value* find(std::string_view key);
  void set(std::string key, Value value);  // an existing key keeps its position
  bool erase(std::string_view key);

 private:
  std::unordered_map<std::string, std::size_t> index_;  // built once the dict grows past a few keys
  void reindex();
};

using Args = std::vector<Value>;
// A callable: positional arguments (keyword arguments as a trailing kwargs dict), the caller's scope.
using NativeFn = std::function<Value(Interp&, Args&, Env*)>;
struct FunctionData {
  NativeFn fn;
};

struct Value {
  Kind kind = Kind::Undefined;
  double num = 0;  // Bool (0/1), Int, Float
  std::shared_ptr<const std::string> str;
  std::shared_ptr<ListData> list;
  std::shared_ptr<DictData> dict;  // Dict and Namespace
  std::shared_ptr<FunctionData> fn;

  bool is(Kind k) const { return kind == k; }
  bool is_number() const { return kind == Kind::Int || kind == Kind::Float; }
  bool is_list() const { return kind == Kind::List; }
  bool is_dict() const { return kind == Kind::Dict; }  // ObjectValue, including keyword arguments
  bool is_container() const { return kind == Kind::Dict || kind == Kind::Namespace; }
  const std::string& s() const { return *str; }
};

Value make_undefined();
Value make_hole();
// Fails when `v` is a Hole, as the reference does when it reads a property of undefined.
void check_not_hole(const Value& v);
Value make_null();
Value make_bool(bool b);
Value make_int(double v);
Value make_float(double v);
Value make_str(std::string s);
Value make_list(std::vector<Value> items, bool tuple = false);
// Repeated keys keep their first position and last value, unless the caller vouches they are unique.
Value make_dict(std::vector<std::pair<std::string, Value>> entries, bool kwargs = false, bool unique_keys = false);
Value make_fn(NativeFn fn);

constexpr int kMaxValueDepth = 256;
constexpr std::size_t kMaxListSize = std::size_t{1} << 20;
constexpr double kMaxIndent = 1 << 20;  // for tojson(indent=...) and indent(width)

// The class name @huggingface/jinja reports in errors ("StringValue", "ArrayValue", ...).
const char* type_name(const Value& v);
// __bool__: Python truthiness for containers, JS truthiness otherwise.
bool truthy(const Value& v);
// JS truthiness of the raw value (`!!x.value`): every list, dict and function is true.
bool raw_truthy(const Value& v);

// RuntimeValue.toString(): what {{ v }} prints (floats as "1.0", containers as JSON).
std::string display(const Value& v);
// String(v.value): what `~` and `+` concatenate (floats as "1", lists joined by ",", dicts "[object Map]").
std::string raw_string(const Value& v);

struct JsonOptions {
  double indent = 0;  // 0: compact
  bool ensure_ascii = false;
  bool sort_keys = false;
  bool has_separators = false;
  std::string item_sep, key_sep;
};
// toJSON(): `undefined_to_null` false prints undefined as "undefined" (display of containers).
std::string to_json(const Value& v, const JsonOptions& options, bool undefined_to_null);

// ==, === and SameValueZero on the raw JS values (containers and functions by identity).
bool loose_equal(const Value& a, const Value& b);
bool strict_equal(const Value& a, const Value& b);
bool same_value_zero(const Value& a, const Value& b);

// JSON.parse-like conversion (integral numbers become ints; object keys in JS property order).
Value from_json(const nlohmann::json& j);
Value from_json(const nlohmann::ordered_json& j);

}  // namespace day0::jinja
