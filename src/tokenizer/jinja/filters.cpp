// Filters (`x | name` and `x | name(args)`), dispatched on the operand's type exactly as
// @huggingface/jinja's applyFilter: which filters exist depends on the type (e.g. `length` for strings,
// lists and dicts, `abs` only for numbers), and unknown combinations are runtime errors.
#include <algorithm>
#include <cmath>

#include "tokenizer/jinja/interp.h"
#include "tokenizer/jinja/js_string.h"

namespace day0::jinja {
namespace {

[[noreturn]] void cannot_apply(const std::string& name, const Value& v) {
  fail("Cannot apply filter \"" + name + "\" to type: " + type_name(v));
}

// Array.prototype.join over the raw values: null and undefined become "".
std::string join_raw(Interp& in, const std::vector<Value>& items, const std::string& sep) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    if (items[i].kind != Kind::Null && items[i].kind != Kind::Undefined) out += raw_string(items[i]);
    in.check_size(out.size());
  }
  return out;
}

// getAttributeValue: a dotted path through dicts, namespaces and list indices.
Value attribute_value(const Value& item, const std::string& path) {
  Value v = item;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (v.is_container()) {
      const Value* next = v.dict->find(part);
      v = next ? *next : make_undefined();
    } else if (v.is_list()) {
      const double idx = js_parse_int(part);
      if (std::isnan(idx) || idx < 0 || idx >= static_cast<double>(v.list->items.size())) return make_undefined();
      v = v.list->items[static_cast<std::size_t>(idx)];
    } else {
      return make_undefined();
    }
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

const Value* kwarg(const Kwargs& kwargs, std::string_view key) {
  for (const auto& [k, v] : kwargs)
    if (k == key) return &v;
  return nullptr;
}

// args[i] ?? kwargs[key] ?? fallback.
Value pick(const Args& args, std::size_t i, const Kwargs& kwargs, std::string_view key, Value fallback) {
  if (i < args.size() && args[i].kind != Kind::Hole) return args[i];
  if (const Value* v = kwarg(kwargs, key)) return *v;
  return fallback;
}

Value sorted(Interp& in, const Value& list, bool reverse, bool case_sensitive, const Value* attribute) {
  std::vector<Value> items = list.list->items;
  in.charge(items.size() * 4);
  std::string path;
  if (attribute) path = attribute->kind == Kind::Int ? js_number(attribute->num) : attribute->s();
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    const int r = attribute ? compare_values(attribute_value(a, path), attribute_value(b, path), case_sensitive)
                            : compare_values(a, b, case_sensitive);
    return (reverse ? -r : r) < 0;
  });
  return make_list(std::move(items));
}

Value tojson_call(Interp& in, const Value& operand, const Kwargs& kwargs) {
  JsonOptions o;
  const Value indent = kwarg(kwargs, "indent") ? *kwarg(kwargs, "indent") : make_null();
  if (indent.kind != Kind::Int && indent.kind != Kind::Null) fail("If set, indent must be a number");
  o.indent = indent.kind == Kind::Int ? indent.num : 0;
  const Value ascii = kwarg(kwargs, "ensure_ascii") ? *kwarg(kwargs, "ensure_ascii") : make_bool(false);
  if (ascii.kind != Kind::Bool) fail("If set, ensure_ascii must be a boolean");
  o.ensure_ascii = ascii.num != 0;
  const Value sort = kwarg(kwargs, "sort_keys") ? *kwarg(kwargs, "sort_keys") : make_bool(false);
  if (sort.kind != Kind::Bool) fail("If set, sort_keys must be a boolean");
  o.sort_keys = sort.num != 0;
  const Value seps = kwarg(kwargs, "separators") ? *kwarg(kwargs, "separators") : make_null();
  if (seps.is_list()) {
    const auto& s = seps.list->items;
    if (s.size() != 2 || s[0].kind != Kind::String || s[1].kind != Kind::String)
      fail("separators must be a tuple of two strings");
    o.has_separators = true;
    o.item_sep = s[0].s();
    o.key_sep = s[1].s();
  } else if (seps.kind != Kind::Null) {
    fail("If set, separators must be a tuple of two strings");
  }
  std::string out = to_json(operand, o, true);
  in.check_size(out.size());
  return make_str(std::move(out));
}

Value select_attr(Interp& in, const Value& operand, const Node& call, Env* env, bool select) {
  const char* name = select ? "selectattr" : "rejectattr";
  for (const Value& item : operand.list->items)
    if (!item.is_container()) fail(std::string("`") + name + "` can only be applied to array of objects");
  for (const NodePtr& a : call.list)
    if (a->kind != NodeKind::StrLit) fail(std::string("arguments of `") + name + "` must be strings");
  if (call.list.empty()) fail(std::string("`") + name + "` needs an attribute name");
  const std::string attr = call.list[0]->str;
  const std::string* test = call.list.size() > 1 ? &call.list[1]->str : nullptr;
  Value test_arg;
  const Value* arg = nullptr;
  if (call.list.size() > 2) {
    test_arg = in.eval(*call.list[2], env);
    arg = &test_arg;
  }
  std::vector<Value> out;
  in.charge(operand.list->items.size());
  for (const Value& item : operand.list->items) {
    const Value* a = item.dict->find(attr);
    const bool r = a ? (test ? apply_test(*test, *a, arg) : truthy(*a)) : false;
    if (select ? r : !r) out.push_back(item);
  }
  return make_list(std::move(out));
}

Value filter_name_only(Interp& in, const Value& operand, const std::string& name, Env* env) {
  (void)env;
  if (name == "safe") return operand;
  if (name == "tojson") {
    std::string out = to_json(operand, JsonOptions{}, true);
    in.check_size(out.size());
    return make_str(std::move(out));
  }
  if (operand.is_list()) {
    const auto& items = operand.list->items;
    if (name == "list") return operand;
    if (name == "first" || name == "last") {
      if (items.empty()) return make_hole();  // JS undefined, not an UndefinedValue
      return name == "first" ? items.front() : items.back();
    }
    if (name == "length") return make_int(static_cast<double>(items.size()));
    if (name == "reverse") {
      in.charge(items.size());
      return make_list(std::vector<Value>(items.rbegin(), items.rend()));
    }
    if (name == "sort") return sorted(in, operand, false, false, nullptr);
    if (name == "join") return make_str(join_raw(in, items, ""));
    if (name == "string") return make_str(to_json(operand, JsonOptions{}, false));
    if (name == "unique") {
      std::vector<Value> out;
      in.charge(items.size() * items.size() / 16 + items.size());
      for (const Value& item : items) {
        bool seen = false;
        for (const Value& o : out) seen = seen || same_value_zero(o, item);
        if (!seen) out.push_back(item);
      }
      return make_list(std::move(out));
    }
    fail("Unknown ArrayValue filter: " + name);
  }
  if (operand.kind == Kind::String) {
    const std::string& s = operand.s();
    if (name == "length") return make_int(static_cast<double>(utf16_length(s)));
    if (name == "upper") return make_str(js_upper(s));
    if (name == "lower") return make_str(js_lower(s));
    if (name == "title") return make_str(js_title(s));
    if (name == "capitalize") return make_str(js_capitalize(s));
    if (name == "trim") return make_str(js_trim(s));
    if (name == "indent") {
      std::string out;
      std::size_t start = 0;
      while (true) {
        const std::size_t nl = s.find('\n', start);
        const std::string_view line =
            std::string_view(s).substr(start, nl == std::string::npos ? std::string::npos : nl - start);
        if (start > 0 && !line.empty()) out += "    ";
        out.append(line);
        if (nl == std::string::npos) break;
        out.push_back('\n');
        start = nl + 1;
      }
      in.check_size(out.size());
      return make_str(std::move(out));
    }
    if (name == "join" || name == "string") return operand;
    if (name == "int") {
      const double v = js_parse_int(s);
      return make_int(std::isnan(v) ? 0 : v);
    }
    if (name == "float") {
      const double v = js_parse_float(s);
      return make_float(std::isnan(v) ? 0 : v);
    }
    fail("Unknown StringValue filter: " + name);
  }
  if (operand.is_number()) {
    if (name == "abs")
      return operand.kind == Kind::Int ? make_int(std::fabs(operand.num)) : make_float(std::fabs(operand.num));
    if (name == "int") return make_int(std::floor(operand.num));
    if (name == "float") return make_float(operand.num);
    if (name == "string") return make_str(display(operand));
    fail("Unknown NumericValue filter: " + name);
  }
  if (operand.is_dict()) {
    if (name == "length") return make_int(static_cast<double>(operand.dict->entries.size()));
    Args none;
    bool found = false;
    Value v = dict_method(in, operand, name, none, &found);
    if (found) return v;
    fail("Unknown ObjectValue filter: " + name);
  }
  if (operand.kind == Kind::Bool) {
    const bool b = operand.num != 0;
    if (name == "bool") return operand;
    if (name == "int") return make_int(b ? 1 : 0);
    if (name == "float") return make_float(b ? 1 : 0);
    if (name == "string") return make_str(b ? "true" : "false");
    fail("Unknown BooleanValue filter: " + name);
  }
  cannot_apply(name, operand);
}

Value filter_call(Interp& in, const Value& operand, const Node& call, Env* env) {
  if (call.a->kind != NodeKind::Ident) fail("Unknown filter: a call of a non-identifier");
  const std::string& name = call.a->str;
  if (name == "tojson") return tojson_call(in, operand, in.eval_args(call.list, env).second);
  if (name == "join") {
    if (operand.kind != Kind::String && !operand.is_list()) cannot_apply(name, operand);
    auto [args, kwargs] = in.eval_args(call.list, env);
    const Value sep = pick(args, 0, kwargs, "separator", make_str(""));
    if (sep.kind != Kind::String) fail("separator must be a string");
    if (operand.is_list()) return make_str(join_raw(in, operand.list->items, sep.s()));
    std::string out;
    const std::string& s = operand.s();
    for (std::size_t i = 0, n = 0; i < s.size(); i += n) {
      if (i) out += sep.s();
      js_decode(s, i, &n);
      out.append(s, i, n);
      in.check_size(out.size());
    }
    return make_str(std::move(out));
  }
  if (name == "int" || name == "float") {
    const bool is_int = name == "int";
    auto [args, kwargs] = in.eval_args(call.list, env);
    const Value def = pick(args, 0, kwargs, "default", is_int ? make_int(0) : make_float(0));
    if (operand.kind == Kind::String) {
      const double v = is_int ? js_parse_int(operand.s()) : js_parse_float(operand.s());
      return std::isnan(v) ? def : is_int ? make_int(v) : make_float(v);
    }
    if (operand.is_number()) return operand;
    if (operand.kind == Kind::Bool) return is_int ? make_int(operand.num) : make_float(operand.num);
    cannot_apply(name, operand);
  }
  if (name == "default") {
    auto [args, kwargs] = in.eval_args(call.list, env);
    const Value def = args.empty() || args[0].kind == Kind::Hole ? make_str("") : args[0];
    const Value boolean = pick(args, 1, kwargs, "boolean", make_bool(false));
    if (boolean.kind != Kind::Bool) fail("`default` filter flag must be a boolean");
    if (operand.kind == Kind::Undefined || (boolean.num != 0 && !truthy(operand))) return def;
    return operand;
  }
  if (operand.is_list()) {
    if (name == "sort") {
      auto [args, kwargs] = in.eval_args(call.list, env);
      const Value reverse = pick(args, 0, kwargs, "reverse", make_bool(false));
      if (reverse.kind != Kind::Bool) fail("reverse must be a boolean");
      const Value cs = pick(args, 1, kwargs, "case_sensitive", make_bool(false));
      if (cs.kind != Kind::Bool) fail("case_sensitive must be a boolean");
      const Value attribute = pick(args, 2, kwargs, "attribute", make_null());
      if (attribute.kind != Kind::String && attribute.kind != Kind::Int && attribute.kind != Kind::Null)
        fail("attribute must be a string, integer, or null");
      return sorted(in, operand, reverse.num != 0, cs.num != 0, attribute.kind == Kind::Null ? nullptr : &attribute);
    }
    if (name == "selectattr" || name == "rejectattr") return select_attr(in, operand, call, env, name == "selectattr");
    if (name == "map") {
      const Kwargs kwargs = in.eval_args(call.list, env).second;
      const Value* attr = kwarg(kwargs, "attribute");
      if (!attr) fail("`map` expressions without `attribute` set are not currently supported.");
      if (attr->kind != Kind::String) fail("attribute must be a string");
      const Value* def = kwarg(kwargs, "default");
      std::vector<Value> out;
      in.charge(operand.list->items.size());
      for (const Value& item : operand.list->items) {
        if (!item.is_container()) fail("items in map must be an object");
        Value v = attribute_value(item, attr->s());
        out.push_back(v.kind == Kind::Undefined && def ? *def : v);
      }
      return make_list(std::move(out));
    }
    fail("Unknown ArrayValue filter: " + name);
  }
  if (operand.kind == Kind::String) {
    if (name == "indent") {
      auto [args, kwargs] = in.eval_args(call.list, env);
      const Value width = pick(args, 0, kwargs, "width", make_int(4));
      if (width.kind != Kind::Int) fail("width must be a number");
      const Value first = pick(args, 1, kwargs, "first", make_bool(false));
      const Value blank = pick(args, 2, kwargs, "blank", make_bool(false));
      if (width.num < 0 || width.num > kMaxIndent) fail("Invalid count value: " + js_number(width.num));
      const std::string pad(static_cast<std::size_t>(width.num), ' ');
      const std::string& s = operand.s();
      std::string out;
      std::size_t start = 0;
      for (std::size_t i = 0;; ++i) {
        const std::size_t nl = s.find('\n', start);
        const std::string_view line =
            std::string_view(s).substr(start, nl == std::string::npos ? std::string::npos : nl - start);
        if (!((!raw_truthy(first) && i == 0) || (!raw_truthy(blank) && line.empty()))) out += pad;
        out.append(line);
        in.check_size(out.size());
        if (nl == std::string::npos) break;
        out.push_back('\n');
        start = nl + 1;
      }
      return make_str(std::move(out));
    }
    if (name == "replace") {
      auto [args, kwargs] = in.eval_args(call.list, env);
      args.push_back(make_dict(std::move(kwargs), true));
      Value fn = get_member(in, operand, make_str("replace"));
      return fn.fn->fn(in, args, env);
    }
    fail("Unknown StringValue filter: " + name);
  }
  if (operand.is_dict()) {
    if (name == "get" || name == "items" || name == "keys" || name == "values" || name == "dictsort") {
      auto [args, kwargs] = in.eval_args(call.list, env);
      if (!kwargs.empty()) args.push_back(make_dict(std::move(kwargs), true));
      bool found = false;
      return dict_method(in, operand, name, args, &found);
    }
    fail("Unknown ObjectValue filter: " + name);
  }
  cannot_apply(name, operand);
}

}  // namespace

Value apply_filter(Interp& in, const Value& operand, const Node& filter, Env* env) {
  if (filter.kind == NodeKind::Ident) return filter_name_only(in, operand, filter.str, env);
  if (filter.kind == NodeKind::Call) return filter_call(in, operand, filter, env);
  fail("Unknown filter: not a name or a call");
}

}  // namespace day0::jinja
